"""The native engine is the executable specification, packet for packet, counter for counter, bit for bit.

Every test here drives `Twin` (tests/hostlib/twin.py): hostlib.engine.Engine and
hostlib.native.NativeEngine fed the same inputs at the same (virtual) times, every packet out,
every counter, the timer and the final results compared as they happen. The inputs come from the
fabric (the real P4 program, with loss, duplication, delay and reordering) and from random fault
scripts against a scripted switch that also forges keys, sends notices for the wrong use, ABORTs
calls ahead, STALEs, truncates and garbles datagrams, and returns NaN/Inf blocks and arbitrary
sums. The rest: the C constants equal the Python ones, float16 results round as numpy does, bad
arguments are clear errors, and a missing build says how to build it.
"""

from __future__ import annotations

import heapq
import os
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pytest

from contracts import protocol
from contracts.protocol import EXP_BIAS, EXP_NONFINITE, HEADER_BYTES, MsgType, payload_bytes
from hostlib import Communicator, JobSpec
from hostlib import engine as spec_engine
from hostlib import quantize as q
from hostlib.calls import AllreduceError, Descriptor, DType, NonFinite, Op
from hostlib.engine import HEADER, Membership
from hostlib.native import BUILD_HINT, NativeEngine, _native, native_plan
from hostlib.reduction import plan_for
from hostlib.reflector import NativeReflector
from hostlib.verify import check, make_input
from tests.hostlib.fabric import Fabric, Packet, random_faults
from tests.hostlib.twin import Twin, TwinPlan

KEY = 0x5EED0021
JOB = 21
DTYPES = {"int32": DType.INT32, "float32": DType.FLOAT32, "float16": DType.FLOAT16}


# ------------------------------------------------------------------------------------------ constants


def test_the_native_constants_are_the_protocols_and_the_specifications() -> None:
    for name in ("HEADER_BYTES", "MAX_WORKERS", "EXP_BIAS", "EXP_NONE", "EXP_NONFINITE", "USE_BITS",
                 "MAX_USES_PER_CALL", "CALL_NUMBERS", "SET_BIT", "SLOT_MASK"):  # fmt: skip
        assert getattr(_native, name) == getattr(protocol, name), name
    for message in MsgType:
        assert getattr(_native, message.name) == message.value
    for name in ("RTO_MIN", "RTO_MAX", "RTO_INITIAL", "QUESTION_MIN", "RTO_SRTT_MULTIPLE",
                 "FAST_RETRANSMIT_AFTER", "REORDER_SHARE", "REMEMBERED_ABORTS", "RTT_SAMPLES",
                 "QUESTION_BACKOFFS", "QUESTION_MEMORY", "QUESTION_WAIT_SHARE", "LOSS_MEMORY",
                 "QUEUE_DELAY", "QUEUE_TARGET", "QUESTION_BUDGET"):  # fmt: skip
        assert getattr(_native, name) == getattr(spec_engine, name), name
    assert (_native.CODE_POS_INF, _native.CODE_NEG_INF, _native.CODE_NAN) == (
        q.CODE_POS_INF, q.CODE_NEG_INF, q.CODE_NAN,
    )  # fmt: skip
    assert (_native.CODE16_POS_INF, _native.CODE16_NEG_INF, _native.CODE16_NAN) == (
        q.CODE16_POS_INF, q.CODE16_NEG_INF, q.CODE16_NAN,
    )  # fmt: skip
    assert max(protocol.SUPPORTED_VALUES_PER_PACKET) == 1024  # the C side's largest K (P4R_MAX_VALUES)


# ------------------------------------------------------------------------------------------ the fabric


@pytest.mark.parametrize(
    ("world", "pool", "k", "dtype", "faults"),
    [
        (1, 2, 64, "float32", dict(drop=0.1)),
        (2, 8, 32, "int32", dict(drop=0.05, duplicate=0.05, delay=0.05)),
        (3, 16, 64, "float32", dict(drop=0.03, delay=0.2, delay_range=(0.0001, 0.01))),  # reordering
        (4, 64, 64, "float16", dict(drop=0.05, duplicate=0.1)),
        (4, 32, 256, "float32", dict(duplicate=0.2, delay=0.1)),
        (2, 2048, 64, "int32", dict(drop=0.02)),
        (4, 16, 1024, "float32", dict(drop=0.05, delay=0.1)),  # the embedded switch's jumbo K
    ],
)
def test_the_engines_agree_through_the_switch_under_faults(
    world: int, pool: int, k: int, dtype: str, faults: dict
) -> None:
    fabric = Fabric(world=world, pool=pool, k=k, engine="twin", fault=random_faults(world + pool, **faults))
    rng = np.random.default_rng(world * pool)
    for size, op in ((37 * k + 5, Op.SUM), (3 * k, Op.AVG), (1, Op.SUM)):
        inputs = [random_input(rng, dtype, size) for _ in range(world)]
        results = fabric.run(fabric.plans(inputs, op=op))
        assert all(isinstance(r, np.ndarray) for r in results), results
        assert all(r.tobytes() == results[0].tobytes() for r in results), "every rank decodes the same"
        fabric.drain(0.1)


@pytest.mark.parametrize(
    ("world", "pool", "k", "dtype", "faults"),
    [
        (4, 16, 64, "float32", dict(drop=0.05, duplicate=0.05)),
        (3, 8, 32, "float16", dict(drop=0.05, delay=0.2, delay_range=(0.0001, 0.01))),
        (2, 16, 1024, "bfloat16", dict(drop=0.03, delay=0.1)),
        (1, 2, 64, "bfloat16", dict(drop=0.1)),
    ],
)
def test_the_engines_agree_at_16_bits_per_value(
    world: int, pool: int, k: int, dtype: str, faults: dict
) -> None:
    """2K values per packet, two per word; bfloat16 as its bit patterns in and out; a NaN's block."""
    fabric = Fabric(world=world, pool=pool, k=k, engine="twin", fault=random_faults(world + k, **faults))
    rng = np.random.default_rng(world * k)
    for size, op in ((37 * k + 5, Op.SUM), (3 * k, Op.AVG), (1, Op.SUM), (2 * k + 1, Op.SUM)):
        inputs = [random_input(rng, dtype, size) for _ in range(world)]
        inputs[-1][size // 2] = 0x7FC0 if dtype == "bfloat16" else np.nan
        results = fabric.run(fabric.plans(inputs, op=op, bits=16))
        assert all(isinstance(r, np.ndarray) for r in results), results
        assert all(r.tobytes() == results[0].tobytes() for r in results), "every rank decodes the same"
        block = size // 2 // (2 * k) * 2 * k
        assert np.isnan(results[0][block : block + 2 * k]).all(), "the NaN's block of 2K is NaN"
        fabric.drain(0.1)


def test_the_engines_agree_on_mismatched_calls_nan_blocks_and_raise_mode() -> None:
    fabric = Fabric(world=3, pool=8, engine="twin", fault=random_faults(5, drop=0.05, duplicate=0.05))
    rng = np.random.default_rng(5)
    inputs = [random_input(rng, "float32", 700) for _ in range(3)]
    inputs[1][10] = np.nan
    inputs[2][400] = np.inf
    assert all(isinstance(r, np.ndarray) for r in fabric.run(fabric.plans(inputs)))
    raising = fabric.run(fabric.plans(inputs, nonfinite=NonFinite.RAISE))
    assert all("NaN or Inf" in str(r) for r in raising)
    plans = fabric.plans([random_input(rng, "int32", 640) for _ in range(3)])
    plans[2] = fabric.plans([random_input(rng, "int32", 641)])[0]
    assert all(isinstance(r, AllreduceError) for r in fabric.run(plans))
    fabric.drain(0.05)
    assert all(isinstance(r, np.ndarray) for r in fabric.run(fabric.plans(inputs)))


def test_the_engines_agree_when_a_lost_result_leaves_a_rank_behind() -> None:
    def lose_results_to_rank0(packet: Packet) -> list[float]:
        return [] if not packet.upstream and packet.rank == 0 and packet.number % 7 == 3 else [0.0]

    fabric = Fabric(world=2, pool=4, engine="twin", fault=lose_results_to_rank0)
    rng = np.random.default_rng(9)
    for _ in range(3):
        inputs = [random_input(rng, "int32", 50 * 64) for _ in range(2)]
        assert all(isinstance(r, np.ndarray) for r in fabric.run(fabric.plans(inputs)))


# ------------------------------------------------------------------------------------------ random scripts


@dataclass
class Script:
    """A scripted switch for one rank: answers what the rank sends, and misbehaves on purpose."""

    rng: random.Random
    member: Membership
    now: float = 0.0
    queue: list[tuple[float, int, bytes]] = field(default_factory=list)
    replays: dict[tuple[int, int], bytes] = field(default_factory=dict)
    order: int = 0

    def deliver_later(self, datagram: bytes, delay: float | None = None) -> None:
        delay = self.rng.choice([0.0001, 0.0002, 0.0005, 0.002, 0.05]) if delay is None else delay
        self.order += 1
        heapq.heappush(self.queue, (self.now + delay, self.order, datagram))

    def sent(self, packet: bytes) -> None:
        """The rank sent `packet`: a RESULT, MISSING, STALE, ABORT or nothing comes back."""
        fields = list(HEADER.unpack_from(packet))
        use = (fields[3], fields[6])
        roll = self.rng.random()
        if roll < 0.08:
            return  # lost
        if packet[0] == MsgType.QUERY:
            if use in self.replays and roll < 0.6:
                self.deliver_later(self.replays[use])
            else:
                fields[0], fields[9] = MsgType.MISSING, self.rng.getrandbits(self.member.world_size)
                self.deliver_later(HEADER.pack(*fields))
            return
        if roll < 0.12:
            fields[0], fields[9] = MsgType.STALE, fields[6] + (1 << 16)
            self.deliver_later(HEADER.pack(*fields))
            return
        if roll < 0.14:
            fields[0], fields[9] = MsgType.ABORT, self.rng.choice([0, fields[8] ^ 1])
            fields[6] += self.rng.choice([0, 1 << 16, 2 << 16])  # this call or one ahead
            self.deliver_later(HEADER.pack(*fields))
            return
        fields[0] = MsgType.RESULT
        fields[4] = max(fields[4], self.rng.choice([0, 1, 100, 128, 130, 200, 254, 255]))
        values = np.frombuffer(packet, dtype=">i4", offset=HEADER_BYTES)
        if self.rng.random() < 0.5:  # the others' contributions: anything an int32 adder can hold
            others = np.frombuffer(self.rng.randbytes(values.nbytes), dtype=">i4")
            values = (values.astype(np.int64) + others.astype(np.int64)).astype(np.int32).astype(">i4")
        result = HEADER.pack(*fields) + values.tobytes()
        self.replays[use] = result
        self.deliver_later(result)
        if self.rng.random() < 0.1:
            self.deliver_later(result)  # duplicated

    def mischief(self) -> None:
        """A datagram no honest switch sends: forged, another job's, truncated, garbled, a use ahead."""
        kind = self.rng.randrange(6)
        fields = [MsgType.RESULT, 0, JOB, 0, 0, 0, 0, KEY, 0, 0]
        if self.replays:
            fields = list(HEADER.unpack_from(self.rng.choice(list(self.replays.values()))))
        if kind == 0:
            fields[7] ^= 1 << self.rng.randrange(32)  # forged key
        elif kind == 1:
            fields[2] += 1  # another job
        elif kind == 2:
            fields[0], fields[6] = MsgType.MISSING, fields[6] + self.rng.choice([1, 2, 4, 8, 16])
            fields[9] = self.rng.getrandbits(self.member.world_size)
        elif kind == 3:
            fields[0] = self.rng.choice([0, 1, 6, 7, 255])
        datagram = HEADER.pack(*fields) + self.rng.randbytes(4 * self.member.values_per_packet)
        if kind == 4:
            datagram = datagram[: self.rng.randrange(len(datagram) + 40)]
        elif kind == 5:
            datagram = self.rng.randbytes(
                self.rng.randrange(payload_bytes(self.member.values_per_packet) + 64)
            )
        self.deliver_later(datagram, 0.0)


def run_script(seed: int) -> int:
    """Random calls of a random job against a misbehaving switch, on Twin; returns the steps compared."""
    rng = random.Random(seed)
    world = rng.choice([1, 2, 3, 4, 8, 32])
    k = rng.choice([32, 64, 256, 1024])
    member = Membership(JOB, rng.randrange(world), KEY, world, rng.choice([2, 4, 16, 64]), k)
    twin = Twin(member, progress_timeout=rng.choice([0.3, 2.0]))
    script = Script(rng, member)
    nprng = np.random.default_rng(seed)
    for _ in range(rng.randrange(1, 5)):
        dtype = rng.choice(list(DTYPES))
        flat = random_input(nprng, dtype, rng.choice([1, k - 1, 3 * k, 20 * k + 3]))
        mode = rng.choice(list(NonFinite)) if dtype != "int32" else NonFinite.PROPAGATE
        descriptor = Descriptor(DTYPES[dtype], rng.choice(list(Op)), mode, flat.size)
        plan = TwinPlan(flat, descriptor, k, world)
        try:
            packets = twin.begin(plan, descriptor.encode(), script.now)
        except AllreduceError:
            break  # broken after a timeout: both engines said so, with the same words
        while True:
            for packet in packets:
                script.sent(packet)
            if twin.done:
                break
            if rng.random() < 0.05:
                script.mischief()
            deadline = twin.next_deadline()
            if script.queue and script.queue[0][0] <= deadline:
                script.now, _, datagram = heapq.heappop(script.queue)
                packets = twin.receive(datagram, script.now)
            else:
                script.now = deadline
                packets = twin.poll(script.now)
        try:
            twin.finish(script.now)
            plan.result()
        except (AllreduceError, ValueError):
            pass
        while script.queue and rng.random() < 0.5:  # late answers to a call that is over
            script.now, _, datagram = heapq.heappop(script.queue)
            twin.receive(datagram, script.now)
    return twin.steps


@pytest.mark.parametrize("block", range(8))
def test_the_engines_agree_on_random_fault_scripts(block: int) -> None:
    steps = sum(run_script(seed) for seed in range(block * 25, block * 25 + 25))
    assert steps > 500, "the scripts must exercise the engines"


# ------------------------------------------------------------------------------------------ results


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("op", list(Op))
def test_results_in_the_callers_dtype_are_the_specifications_cast(dtype: str, op: Op) -> None:
    """What the communicator returns: the specification's float64 sums cast by numpy, bit for bit."""
    rng = np.random.default_rng(3)
    world, k = 3, 64
    member = Membership(JOB, 1, KEY, world, 8, k)
    flat = random_input(rng, dtype, 50 * k + 7)
    descriptor = Descriptor(DTYPES[dtype], op, NonFinite.PROPAGATE, flat.size)
    spec_plan, out = plan_for(flat, descriptor, k, world), np.empty(flat.size, dtype=dtype)
    plans = [
        (spec_engine.Engine(member), spec_plan),
        (NativeEngine(member), native_plan(flat, out, descriptor, k, world)),
    ]
    sums = rng.integers(-(2**31), 2**31, size=(200, k)).astype(">i4")
    for engine, plan in plans:  # the same RESULTs, whatever was sent: one per outstanding use
        pending = engine.begin(plan, descriptor.encode(), 0.0)
        while pending:
            packet = pending.pop(0)
            fields = list(HEADER.unpack_from(packet))
            fields[0], fields[4] = MsgType.RESULT, max(fields[4], (fields[6] & 0xFFFF) % 256)
            result = HEADER.pack(*fields) + sums[(fields[6] & 0xFFFF) % 200].tobytes()
            pending += engine.receive(result, 0.001)
        engine.finish(0.002)
    with np.errstate(over="ignore"):  # sums beyond float16's range are Inf, in both
        expected = spec_plan.result().astype(dtype)
    assert plans[1][1].result().tobytes() == expected.tobytes()


def test_float16_rounding_is_numpys() -> None:
    rng = np.random.default_rng(0)
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65519.99, 65520.0, 1e10, 2.0**-24,
             2.0**-25, 2.0**-25 * 1.0000001, 2.0**-14, 2.0**-14 * (1 - 2.0**-11), 1 + 2.0**-11,
             1 + 2.0**-11 + 2.0**-40]  # fmt: skip
    doubles = np.concatenate([
        np.array(edges), rng.standard_normal(20000) * 10.0 ** rng.uniform(-9, 6, 20000),
        rng.integers(0, 2**64, 20000, dtype=np.uint64).view(np.float64),
    ])  # fmt: skip
    with np.errstate(all="ignore"):
        expected = doubles.astype(np.float16).view(np.uint16)
    native = np.frombuffer(_native.to_half(doubles.tobytes()), dtype=np.uint16)
    nan = np.isnan(doubles)
    assert np.array_equal(native[~nan], expected[~nan])
    assert np.all((native[nan] & 0x7C00) == 0x7C00) and np.all(native[nan] & 0x3FF)


# ------------------------------------------------------------------------------------------ bad input


def test_every_length_of_datagram_is_safe_and_counted() -> None:
    member = Membership(JOB, 0, KEY, 2, 4, 64)
    engine = NativeEngine(member)
    flat = np.arange(640, dtype=np.int32)
    descriptor = Descriptor(DType.INT32, Op.SUM, NonFinite.PROPAGATE, flat.size)
    (data, *_) = engine.begin(
        native_plan(flat, np.empty_like(flat), descriptor, 64, 2), descriptor.encode(), 0.0
    )
    for length in range(len(data) + 64):
        result = bytearray((data + bytes(64))[:length])
        if length:
            result[0] = MsgType.RESULT
        engine.receive(bytes(result), 0.001)
    assert engine.stats.packets_received == len(data) + 64
    assert engine.stats.ignored == len(data) + 63  # all but the one well-formed RESULT


def test_plans_and_engines_refuse_bad_arguments_clearly() -> None:
    descriptor = Descriptor(DType.FLOAT32, Op.SUM, NonFinite.PROPAGATE, 10)
    flat = np.ones(10, dtype=np.float32)
    with pytest.raises(ValueError, match="must hold 10 elements"):
        native_plan(flat, np.empty(9, dtype=np.float32), descriptor, 64, 2)
    with pytest.raises(ValueError, match="values per packet"):
        native_plan(flat, None, descriptor, 48, 2)
    with pytest.raises(ValueError, match="world size 33"):
        native_plan(flat, None, descriptor, 64, 33)
    with pytest.raises(ValueError, match="not C-contiguous"):
        native_plan(np.ones(20, dtype=np.float32)[::2], None, descriptor, 64, 2)
    with pytest.raises(ValueError, match="pool size 1 is outside"):
        _native.Engine(1, 0, 1, 1, 1, 64, 10.0)
    engine = NativeEngine(Membership(JOB, 0, KEY, 1, 2, 64))
    with pytest.raises(TypeError, match="hostlib._native.Plan"):
        engine.begin(plan_for(flat, descriptor, 64, 1), descriptor.encode(), 0.0)  # type: ignore[arg-type]
    plan = native_plan(flat, None, descriptor, 64, 1)
    engine.begin(plan, descriptor.encode(), 0.0)
    with pytest.raises(RuntimeError, match="already in flight"):
        engine.begin(plan, descriptor.encode(), 0.0)
    with pytest.raises(RuntimeError, match="another engine's call"):
        NativeEngine(Membership(JOB, 0, KEY, 1, 2, 64)).begin(plan, descriptor.encode(), 0.0)
    huge = np.ones(65536 * 64, dtype=np.int32)
    big = Descriptor(DType.INT32, Op.SUM, NonFinite.PROPAGATE, huge.size + 1)
    with pytest.raises(ValueError, match="at most 65536 packets, not 65537"):
        NativeEngine(Membership(JOB, 0, KEY, 1, 2, 64)).begin(
            native_plan(np.ones(huge.size + 1, dtype=np.int32), None, big, 64, 1), big.encode(), 0.0
        )


def test_a_missing_build_says_how_to_build_it() -> None:
    environment = dict(os.environ, P4REDUCE_NATIVE_LIBRARY="/nonexistent/_native.so")
    run = subprocess.run(
        [sys.executable, "-c", "import hostlib"], env=environment, capture_output=True, text=True
    )
    assert run.returncode != 0
    assert run.stderr.strip().splitlines()[-1] == f"ImportError: {BUILD_HINT}"


# ------------------------------------------------------------------------------------------ over sockets


def test_the_native_reflector_sums_a_whole_job_like_the_switch() -> None:
    world, size = 3, 40_000
    with NativeReflector(workers=world) as reflector:

        def rank(r: int) -> tuple[np.ndarray, np.ndarray]:
            job = JobSpec(1, world, 64, reflector.address, 64, key=0x100 + r)
            with Communicator(job, r, ("127.0.0.1", 0)) as comm:
                return comm.allreduce(make_input(r, size, "int32")), comm.allreduce(
                    make_input(r, size, "float32")
                )

        with ThreadPoolExecutor(world) as pool:
            results = list(pool.map(rank, range(world)))
    for ints, floats in results:
        assert check(ints, world, size, "int32", k=64)[0] and check(floats, world, size, "float32", k=64)[0]


def test_allreduce_in_place_and_into_strided_outputs() -> None:
    world, size = 2, 10_000
    with NativeReflector(workers=world) as reflector:

        def rank(r: int) -> tuple[np.ndarray, np.ndarray]:
            with Communicator(JobSpec(1, world, 16, reflector.address, 64, key=r + 1), r) as comm:
                data = np.arange(size, dtype=np.int32) * (r + 1)
                comm.allreduce(data, out=data)  # in place: the input is read before it is overwritten
                strided = np.zeros((size, 2), dtype=np.int32)[:, 0]
                comm.allreduce(np.arange(size, dtype=np.int32), out=strided)
                return data, strided

        with ThreadPoolExecutor(world) as pool:
            results = list(pool.map(rank, range(world)))
    for in_place, strided in results:
        assert np.array_equal(in_place, np.arange(size, dtype=np.int32) * 3)
        assert np.array_equal(strided, np.arange(size, dtype=np.int32) * 2)


def test_a_call_runs_without_the_gil() -> None:
    """Python keeps running while a call is carried out: the DDP hook overlaps backward."""
    data = np.arange(300_000 * 64, dtype=np.int32)
    with (
        NativeReflector() as reflector,
        Communicator(JobSpec(1, 1, 128, reflector.address, 64, 1), 0) as comm,
    ):
        comm.allreduce(data[:6400])
        started = time.perf_counter()
        handle, spins = comm.allreduce_async(data), 0
        while not handle.done():
            spins += 1  # pure Python: it runs only while the call does not hold the GIL
        elapsed = time.perf_counter() - started
        assert np.array_equal(handle.wait(), data)
    assert elapsed > 0.05 and spins > 10_000 * elapsed, (elapsed, spins)


# ------------------------------------------------------------------------------------------ helpers


def random_input(rng: np.random.Generator, dtype: str, size: int) -> np.ndarray:
    """Values of every magnitude; ints over the whole range; bfloat16 as its bit patterns (uint16)."""
    if dtype == "int32":
        return rng.integers(-(2**31), 2**31, size, dtype=np.int64).astype(np.int32)
    if dtype == "bfloat16":
        return q.float_to_bfloat16(random_input(rng, "float32", size))
    values = rng.standard_normal(size) * 10.0 ** rng.uniform(-6, 6 if dtype == "float32" else 4, size)
    if size > 10:
        values[rng.integers(0, size, 2)] = 0.0
    return values.astype(dtype)


@pytest.mark.parametrize("world", [1, 2])
def test_quantization_ties_round_half_to_even_as_numpy(world: int) -> None:
    """0.5 in a block whose largest magnitude is 0.5 scales to floor((2^31-1)/N) / 2: exactly a half."""
    ties = np.array([0.5, -0.5, 0.25, -0.25, 0.375, 0.125] * 11, dtype=np.float32)
    scaled = float(ties[0]) * q.scale(0, world)
    assert scaled % 1 == 0.5 and q.quantize(ties[:1], EXP_BIAS, world)[0] % 2 == 0  # rounded to even
    fabric = Fabric(world=world, pool=4, engine="twin")
    results = fabric.run(fabric.plans([ties] * world))
    assert all(isinstance(r, np.ndarray) for r in results)


@pytest.mark.parametrize("world", [1, 3, 32])
def test_native_quantization_equals_the_reference_in_range_and_past_it(world: int) -> None:
    """The C quantizer skips its range check when the agreed exponent is at least the chunk's own (every
    value then fits int32); below it (a switch that lied about the maximum) the values that overflow
    become INT32_MIN as numpy's cast makes them. Both paths equal hostlib.quantize bit for bit."""
    import ctypes

    lib = ctypes.CDLL(_native.__file__)
    quantize = lib.p4r_quantize_f32
    u8 = ctypes.c_uint8
    quantize.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, u8, u8, ctypes.c_int, ctypes.c_void_p]
    rng = np.random.default_rng(world)
    k = 64
    for trial in range(200):
        x = random_input(rng, "float32", k - trial % 5)
        exponent_of = lib.p4r_exponent_f32
        exponent_of.argtypes, exponent_of.restype = [ctypes.c_void_p, ctypes.c_int], u8
        local = int(exponent_of(x.ctypes.data, x.size))
        for agreed in (local, local + 3, max(local - 2, 1)):  # in range, above, and (a liar) below
            wire = np.zeros(4 * k, dtype=np.uint8)
            quantize(x.ctypes.data, x.size, k, agreed, local, world, wire.ctypes.data)
            expected = np.zeros(k, dtype=">i4")
            with np.errstate(invalid="ignore"):
                expected[: x.size] = q.quantize(x, agreed, world)
            assert wire.tobytes() == expected.tobytes(), (trial, agreed, local)


@pytest.mark.parametrize("world", [1, 3, 32])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_native_16_bit_quantization_equals_the_reference_in_range_and_past_it(world: int, dtype: str) -> None:
    """The 16-bit quantizers, odd lengths (a last word with an empty low lane) and a lying maximum
    included, equal hostlib.quantize.quantize(..., bits=16) bit for bit; so do the exponents."""
    import ctypes

    lib = ctypes.CDLL(_native.__file__)
    name = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}[dtype]
    quantize, exponent_of = getattr(lib, f"p4r_quantize16_{name}"), getattr(lib, f"p4r_exponent_{name}")
    u8 = ctypes.c_uint8
    quantize.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, u8, u8, ctypes.c_int, ctypes.c_void_p]
    exponent_of.argtypes, exponent_of.restype = [ctypes.c_void_p, ctypes.c_int], u8
    rng = np.random.default_rng(world)
    k = 64
    for trial in range(100):
        x = random_input(rng, dtype, 2 * k - trial % 5)
        if trial % 10 == 9:
            x[trial % x.size] = 0x7F80 if dtype == "bfloat16" else np.inf
        wide = q.bfloat16_to_float32(x) if dtype == "bfloat16" else x
        local = int(exponent_of(x.ctypes.data, x.size))
        assert local == int(q.wire_exponents(wide[None])[0]), trial
        for agreed in {local, min(local + 3, EXP_NONFINITE), max(local - 2, 1), EXP_NONFINITE}:
            wire = np.zeros(4 * k, dtype=np.uint8)
            quantize(x.ctypes.data, x.size, k, agreed, local, world, wire.ctypes.data)
            padded = np.zeros(2 * k, dtype=np.float32)
            padded[: x.size] = wide
            with np.errstate(invalid="ignore"):
                expected = q.quantize(padded, agreed, world, bits=16)
            assert wire.tobytes() == expected.tobytes(), (trial, agreed, local)


def test_bfloat16_rounding_is_the_references() -> None:
    """float64 sums to bfloat16 through float32, to nearest even: hostlib.quantize.float_to_bfloat16."""
    rng = np.random.default_rng(1)
    doubles = np.concatenate([
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, 3.5e38, 1e-45, 1 + 2.0**-8, 1 + 2.0**-9]),
        rng.standard_normal(20000) * 10.0 ** rng.uniform(-40, 38, 20000),
    ])  # fmt: skip
    world, k = 1, 64
    member = Membership(JOB, 0, KEY, world, 4, k)
    for bits in (32, 16):
        descriptor = Descriptor(DType.BFLOAT16, Op.SUM, NonFinite.PROPAGATE, doubles.size, bits)
        expected = plan_for(q.float_to_bfloat16(doubles), descriptor, k, world)
        native = native_plan(
            q.float_to_bfloat16(doubles), np.empty(doubles.size, np.uint16), descriptor, k, world
        )
        fabric_like = [(spec_engine.Engine(member), expected), (NativeEngine(member), native)]
        for engine, plan in fabric_like:  # one rank: each DATA comes back as its own RESULT
            pending = engine.begin(plan, descriptor.encode(), 0.0)
            while pending:
                packet = pending.pop(0)
                result = bytes([MsgType.RESULT]) + packet[1:]
                pending += engine.receive(result, 0.001)
            engine.finish(0.002)
        with np.errstate(over="ignore", invalid="ignore"):
            assert native.result().tobytes() == q.float_to_bfloat16(expected.result()).tobytes(), bits
