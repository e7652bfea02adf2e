"""The C backend against the Python reference, bit for bit, on random traffic and random control state.

Programs: our own (p4src/v1model/p4reduce.p4, with protocol traffic and
random mutations of it), every construct in one program
(tests/executor/constructs.p4), parsers and controls inlined into others
(tests/executor/nested.p4), the front end's and the tutorials'
programs, and programs of random well-typed expressions over bit<W> and
int<W> of every width from 1 to 64. For each: random table entries,
default actions, groups and register cells on both backends alike, random
packets, and after every packet the same frames out; at the end the same
registers, counters and direct counters. `P4_DIFF_PACKETS` sends more.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from softswitch.p4c import compile_program
from tests import protocol_scenarios as ps
from tests.conftest import NO_COMPILER
from tests.executor.differential import EXPRESSIONS, RandomControl, Twin, pattern, random_frame
from tests.executor.pipeline_driver import PipelineDriver

pytestmark = pytest.mark.skipif(NO_COMPILER, reason="no C compiler (cc): the C backend cannot run")
ROOT = Path(__file__).resolve().parents[2]
PACKETS = int(os.environ.get("P4_DIFF_PACKETS", "300"))
PROGRAMS = {
    "constructs": ROOT / "tests/executor/constructs.p4",
    "passes": ROOT / "tests/executor/passes.p4",
    "clones": ROOT / "tests/executor/clones.p4",
    "digests": ROOT / "tests/executor/digests.p4",
    "replicas": ROOT / "tests/executor/replicas.p4",
    "exact_keys": ROOT / "tests/executor/exact_keys.p4",
    "words": ROOT / "tests/executor/words.p4",
    "nested": ROOT / "tests/executor/nested.p4",
    "unions": ROOT / "tests/executor/unions.p4",
    "varbit": ROOT / "tests/executor/varbit.p4",
    "general_features": ROOT / "tests/frontend/general_features.p4",
    "p4info_entities": ROOT / "tests/frontend/p4info_entities.p4",
    **{
        name: ROOT / f"tests/tutorials/{name}.p4"
        for name in (
            "calc",
            "source_routing",
            "basic",
            "basic_tunnel",
            "ecn",
            "firewall",
            "link_monitor",
            "load_balance",
            "mri",
            "multicast",
            "p4runtime",
            "qos",
            "mirror",
            "learning_switch",
        )
    },
}


def _twin(path: Path, **kwargs: object) -> Twin:
    program, info = compile_program(path, **kwargs)  # type: ignore[arg-type]
    return Twin(program, info)


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("seed", [1, 2])
def test_random_packets_and_entries_agree(name: str, seed: int) -> None:
    rng = random.Random(seed)
    twin = _twin(PROGRAMS[name])
    control = RandomControl(twin, rng)
    control.fill()
    for i in range(PACKETS):
        twin.send(rng.randrange(4), random_frame(rng))
        if i % 100 == 99:
            control.churn()
            twin.check_state()
    twin.check_state()


def test_aggregation_traffic_of_our_program_agrees() -> None:
    """p4reduce.p4 with the standard setup, two jobs, and DATA/QUERY traffic, mutated at random."""
    rng = random.Random(7)
    twin = _twin(ROOT / "p4src/v1model/p4reduce.p4", include_dirs=[ROOT / "p4src"])
    drivers = [PipelineDriver(p, twin.info) for p in (twin.python, twin.c)]
    setup = ps.standard_setup()[0]
    for driver in drivers:
        ps.install(driver, ps.Install(entries=setup.entries, groups=setup.groups))
        for job in (ps.JOB_A, ps.JOB_B):
            ps.install(driver, ps.job_install(job))
    frames = []
    for chunk in range(40):
        job = ps.JOB_A if chunk % 3 else ps.JOB_B
        slot, set_bit = chunk % job.pool_size, (chunk // job.pool_size) & 1
        for rank, worker in enumerate(job.workers):
            values = ps.vector(chunk, rank, seed=chunk)
            frame = ps.contribution(
                job, rank, slot, values, set_bit=set_bit, seq=ps.seq_of(chunk // 8, chunk)
            )
            frames.append((worker.port, frame))
    for port, frame in frames:
        roll = rng.random()
        if roll < 0.15:  # one byte anywhere
            at = rng.randrange(len(frame))
            frame = frame[:at] + bytes([rng.randrange(256)]) + frame[at + 1 :]
        elif roll < 0.25:  # truncated
            frame = frame[: rng.randrange(len(frame))]
        elif roll < 0.3:  # a duplicate first
            twin.send(port, frame)
        elif roll < 0.35:  # wrong port
            port = rng.randrange(8)
        twin.send(port, frame)
    for _ in range(100):
        twin.send(rng.randrange(8), random_frame(rng, longest=400))
    twin.check_state()


# ---------------------------------------------------------------------------------------------------------
# Random expressions: every operator at every width, signed and unsigned


class ExprGen:
    """Well-typed random P4 expressions over input fields f0..fN of the given types."""

    def __init__(self, rng: random.Random, types: list[tuple[int, bool]]) -> None:
        self.rng = rng
        self.types = types

    @staticmethod
    def name(width: int, signed: bool) -> str:
        return f"{'int' if signed else 'bit'}<{width}>"

    def literal(self, width: int, signed: bool) -> str:
        value = pattern(self.rng, width)
        return f"(({self.name(width, signed)}) {width}w{value})"

    def leaf(self, width: int, signed: bool) -> str:
        same = [i for i, t in enumerate(self.types) if t == (width, signed)]
        if same and self.rng.random() < 0.7:
            return f"hdr.i.f{self.rng.choice(same)}"
        if self.rng.random() < 0.5:
            i = self.rng.randrange(len(self.types))
            w, s = self.types[i]
            inner = f"hdr.i.f{i}"
            if s != signed and w != width:  # change width and signedness in two steps, as P4 requires
                inner = f"(({self.name(w, signed)}) {inner})"
            return f"(({self.name(width, signed)}) {inner})"
        return self.literal(width, signed)

    def expr(self, width: int, signed: bool, depth: int) -> str:
        rng = self.rng
        if depth <= 0 or rng.random() < 0.25:
            return self.leaf(width, signed)
        a = lambda: self.expr(width, signed, depth - 1)  # noqa: E731
        kind = rng.randrange(11)
        if kind == 0:
            return f"({a()} {rng.choice(['+', '-', '*', '&', '|', '^', '|+|', '|-|'])} {a()})"
        if kind == 1:
            return f"({rng.choice(['~', '-'])}{a()})"
        if kind == 2:
            amount = self.expr(8, False, depth - 1)
            return f"({a()} {rng.choice(['<<', '>>'])} {amount})"
        if kind == 3 and not signed:  # the front end takes only constant, non-zero divisors
            divisor = max(1, pattern(rng, width))
            return f"({a()} {rng.choice(['/', '%'])} (({self.name(width, False)}) {width}w{divisor}))"
        if kind == 4:
            cmp_w, cmp_s = rng.choice(self.types)
            x, y = self.expr(cmp_w, cmp_s, depth - 1), self.expr(cmp_w, cmp_s, depth - 1)
            return f"({x} {rng.choice(['<', '<=', '>', '>=', '==', '!='])} {y} ? {a()} : {a()})"
        if kind == 5 and not signed:
            wider = rng.randint(width, 64)
            lo = rng.randint(0, wider - width)
            return f"({self.expr(wider, False, depth - 1)}[{lo + width - 1}:{lo}])"
        if kind == 6 and width >= 2 and not signed:
            left = rng.randint(1, width - 1)
            return f"({self.expr(left, False, depth - 1)} ++ {self.expr(width - left, False, depth - 1)})"
        if kind == 7:
            w, s = rng.choice(self.types)
            inner = self.expr(w, s, depth - 1)
            if s != signed and w != width:
                inner = f"(({self.name(w, signed)}) {inner})"
            return f"(({self.name(width, signed)}) {inner})"
        if kind == 8 and not signed:
            return f"((bit<{width}>) ((bit<1>) ({a()} == {a()})))"
        return f"({a()} {rng.choice(['&', '|', '^', '+'])} {a()})"


def _padded(fields: list[tuple[int, bool]], prefix: str) -> str:
    """Header fields of the given types, padded to whole bytes."""
    decls = [f"{ExprGen.name(w, s)} {prefix}{i};" for i, (w, s) in enumerate(fields)]
    total = sum(w for w, _ in fields)
    if total % 8:
        decls.append(f"bit<{8 - total % 8}> {prefix}pad;")
    return " ".join(decls)


@pytest.mark.parametrize("seed", range(6))
def test_random_expressions_agree(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    widths = [1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 48, 63, 64]
    types = [(rng.choice(widths), rng.random() < 0.4) for _ in range(8)]
    gen = ExprGen(rng, types)
    outputs = [(rng.choice(widths), rng.random() < 0.4) for _ in range(24)]
    assignments = "\n".join(f"        hdr.o.r{i} = {gen.expr(w, s, 4)};" for i, (w, s) in enumerate(outputs))
    # The Internet checksum of fields of any width, in any order: pieces straddle 16-bit words and the last
    # word is padded (the C backend sums the pieces where they fall, without packing the bits first).
    listed = ", ".join(f"hdr.i.f{i}" for i in rng.sample(range(len(types)), rng.randint(1, 5)))
    assignments += f"\n        hash(hdr.o.csum, HashAlgorithm.csum16, 16w0, {{ {listed} }}, 32w0);"
    path = tmp_path / f"expr{seed}.p4"
    path.write_text(
        EXPRESSIONS.format(
            inputs=_padded(types, "f"),
            outputs=_padded(outputs, "r") + " bit<16> csum;",
            locals="",
            assignments=assignments,
        )
    )
    twin = _twin(path)
    size = (sum(w for w, _ in types) + 7) // 8
    for _ in range(PACKETS // 3):
        data = bytes(rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256))) for _ in range(size))
        assert not twin.send(0, data).failed
