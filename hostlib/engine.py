"""The packet engine: one worker's side of an all-reduce through the switch (docs/protocol.md).

A call is a sequence of U slot *uses*; use u goes to slot u mod W (W = the
job's pool size, or fewer slots for a short call). A slot's next use is
sent only when the result of its previous use has arrived, so at most W
packets are outstanding and every result implicitly acknowledges the
previous one. Each use flips the slot's set bit (kept across calls for the
life of the job) and carries a chunk number that every worker advances
identically, so a late or duplicated result is recognised and ignored.

What a use carries and what happens to its result is the caller's business
(`UsePlan`): integers go as they are, floats are quantized with the
exponent the previous result agreed (hostlib.reduction). The engine only
moves bytes: packets are built with struct into one preallocated buffer per
slot and results are copied out of one receive buffer, so no per-value
Python runs on the data path.

Loss is recovered two ways, both by sending the use again, unchanged:
- fast retransmission (`Overtaking`): once results of three uses sent
  after an unanswered transmission have overtaken it, its use is resent at
  once, without waiting for a timer;
- the retransmission timer, for what nothing overtakes (the tail of a
  call): the larger of smoothed RTT + 4 x deviation and 3 x smoothed RTT,
  bounded to [10 ms, 1 s]; doubled at each expiry until the next valid
  sample, and per resend of that use.
A call with no progress for `progress_timeout` seconds fails with
AllreduceTimeout instead of hanging.
"""

from __future__ import annotations

import heapq
import math
import socket
import struct
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from contracts.protocol import HEADER_BYTES, PAYLOAD_BYTES, SET_BIT, SLOT_MASK, MsgType

HEADER = struct.Struct(">BBHHBBI")  # msg_type, rank, job_id, set|slot, exp, flags, chunk
RTO_MIN, RTO_MAX, RTO_INITIAL = 0.01, 1.0, 0.2
RTO_SRTT_MULTIPLE = 3  # the timer never fires sooner than this many smoothed round trips
FAST_RETRANSMIT_AFTER = 3  # results of later sends that mark an unanswered transmission lost
_CHUNK_MOD = 1 << 32


class AllreduceTimeout(RuntimeError):
    """A call made no progress for too long: the switch, the controller's entries or a peer is gone."""


class UsePlan(Protocol):
    """What one call sends and where its results go."""

    uses: int  # U
    slots: int  # W' <= pool size: slots this call uses

    def payload(self, use: int, agreed_exp: int) -> tuple[bytes | memoryview, int]:
        """Values (4*K big-endian bytes) and the wire `exp` of a use; `agreed_exp` is the wire exponent
        of the result of the previous use of the same slot (0 for a slot's first use)."""
        ...

    def deliver(self, use: int, values: memoryview, exp: int) -> None:
        """The result of a use: its 4*K value bytes (valid only during the call) and wire exponent."""
        ...


@dataclass
class EngineStats:
    packets_sent: int = 0
    packets_received: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    retransmissions: int = 0  # all resends, fast or timed
    fast_retransmissions: int = 0  # resends because later uses' results overtook the use
    ignored_results: int = 0  # duplicates, late results, strays
    refused: int = 0  # ICMP port unreachable seen on the socket
    calls: int = 0
    tensor_bytes: int = 0  # bytes of input reduced
    busy_seconds: float = 0.0
    rtt_samples: list[float] = field(default_factory=list, repr=False)

    @property
    def goodput_bytes_per_second(self) -> float:
        return self.tensor_bytes / self.busy_seconds if self.busy_seconds else 0.0


class Overtaking:
    """Which unanswered uses to take as lost: those that results of later sends have overtaken.

    The switch answers a slot's use when the last worker's contribution
    arrives, and a job's workers send in lockstep, so results come back
    nearly in the order a worker sent its uses. A transmission is taken as
    lost, it or its result, once results of FAST_RETRANSMIT_AFTER
    transmissions sent after it have arrived (RFC 6675's IsLost, the rule
    behind TCP's three duplicate ACKs): that is, once it is older than the
    FAST_RETRANSMIT_AFTER-th newest transmission answered so far. Every
    transmission so marked is reported, however many are lost in one
    window. A resend takes its place at the back of the order, so a lost
    resend is found the same way. A result of a resent use is no evidence:
    it may answer the first send. O(1) per packet, amortized.
    """

    def __init__(self, slots: int) -> None:
        self._latest = [0] * slots  # sequence number of each slot's last transmission; 0 when answered
        self._order: deque[tuple[int, int]] = deque()  # (sequence number, slot), oldest first
        self._sent = 0
        self._newest = [0] * FAST_RETRANSMIT_AFTER  # min-heap: the newest transmissions answered

    def sent(self, slot: int) -> None:
        """A transmission of the slot's current use, first or resend."""
        self._sent += 1
        self._latest[slot] = self._sent
        self._order.append((self._sent, slot))

    def answered(self, slot: int, first_send: bool) -> list[int]:
        """The slot's result arrived; returns the slots whose uses are now taken as lost."""
        seq, self._latest[slot] = self._latest[slot], 0
        if not first_send:
            return []
        newest = self._newest
        if seq > newest[0]:
            heapq.heapreplace(newest, seq)
        lost = []
        order, latest = self._order, self._latest
        while order and order[0][0] < newest[0]:
            sent, older = order.popleft()
            if latest[older] == sent:  # still unanswered, and not sent again since
                lost.append(older)
        return lost


class PacketEngine:
    """Sends a worker's uses and collects results over one UDP socket."""

    def __init__(
        self,
        sock: socket.socket,
        switch_address: tuple[str, int],
        job_id: int,
        rank: int,
        pool_size: int,
        progress_timeout: float = 10.0,
    ) -> None:
        if not 1 <= pool_size <= SLOT_MASK + 1:
            raise ValueError(f"pool size {pool_size} out of range")
        self.sock = sock
        self.switch = switch_address
        # Connected: the kernel then delivers only the switch's datagrams, and reports ICMP port
        # unreachable (no switch listening) as ECONNREFUSED instead of dropping it silently.
        sock.connect(switch_address)
        self.job_id = job_id
        self.rank = rank
        self.pool_size = pool_size
        self.progress_timeout = progress_timeout
        self.next_set = bytearray(pool_size)  # set bit of each slot's next use; persists across calls
        self.next_chunk = 0  # chunk number of the next call's first use
        self.stats = EngineStats()
        self._srtt: float | None = None
        self._rttvar = 0.0
        self.rto = RTO_INITIAL
        self._buffers = [bytearray(PAYLOAD_BYTES) for _ in range(pool_size)]
        self._receive = bytearray(PAYLOAD_BYTES + 64)

    # ------------------------------------------------------------------ a call
    def run(self, plan: UsePlan) -> None:
        """Carry out every use of `plan`; returns when all results arrived, or raises AllreduceTimeout."""
        slots, uses = plan.slots, plan.uses
        if uses == 0:
            return
        if not 1 <= slots <= self.pool_size or slots > uses:
            raise ValueError(f"a plan of {uses} uses cannot use {slots} of {self.pool_size} slots")
        started = time.perf_counter()
        first_chunk = self.next_chunk
        current = [-1] * slots  # use outstanding on each slot, -1 when the slot is done
        sent_at = [0.0] * slots
        retries = [0] * slots
        deadlines = np.full(slots, math.inf)
        overtaking = Overtaking(slots)
        stats = self.stats
        sock, header, receive = self.sock, HEADER, self._receive
        view = memoryview(receive)
        values_view = view[HEADER_BYTES:PAYLOAD_BYTES]
        result_type, job_id = int(MsgType.RESULT), self.job_id

        def send(slot: int, use: int, agreed_exp: int) -> None:
            values, exp = plan.payload(use, agreed_exp)
            set_bit = self.next_set[slot]
            self.next_set[slot] = set_bit ^ 1
            buffer = self._buffers[slot]
            chunk = (first_chunk + use) % _CHUNK_MOD
            header.pack_into(
                buffer, 0, MsgType.DATA, self.rank, job_id, (SET_BIT if set_bit else 0) | slot, exp, 0, chunk
            )
            buffer[HEADER_BYTES:] = values
            self._send(buffer)
            now = time.perf_counter()
            current[slot] = use
            sent_at[slot] = now
            retries[slot] = 0
            deadlines[slot] = now + self.rto
            overtaking.sent(slot)

        for slot in range(slots):
            send(slot, slot, 0)
        outstanding = slots
        last_progress = time.perf_counter()
        next_check = last_progress + self.rto
        while outstanding:
            now = time.perf_counter()
            if now >= next_check:
                self._retransmit(deadlines, retries, current, overtaking, now)
                if now - last_progress > self.progress_timeout:
                    raise AllreduceTimeout(self._stall_message(now - last_progress, outstanding, uses))
                next_check = min(float(deadlines.min()), now + 0.05)
            try:
                sock.settimeout(max(next_check - now, 0.0005))
                size = sock.recv_into(receive)
            except TimeoutError:
                continue
            except ConnectionRefusedError:
                stats.refused += 1
                continue
            stats.packets_received += 1
            stats.bytes_received += size
            if size != PAYLOAD_BYTES:
                stats.ignored_results += 1
                continue
            msg_type, _rank, job, set_slot, exp, _flags, chunk = header.unpack_from(receive)
            slot = set_slot & SLOT_MASK
            if msg_type != result_type or job != job_id or slot >= slots:
                stats.ignored_results += 1
                continue
            use = current[slot]
            expected_set = self.next_set[slot] ^ 1
            if use < 0 or (set_slot >> 15) != expected_set or chunk != (first_chunk + use) % _CHUNK_MOD:
                stats.ignored_results += 1
                continue
            finished = time.perf_counter()
            first_send = retries[slot] == 0
            if first_send:  # Karn: only unambiguous samples
                self._sample_rtt(finished - sent_at[slot])
            overtaken = overtaking.answered(slot, first_send)
            plan.deliver(use, values_view, exp)
            last_progress = finished
            following = use + slots
            if following < uses:
                send(slot, following, exp)
            else:
                current[slot] = -1
                deadlines[slot] = math.inf
                outstanding -= 1
            for lost in overtaken:
                stats.fast_retransmissions += 1
                self._resend(lost, retries, deadlines, overtaking, finished)
        self.next_chunk = (first_chunk + uses) % _CHUNK_MOD
        stats.calls += 1
        stats.busy_seconds += time.perf_counter() - started

    # ---------------------------------------------------------------- helpers
    def _send(self, buffer: bytearray) -> None:
        try:
            self.sock.send(buffer)
        except ConnectionRefusedError:
            self.stats.refused += 1  # an earlier datagram bounced off a closed port; try once more
            try:
                self.sock.send(buffer)
            except ConnectionRefusedError:
                self.stats.refused += 1
        self.stats.packets_sent += 1
        self.stats.bytes_sent += len(buffer)

    def _retransmit(
        self,
        deadlines: np.ndarray,
        retries: list[int],
        current: list[int],
        overtaking: Overtaking,
        now: float,
    ) -> None:
        expired = [slot for slot in np.flatnonzero(deadlines <= now).tolist() if current[slot] >= 0]
        if expired:
            # RFC 6298 5.5: the timeout backs off and stays backed off until a fresh sample. Karn's
            # rule keeps the slow (retransmitted) uses out of the estimate, so without this a queue
            # building behind a large window would keep the timeout below the RTT: every use resent.
            self.rto = min(self.rto * 2, RTO_MAX)
        for slot in expired:
            self._resend(slot, retries, deadlines, overtaking, now)

    def _resend(
        self, slot: int, retries: list[int], deadlines: np.ndarray, overtaking: Overtaking, now: float
    ) -> None:
        """Send a slot's current use again; its timer doubles with each resend of that use."""
        retries[slot] += 1
        self.stats.retransmissions += 1
        self._send(self._buffers[slot])
        overtaking.sent(slot)
        deadlines[slot] = now + min(self.rto * 2 ** (retries[slot] - 1), RTO_MAX)

    def _sample_rtt(self, rtt: float) -> None:
        """RFC 6298 smoothing, with a floor of RTO_SRTT_MULTIPLE x srtt; within [RTO_MIN, RTO_MAX]."""
        if self._srtt is None:
            self._srtt, self._rttvar = rtt, rtt / 2
        else:
            self._rttvar = 0.75 * self._rttvar + 0.25 * abs(self._srtt - rtt)
            self._srtt = 0.875 * self._srtt + 0.125 * rtt
        # RFC 6298's srtt + 4 x rttvar alone sits just above the median when a queue makes round trips
        # steady (measured: 10% of uses resent for nothing with 32 slots at 4 Mbit/s); and a use also
        # waits while a peer recovers its previous one. Fast retransmission recovers loss mid-call,
        # so the timer can afford to be late: never under RTO_SRTT_MULTIPLE round trips.
        self.rto = min(max(self._srtt + 4 * self._rttvar, RTO_SRTT_MULTIPLE * self._srtt, RTO_MIN), RTO_MAX)
        if len(self.stats.rtt_samples) < 10_000:
            self.stats.rtt_samples.append(rtt)

    def _stall_message(self, idle: float, outstanding: int, uses: int) -> str:
        host, port = self.switch
        message = (
            f"no progress for {idle:.1f} s: {outstanding} of {uses} packet(s) of this call still "
            f"unanswered by the switch at {host}:{port} (job {self.job_id}, rank {self.rank}, "
            f"{self.stats.retransmissions} retransmissions so far)"
        )
        if self.stats.refused:
            message += "; the switch's address refused datagrams (ICMP port unreachable): is it running?"
        else:
            message += "; a peer may have died, or the job's entries are gone from the switch"
        return message
