"""The packet engine: one worker's side of an all-reduce through the switch (docs/protocol.md, *Host rules*).

`Engine` is the protocol, with no I/O: `begin` a call, feed it every
datagram (`receive`) and the clock (`poll`), send what they return, and
`finish` when `done`. Time is an argument, so the same sequence of inputs
always gives the same packets out. This is the executable specification:
the runtime is the native engine (hostlib/csrc/, driven by
hostlib.native.PacketEngine), which has the same step methods and is tested
against this one packet for packet, counter for counter and bit for bit
(tests/hostlib/test_native_engine.py). The errors both raise are built here.

A call is a sequence of U slot *uses*; use u goes to slot `base + u mod W`
on set `(u div W) mod 2`, with `seq` = call number : u. W slots of one half
of the job's pool: calls alternate halves (the call after an aborted one
stays), so a rank still waiting for the last replay of a call keeps its
copies while the others start the next call. A slot's next use is sent only
when the result of its previous use has arrived, so at most W packets are
outstanding and every result implicitly acknowledges the previous one.

What a use carries and what happens to its result is the plan's business
(hostlib.reduction). Loss is found by *suspecting* a use whose result is late:
- fast retransmission (`Overtaking`): results of three transmissions sent
  after it have overtaken it, or of one sent a quarter round trip later;
- the retransmission timer, for what nothing overtakes (the tail of a call):
  the larger of smoothed RTT + 4 x deviation and 3 x smoothed RTT, bounded
  to [1 ms, 1 s]; doubled at each expiry until the next valid sample; its
  gains divided by the uses in flight (RFC 7323, Appendix G). When uses
  time out together only the earliest is asked after (RFC 6298 5.4): a
  rank or a switch that waited for a core holds a whole window, and asking
  after every use of it would flood the switch for no loss. (A rank that
  lost a DATA within LOSS_MEMORY asks after all of them, as under loss a
  timeout is a loss; so does an answer that shows a loss, a MISSING or a
  replay.)
  A call's opening use sent alone (a float call's priming) has a timer of
  its own, from earlier opening uses' round trips: no window queues ahead
  of it, and its expiry is a probe, not a loss.
A suspected use is asked after at once with a QUERY (its header alone) by
every rank that suspects it. The switch answers the asker alone, and only
with what it can act on: the RESULT (its result was lost), or a MISSING
naming who has contributed when the asker's own contribution is missing
(it resends its DATA, unchanged, at once); a rank whose contribution is in
gets no answer and waits. Questions are numbered in `flags` and answers
echo the number, so an answer is matched to its question: it times the
question's round trip exactly, and a MISSING for a question asked before a
resend does not cause another. A question is asked again by its own timer
only: three question round trips (a QUERY's round trip has no wait for the
slowest rank in it), doubled each time, twice or up to three data round
trips, and on up to a quarter of the wait for a result (estimates stop when
results do). So DATA is resent only by the rank whose
DATA was lost, and a lost RESULT costs its rank one question, at once. A
call with no progress for `progress_timeout` seconds fails with
AllreduceTimeout instead of hanging.
"""

from __future__ import annotations

import heapq
import math
import struct
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from contracts.protocol import (
    CALL_NUMBERS,
    ECN_CE,
    ECN_MASK,
    HEADER_BYTES,
    MAX_USES_PER_CALL,
    SET_BIT,
    SLOT_MASK,
    USE_BITS,
    MsgType,
    payload_bytes,
    seq_of,
)
from hostlib.calls import (
    AllreduceAborted,
    AllreduceError,
    AllreduceMismatch,
    AllreduceTimeout,
    describe_word,
)
from hostlib.reduction import Plan

HEADER = struct.Struct(">BBHHBBIIII")  # msg_type, rank, job_id, set|slot, exp, flags, seq, key, call, aux
assert HEADER.size == HEADER_BYTES
RTO_MIN, RTO_MAX, RTO_INITIAL = 0.001, 1.0, 0.2
QUESTION_MIN = 0.0002  # a question's timer never fires sooner (the switch answers at once)
RTO_SRTT_MULTIPLE = 3  # the timer never fires sooner than this many smoothed round trips
FAST_RETRANSMIT_AFTER = 3  # results of later sends that mark an unanswered transmission lost
REORDER_SHARE = 4  # a transmission is lost once one sent 1/this of the data round trip later is answered
REMEMBERED_ABORTS = 64  # aborts of calls this rank has not started yet
QUESTION_BACKOFFS = 2  # an unanswered question's wait doubles this often, or up to three data round trips
QUESTION_MEMORY = 4  # a use's latest QUERYs whose times are kept to time their answers
QUESTION_WAIT_SHARE = 4  # an unanswered question's wait doubles on up to 1/this of the wait for a result
RTT_SAMPLES = 10_000  # EngineStats keeps the first this many round-trip samples
LOSS_MEMORY = 1.0  # seconds a lost DATA makes timeouts ask after every late use (not hold them back)
QUEUE_DELAY = 0.001  # seconds of queueing, at least, that a loss must come with to be taken for congestion
QUEUE_TARGET = 0.02  # seconds of its own uses beyond the path's round trip that a rank's window may queue
QUESTION_BUDGET = 8  # a timeout under loss asks at once after late uses below L + this, holds the rest
CWND_MIN = FAST_RETRANSMIT_AFTER + 1  # the smallest congestion window: fast loss detection still works
TCP_SEGMENT = 1448  # bytes a TCP flow's window grows by per round trip (one segment); its floor's unit
DATAGRAM_HEADERS = 28  # IPv4 and UDP headers: what a DATA datagram adds to its payload on a link


def window_step(values_per_packet: int) -> int:
    """Uses the congestion window grows by per window of results: one TCP segment's worth of DATA
    datagrams (ceiling), so that a job takes bandwidth back at the rate a TCP flow does; counting
    uses instead (1 per window, 350 bytes at K = 64) left a job a quarter of TCP's growth, and two jobs
    beside one TCP flow near their floor (docs/performance.md, *Sharing a bottleneck*)."""
    return -(-TCP_SEGMENT // (payload_bytes(values_per_packet) + DATAGRAM_HEADERS))


def window_floor(values_per_packet: int) -> int:
    """The smallest congestion window: two TCP segments' worth (TCP's own floor after a mark, RFC 5681),
    and never below what fast loss detection needs (CWND_MIN)."""
    return max(CWND_MIN, 2 * window_step(values_per_packet))


_USE_MASK = (1 << USE_BITS) - 1


@dataclass(frozen=True)
class Membership:
    """Who this engine speaks for, and the job's parameters from its description."""

    job_id: int
    rank: int
    key: int
    world_size: int
    pool_size: int
    values_per_packet: int

    def __post_init__(self) -> None:
        if not 2 <= self.pool_size <= SLOT_MASK + 1:
            raise ValueError(f"pool size {self.pool_size} is outside 2..{SLOT_MASK + 1}")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} is outside 0..{self.world_size - 1}")

    @property
    def half(self) -> int:
        """Slots a call may use: half of the pool."""
        return self.pool_size // 2


@dataclass
class EngineStats:
    packets_sent: int = 0
    packets_received: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    retransmissions: int = 0  # DATA sent again (only when the switch said this rank's DATA was missing)
    queries: int = 0  # QUERY packets: header-only questions about a late use
    fast_retransmissions: int = 0  # queries about uses that later results had overtaken
    timeouts: int = 0  # retransmission timer expiries
    missing_received: int = 0  # MISSING notices about this rank's outstanding uses
    missing_resends: int = 0  # DATA resent because a MISSING said this rank's contribution was lost
    ignored: int = 0  # duplicates, late answers, strays, malformed datagrams
    needless_questions: int = 0  # replays of a first question whose multicast had come (out of step)
    forged: int = 0  # this job's packets without this rank's key
    refused: int = 0  # ICMP port unreachable seen on the socket
    calls: int = 0
    aborted_calls: int = 0
    ce_marks: int = 0  # RESULTs for outstanding uses that arrived with ECN CE
    window_decreases: int = 0  # multiplicative decreases of the congestion window (CE or loss)
    random_losses: int = 0  # losses that found no queue of this rank's uses, and left the window whole
    cwnd: int = 0  # the congestion window now, in uses (docs/protocol.md, *Congestion*)
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
    FAST_RETRANSMIT_AFTER-th newest transmission answered so far; or once
    the result of one transmission sent more than a reordering window after
    it has arrived (RFC 8985's RACK: the window is a quarter of the smoothed
    data round trip). A small window has too few later sends for three results:
    at four uses, a rank whose DATA was lost got one and waited for its
    timer while every rank's window waited on that use. Every
    transmission so marked is reported, however many are lost in one
    window. A resend takes its place at the back of the order, so a lost
    resend is found the same way. A QUERY does not: its answer to a lost
    DATA is a MISSING, and the RESULT comes only a round trip later (the
    missing rank's resend), after later sends have been answered; so a
    question withdraws its use from the order, and the question's own timer
    asks again if need be. A result of a resent use is no evidence: it may
    answer the first send. O(1) per packet, amortized.
    """

    def __init__(self, slots: int) -> None:
        self._latest = [0] * slots  # sequence number of each slot's last transmission; 0 when answered
        self._order: deque[tuple[int, int, float]] = deque()  # (sequence number, slot, time), oldest first
        self._sent = 0
        self._newest = [0] * FAST_RETRANSMIT_AFTER  # min-heap: the newest transmissions answered
        self._answered_at = -math.inf  # when the latest-sent transmission answered so far went

    def sent(self, slot: int, now: float = 0.0) -> None:
        """A transmission of the slot's current use, first or resend."""
        self._sent += 1
        self._latest[slot] = self._sent
        self._order.append((self._sent, slot, now))

    def withdraw(self, slot: int) -> None:
        """A question was asked about the slot's use: no longer watched (its timer watches it)."""
        self._latest[slot] = 0

    def answered(
        self,
        slot: int,
        first_send: bool,
        sent_at: float = 0.0,
        reorder: float = math.inf,
        by_count: bool = True,
    ) -> list[int]:
        """The slot's result arrived; returns the slots whose uses are now taken as lost. `sent_at`: when
        the answered (first) transmission went; `reorder`: the reordering window, seconds (math.inf: by
        count alone); `by_count`: whether FAST_RETRANSMIT_AFTER later results mark a transmission lost
        (False: by the window alone, once results are seen out of step)."""
        seq, self._latest[slot] = self._latest[slot], 0
        if not first_send:
            return []
        newest = self._newest
        if seq > newest[0]:
            heapq.heapreplace(newest, seq)
        self._answered_at = max(self._answered_at, sent_at)
        before = self._answered_at - reorder  # a transmission sent earlier than this was overtaken
        lost = []
        order, latest = self._order, self._latest
        threshold = newest[0] if by_count else 0
        while order and (order[0][0] < threshold or order[0][2] < before):
            sent, older, _ = order.popleft()
            if latest[older] == sent:  # still unanswered, and not sent again since
                lost.append(older)
        return lost

    def overdue(self, now: float, wait: float) -> list[int]:
        """RACK's reordering timer (RFC 8985, 6.2): a transmission sent before one that was answered, but
        within the reordering window of it, is taken as lost once `wait` (a data round trip and the
        window) has passed since it went. Without the timer such a use waited for the data timeout, three
        round trips after the latest result: at a call's end nothing more is sent to overtake it."""
        lost = []
        order, latest = self._order, self._latest
        while order:
            sent, slot, at = order[0]
            if latest[slot] == sent and not (at < self._answered_at and at + wait <= now):
                break
            order.popleft()
            if latest[slot] == sent:
                lost.append(slot)
        return lost

    def due(self, wait: float) -> float:
        """When `overdue` will next find a loss, or math.inf. Forgets the answered transmissions at the
        front of the order first (they are never reported)."""
        order, latest = self._order, self._latest
        while order and latest[order[0][1]] != order[0][0]:
            order.popleft()
        return order[0][2] + wait if order and order[0][2] < self._answered_at else math.inf


@dataclass(frozen=True)
class _Abort:
    """What an ABORT said: the offender's rank and descriptor, and the slot's (0 = not carried)."""

    rank: int
    offender: int
    held: int


class _Call:
    """One call in flight: its plan, slots and the state of each slot's outstanding use."""

    def __init__(self, number: int, plan: Plan, descriptor: int, base: int, width: int, k: int) -> None:
        self.number, self.plan, self.descriptor, self.base, self.width = number, plan, descriptor, base, width
        self.uses = plan.uses
        self.lone = False  # use 0 went alone: no other use of the call is sent before its result (begin)
        self.priming = plan.priming  # uses 0..M-1, whose results every later use waits for (_fill)
        self.current = [-1] * width  # use outstanding on each slot, -1 when the slot is done
        self.sent_at = [0.0] * width  # first transmission of the current use (RTT samples)
        self.data_asked = [0] * width  # QUERYs asked about the current use before its latest DATA went
        self.retries = [0] * width
        self.deadline = [math.inf] * width
        self.asked_at = [[0.0] * QUESTION_MEMORY for _ in range(width)]  # when the latest QUERYs were asked
        self.questions = [0] * width  # QUERYs asked about the current use (the n-th: question_flags(n))
        self.asks = [0] * width  # QUERYs and resends about the current use since the switch last answered
        self.held = [False] * width  # its timer expired with an earlier use's, which alone was asked after
        self.waiting = [False] * width  # its current use waits for the congestion window (not sent yet)
        self.agreed = [0] * width  # the exponent a waiting use is to be sent with
        self.serial = [0] * width  # the engine's number of the current use's first send
        self.delivered_at = [0] * width  # the engine's count of results when the current use first went
        self.waiting_count = 0
        self.recovering = 0  # outstanding uses asked after (retries > 0): out of the window's count (_fill)
        self.lowest = 0  # L: the lowest use whose result this rank has not received
        self.edge = 0  # uses below it are admitted by the window: sent once their slot is free
        self.buffers = [bytearray(payload_bytes(k)) for _ in range(width)]
        self.overtaking = Overtaking(width)
        self.outstanding = width
        self.fast_first = [-1] * width  # the slot's latest use asked after, if a fast suspicion asked first
        self.error: AllreduceError | None = None


class Engine:
    """The protocol state of one rank: calls in order, with no I/O (see the module's docstring)."""

    def __init__(
        self, member: Membership, progress_timeout: float = 10.0, congestion_control: bool = True
    ) -> None:
        self.member = member
        self.progress_timeout = progress_timeout
        self.congestion_control = congestion_control
        self.cwnd = member.half  # docs/protocol.md, *Congestion*: in uses, within [floor, min(H, cap)]
        self.cwnd_step = window_step(member.values_per_packet)
        self.cwnd_floor = window_floor(member.values_per_packet)
        self._acked = 0  # results without CE since the window last grew or shrank
        self._serial = 0  # the number the next first send of a use takes
        self._recover = 0  # a loss or CE signal about a use numbered below this was answered already
        self.call_number = 0  # of the next (or current) call
        self.half = 0  # which half of the pool the next call uses
        self.stats = EngineStats()
        self.rto = RTO_INITIAL
        self._backed_off = -math.inf  # when the data timeout last doubled
        self._loss_seen = -math.inf  # when a MISSING last made this rank resend its DATA
        self._srtt: float | None = None
        self._rttvar = 0.0
        self._qsrtt: float | None = None  # smoothed round trip of a QUERY and its answer
        self._qrttvar = 0.0
        self._base_rtt = math.inf  # the least round trip seen, data or question: the path with no queue
        self._delivered = 0  # results of outstanding uses received over the engine's life (_sample_rate)
        self._rate = [0.0, 0.0]  # the highest delivery rate sampled, uses a second: this call, the last
        self._least = [math.inf, math.inf]  # the least data round trip: this call, the last (_cap)
        self._least_ever = math.inf  # the least data round trip over the engine's life: the empty path
        self._out_of_step = False  # a needless question was seen: results come out of this rank's order
        self._lone_srtt: float | None = None  # smoothed round trip of a call's opening use sent alone
        self._lone_rttvar = 0.0
        self._lone_rto = math.inf  # the data timeout of a use sent alone, before rto bounds it
        self._call: _Call | None = None
        self._last_progress = 0.0
        self._started = 0.0
        self._broken: str | None = None
        self._aborts: OrderedDict[int, _Abort] = OrderedDict()  # call number -> ABORT seen before it began
        self._out: list[bytes] = []
        self.stats.cwnd = self.cwnd

    # ------------------------------------------------------------------ calls
    @property
    def done(self) -> bool:
        return self._call is None or self._call.outstanding == 0 or self._call.error is not None

    def begin(self, plan: Plan, descriptor: int, now: float) -> list[bytes]:
        """Start the next call; returns the packets to send. Raises at once if the call cannot run."""
        if self._call is not None:
            raise RuntimeError("a call is already in flight")
        if self._broken is not None:
            raise AllreduceError(self._broken)
        width = plan.width(self.member.half)
        plan.start(width, self.member.rank)
        if plan.uses > MAX_USES_PER_CALL:
            raise ValueError(f"a call takes at most {MAX_USES_PER_CALL} packets, not {plan.uses}")
        call = _Call(
            self.call_number,
            plan,
            descriptor,
            self.half * self.member.half,
            width,
            self.member.values_per_packet,
        )
        self._call = call
        self._started = self._last_progress = now
        # The cap's measurements span this call and the last one that made any (_cap).
        self._rate = [0.0, self._rate[0] if self._rate[0] > 0.0 else self._rate[1]]
        self._least = [math.inf, self._least[0] if self._least[0] < math.inf else self._least[1]]
        self._within_cap()
        known = self._aborts.pop(call.number, None)
        if known is not None:
            call.error = self._mismatch(known)
            return []
        if plan.uses == 0:
            call.outstanding = 0
            return []
        self._out = []
        for slot in range(width):
            self._wait(slot, slot, 0)
        self._fill(now, -1)
        if call.outstanding - call.waiting_count == 1:  # the call opens with one use alone (_timeout)
            call.lone = True
            call.deadline[0] = now + self._timeout(0)
        return self._take()

    def fail(self, error: AllreduceError) -> None:
        """Fail the call in flight and every later call with `error`: the job is gone (deleted, a peer's
        lease expired), as the controller says. Safe from another thread (the native driver is woken at
        once)."""
        self._broken = str(error)
        call = self._call
        if call is not None and call.error is None:
            call.error = error

    def finish(self, now: float) -> None:
        """End the call: the next call's number and half; raises the call's error, if any."""
        call, self._call = self._call, None
        if call is None:
            return
        self.stats.busy_seconds += now - self._started
        self.call_number = (call.number + 1) % CALL_NUMBERS
        error = call.error
        if isinstance(error, AllreduceAborted):
            self.stats.aborted_calls += 1  # the next call reuses the aborted call's half
        else:
            self.half ^= 1
            self.stats.calls += 1 if error is None else 0
        if isinstance(error, AllreduceTimeout):
            self._broken = stopped_message(call.number)
        if error is not None:
            raise error

    # ------------------------------------------------------------------ inputs
    def receive(self, datagram: bytes | bytearray | memoryview, now: float, tos: int = 0) -> list[bytes]:
        """One datagram from the switch's address, with the DSCP/ECN byte it arrived with; returns what to
        send in answer."""
        self.stats.packets_received += 1
        self.stats.bytes_received += len(datagram)
        if len(datagram) < HEADER_BYTES:
            self.stats.ignored += 1
            return []
        msg_type, _rank, job_id, set_slot, exp, echo, seq, key, call_word, aux = HEADER.unpack_from(datagram)
        if job_id != self.member.job_id:
            self.stats.ignored += 1
            return []
        if key != self.member.key:
            self.stats.forged += 1
            return []
        self._out = []
        size = len(datagram)
        if msg_type == MsgType.ABORT and size == HEADER_BYTES:
            self._abort(seq, _Abort(_rank, call_word, aux))
            return self._take()
        slot = self._outstanding_slot(seq, set_slot)
        if slot is None:
            self.stats.ignored += 1
            if msg_type == MsgType.RESULT and echo == 1:
                self._needless(seq, set_slot)
        elif msg_type == MsgType.RESULT and size == payload_bytes(self.member.values_per_packet):
            self._result(slot, memoryview(datagram)[HEADER_BYTES:], exp, echo, now, tos & ECN_MASK == ECN_CE)
        elif msg_type == MsgType.MISSING and size == HEADER_BYTES:
            self._missing(slot, aux, echo, now)
        elif msg_type == MsgType.STALE and size == HEADER_BYTES:
            self._stale(aux)
        else:
            self.stats.ignored += 1
        return self._take()

    def poll(self, now: float) -> list[bytes]:
        """Timers: resends whose time has come, and the progress timeout."""
        call = self._call
        if call is None or self.done:
            return []
        self._out = []
        overdue = call.overtaking.overdue(now, self._rack_wait())
        for lost in overdue:
            self._suspect(lost, now, fast=True)
        expired = []
        for s in range(call.width):
            if call.current[s] < 0 or call.deadline[s] > now:
                continue
            restart = self._last_progress + self._timeout(s)
            if call.retries[s] == 0 and restart > now:
                # RFC 6298 5.3: the data timer restarts whenever a result arrives. While results flow,
                # fast retransmission finds what is lost; a use that waits in a queue behind the others
                # (a call's first window on a slow link) is not late.
                call.deadline[s] = restart
            else:
                expired.append(s)
        if expired:
            # RFC 6298 5.5: the data timeout backs off and stays backed off until a fresh sample. Karn's
            # rule keeps the slow (retransmitted) uses out of the estimate, so without this a queue
            # building behind a large window would keep the timeout below the RTT. Once per timeout, as
            # TCP's one timer: a use sent before the last doubling was timed with the smaller value, so
            # its expiry is no new evidence (W slots expiring one after another at a call's end, when
            # nothing overtakes, doubled it W times). Questions back off on their own (_question_timeout).
            if any(
                call.retries[s] == 0 and not self._probing(s) and call.sent_at[s] >= self._backed_off
                for s in expired
            ):
                self.rto = min(self.rto * 2, RTO_MAX)
                self._backed_off = now
            # RFC 6298 5.4: a timeout asks after the earliest use only: the lowest, as TCP's earliest segment
            # is the lowest in sequence, not the one sent first. A use sent late (its slot's previous result
            # came by a replay) is the one the other ranks' windows wait for (u < L + cwnd), and the uses
            # sent before it may lie beyond those windows: asked after first, each cost a silent question
            # and a timeout before the lost DATA was found (the CI stall of experiments.loss, issue 28's
            # window). Uses whose timers expire together
            # (no result for a whole timeout) most often wait for a rank or the switch that waited for a
            # core, and asking after each of them would cost N x W questions that the switch, itself
            # short of a core, must drop. The others are held: asked when an answer shows that the timeout
            # was a loss (_ask_held: a MISSING, this rank's DATA was lost; a replay, its RESULT was), or
            # one by one at later timeouts while nothing arrives.
            # A rank that saw its DATA lost within LOSS_MEMORY takes timeouts for losses, as before, and
            # asks at once after every late use below L + QUESTION_BUDGET, the uses the window waits on:
            # with 5 % loss, holding them cost a round trip at most call ends (4 Mbit/s links: 78 % of
            # lossless goodput instead of 87 %). It holds the later ones, as a rank that saw no loss
            # holds all but one: asking after every late use made a stall cost a question for each use a
            # window has out, and a window that random loss no longer halves (_lost) asked about one
            # question per DATA on the lab's 4 Mbit/s links (docs/performance.md, *Heavy loss*).
            hold = now - self._loss_seen >= LOSS_MEMORY
            earliest = min(
                (s for s in expired if call.retries[s] == 0), key=call.current.__getitem__, default=-1
            )
            for slot in expired:
                beyond = call.current[slot] >= call.lowest + QUESTION_BUDGET
                if (hold or beyond) and call.retries[slot] == 0 and slot != earliest:
                    call.held[slot] = True
                    call.deadline[slot] = now + self.rto
                elif call.retries[slot] == 0 and self._probing(slot):
                    # A use sent alone is asked after at its own, shorter timeout: a probe, as RFC 8985's
                    # tail loss probe is, not a loss. The answer shows what was lost (a MISSING is a loss
                    # for the window as ever); silence backs the probe's timeout off, not the data timer.
                    self.stats.timeouts += 1
                    self._lone_rto *= 2
                    self._suspect(slot, now, fast=False)
                else:
                    self.stats.timeouts += 1
                    if not hold:  # a timeout is a loss only after a loss (LOSS_MEMORY), as for holding
                        self._lost(call.serial[slot])
                    self._suspect(slot, now, fast=False)
        if expired or overdue:
            self._fill(now, -1)  # the uses asked after leave the window's count
        if now >= self._last_progress + self.progress_timeout:  # the very sum next_deadline gives
            call.error = AllreduceTimeout(self._stall_message(now - self._last_progress))
        return self._take()

    def next_deadline(self) -> float:
        """When `poll` must run next (math.inf with nothing outstanding)."""
        call = self._call
        if call is None or self.done:
            return math.inf
        return min(
            min(call.deadline),
            self._last_progress + self.progress_timeout,
            call.overtaking.due(self._rack_wait()),
        )

    # ------------------------------------------------------------------ protocol
    def _named(self, seq: int, set_slot: int) -> tuple[int, int] | None:
        """The slot and use of the current call that a packet names (the slot within the call's width),
        or None."""
        call = self._call
        if call is None or seq >> USE_BITS != call.number:
            return None
        slot = (set_slot & SLOT_MASK) - call.base
        return (slot, seq & _USE_MASK) if 0 <= slot < call.width else None

    def _outstanding_slot(self, seq: int, set_slot: int) -> int | None:
        """The call's slot whose outstanding use the packet names exactly, or None."""
        call, named = self._call, self._named(seq, set_slot)
        if call is None or named is None:
            return None
        slot, use = named
        if call.current[slot] != use or call.waiting[slot]:
            return None
        if (set_slot >> 15) != (use // call.width) % 2:
            return None
        return slot

    def _send(self, slot: int, use: int, agreed_exp: int, now: float) -> None:
        call, member = self._call, self.member
        assert call is not None
        values, exp = call.plan.payload(use, agreed_exp)
        set_bit = SET_BIT if (use // call.width) % 2 else 0
        buffer = call.buffers[slot]
        HEADER.pack_into(
            buffer, 0, MsgType.DATA, member.rank, member.job_id, set_bit | (call.base + slot), exp, 0,
            seq_of(call.number, use), member.key, call.descriptor, 0,
        )  # fmt: skip
        buffer[HEADER_BYTES:] = values
        call.current[slot] = use
        call.waiting[slot] = False
        call.serial[slot] = self._serial
        call.delivered_at[slot] = self._delivered
        self._serial += 1
        call.sent_at[slot] = now
        call.retries[slot] = call.asks[slot] = call.questions[slot] = call.data_asked[slot] = 0
        call.held[slot] = False
        call.deadline[slot] = now + self.rto
        call.overtaking.sent(slot, now)
        self._emit(buffer)

    def _again(self, slot: int, packet: bytes | bytearray, now: float) -> None:
        """A second (third, ...) transmission about a slot's use: Karn's rule for the data RTT, and a
        question timer that doubles with every question the switch leaves unanswered."""
        call = self._call
        assert call is not None
        call.recovering += call.retries[slot] == 0
        call.retries[slot] += 1
        call.asks[slot] += 1
        call.deadline[slot] = now + self._question_timeout(call.asks[slot], now)
        self._emit(packet)

    def _question_timeout(self, asks: int, now: float) -> float:
        """How long to wait for the switch's answer to a question (or for a use it said is collecting):
        three question round trips, doubled per unanswered one, QUESTION_BACKOFFS times or up to three
        data round trips, within [QUESTION_MIN, RTO_MAX]. Silence is the normal answer for a rank whose
        contribution is in, and it must ask again soon after the use completes in case its RESULT was
        lost: hence the early stop. But a question estimate far too small (taken on an empty queue, before
        one built up) must not keep the questions coming faster than their answers: the data round trip,
        timed by DATA through the same queues, bounds how soon the backoff may stop. (Not the data timeout
        itself, which a call's start or end may have backed off to a second.) Both estimates stop when
        results stop: Karn's rule takes no sample from a use asked after, and a rank whose contribution is
        in gets no answers. So the doubling also goes on up to a QUESTION_WAIT_SHARE of the time since the
        last result, as TCP's backed-off timer does while nothing comes back: a switch short of a core,
        whose answers came later than four questions, kept every waiting rank asking at the rate of round
        trips timed before the wait, and those questions were its backlog (60 s without progress).)"""
        base = max(RTO_SRTT_MULTIPLE * self._question_rtt(), QUESTION_MIN)
        waited = (now - self._last_progress) / QUESTION_WAIT_SHARE
        cap = max(base * 2**QUESTION_BACKOFFS, RTO_SRTT_MULTIPLE * self._data_rtt(), waited)
        return min(base * 2 ** min(max(asks - 1, 0), 30), cap, RTO_MAX)

    def _question_rtt(self) -> float:
        """The switch answers a QUERY at once, so its round trip is the network's, without the wait for
        the slowest rank that data round trips include."""
        return self._qsrtt if self._qsrtt is not None else self._data_rtt()

    def _data_rtt(self) -> float:
        """The smoothed data round trip, or before any sample the one RTO_INITIAL assumes."""
        return self._srtt if self._srtt is not None else RTO_INITIAL / RTO_SRTT_MULTIPLE

    def _question_number(self, slot: int, echo: int) -> int | None:
        """Which of the slot's questions (1, 2, ...) an answer echoes, or None when the echo names none
        (a multicast RESULT's 0, or no question asked yet about the current use)."""
        call = self._call
        assert call is not None
        n = call.questions[slot]
        if echo == 0 or n == 0:
            return None
        back = (question_flags(n) - echo) % 255
        return n - back if back < n else None

    def _asked_time(self, slot: int, number: int) -> float:
        """When the slot's question `number` was asked, if it is among the latest QUESTION_MEMORY; if it is
        older, when the oldest of them was, so that its answer's sample is a lower bound of its round trip.
        An answer later than the memory is exactly what a question estimate taken before a queue built up
        must learn from: ignored, it left the questions coming faster than their answers for good."""
        call = self._call
        assert call is not None
        return call.asked_at[slot][max(number, call.questions[slot] - QUESTION_MEMORY + 1) % QUESTION_MEMORY]

    def _sample_question(self, rtt: float) -> None:
        self._qsrtt, self._qrttvar = smooth(self._qsrtt, self._qrttvar, rtt)
        self._base_rtt = min(self._base_rtt, rtt)

    def _answered(self, slot: int, echo: int, now: float) -> None:
        """The switch answered a question about the slot's use: its round trip is a sample, since the echo
        says which question it answers (Karn's ambiguity does not arise)."""
        call = self._call
        assert call is not None
        number = self._question_number(slot, echo)
        if number is not None:
            self._sample_question(now - self._asked_time(slot, number))
        call.asks[slot] = 0

    def _ask_held(self, now: float) -> None:
        """An answer showed that the timeout was a loss, not a wait: a MISSING that this rank's DATA was
        lost, a replay that its RESULT was. The uses held back with the asked one at a timeout may be lost
        too, and are asked after at once. As at a timeout, each is a loss for the window only within
        LOSS_MEMORY of a lost DATA: a lost RESULT alone never halved it."""
        call = self._call
        assert call is not None
        lossy = now - self._loss_seen < LOSS_MEMORY
        for held in range(call.width):
            if call.held[held] and call.retries[held] == 0 and call.current[held] >= 0:
                self.stats.timeouts += 1
                if lossy:
                    self._lost(call.serial[held])
                self._suspect(held, now, fast=False)

    def _resend(self, slot: int, now: float) -> None:
        """Send a slot's current use again, unchanged: the switch said this rank's DATA is missing."""
        call = self._call
        assert call is not None
        call.data_asked[slot] = call.questions[slot]
        self.stats.retransmissions += 1
        call.overtaking.sent(slot, now)
        self._again(slot, call.buffers[slot], now)

    def _query(self, slot: int, now: float) -> None:
        """Ask the switch about a slot's use: it answers with the RESULT, a MISSING (this rank's DATA is
        missing) or a STALE, or not at all (this rank's DATA is in: the others' are awaited). The QUERY's
        `flags` numbers it, and the answer echoes the number."""
        call = self._call
        assert call is not None
        call.questions[slot] += 1
        n = call.questions[slot]
        call.asked_at[slot][n % QUESTION_MEMORY] = now
        packet = bytearray(call.buffers[slot][:HEADER_BYTES])
        packet[0] = MsgType.QUERY
        packet[7] = question_flags(n)
        self.stats.queries += 1
        call.overtaking.withdraw(slot)
        self._again(slot, packet, now)

    def _reordering(self) -> float:
        """The reordering window: how much later than an unanswered transmission one that was answered
        must have gone for the first to be taken as lost. A share of the data round trip while results
        come back in about the order this rank sent its uses; the whole round trip once they are seen
        out of step (_needless)."""
        rtt = self._data_rtt()
        return rtt if self._out_of_step else rtt / REORDER_SHARE

    def _needless(self, seq: int, set_slot: int) -> None:
        """A replay answering this rank's first question about a use whose multicast RESULT had already
        come (RFC 8985's DSACK-detected spurious retransmission): the question reached the switch after
        the use completed, so nothing was lost and a peer sent the use later than this rank did. Each
        rank's congestion window is its own, so ranks send a use up to a round trip apart, and a use
        completes when the last of them sends it: results then come out of this rank's order with nothing
        lost, and each question so caused costs a RESULT on the downlink, behind the multicast it
        repeats. From then on, as RACK once it has seen reordering, loss is found by a reordering window
        of a whole data round trip and no longer by FAST_RETRANSMIT_AFTER later results: at 1 % loss on
        4 Mbit/s links (K = 64) the replays were 12 % more downlink bytes and cost 7-9 points of goodput
        (docs/protocol.md, *Ranks out of step*). A later question's replay says nothing (the first may
        have found a peer's DATA missing, and the use completed before the next), nor does the replay
        of a first question that a timer asked: a timer expires late when its own rank waited for a
        core, the result then in its socket, and on a busy loopback host such a question put most ranks
        out of step within their first calls, lossless ones too. Only a fast suspicion (results of later
        sends came first) says that results came out of order."""
        call, named = self._call, self._named(seq, set_slot)
        if call is None or named is None:
            return
        slot, use = named
        if use % call.width == slot and use < call.uses:
            delivered = call.current[slot] < 0 or use < call.current[slot]
            if delivered and call.fast_first[slot] == use:
                self.stats.needless_questions += 1
                self._out_of_step = True

    def _rack_wait(self) -> float:
        """How long after it went an overtaken transmission is taken as lost (Overtaking.overdue): a data
        round trip and the reordering window, RFC 8985's RACK.rtt + RACK.reo_wnd."""
        return self._data_rtt() + self._reordering()

    def _suspect(self, slot: int, now: float, *, fast: bool) -> None:
        """The slot's use may be lost, its DATA (this rank's or another's) or its RESULT: ask at once.
        Only this rank can find out that its RESULT was lost, and the switch answers only a rank that
        has something to do, so asking costs a header-only QUERY and nothing more."""
        call = self._call
        assert call is not None
        if call.current[slot] >= 0 and not call.waiting[slot]:
            self.stats.fast_retransmissions += fast
            if call.questions[slot] == 0:  # its first question: evidence of order if fast (_needless)
                call.fast_first[slot] = call.current[slot] if fast else -1
            self._query(slot, now)

    def _result(self, slot: int, values: memoryview, exp: int, echo: int, now: float, ce: bool) -> None:
        call = self._call
        assert call is not None
        use = call.current[slot]
        serial = call.serial[slot]
        first_send = call.retries[slot] == 0
        call.recovering -= not first_send
        self._delivered += 1
        if first_send:  # Karn: only unambiguous samples
            # A call has W uses in flight and so W samples per round trip where TCP has one. While no loss
            # was seen (LOSS_MEMORY) the gains are divided by W (RFC 7323, Appendix G): a wait that held a
            # whole window (a rank or the switch waiting for a core) is then not forgotten within a round
            # trip. Under loss TCP's gains stay, to follow the queues that recovery builds and drains, but
            # for a round trip that a peer's recovery lengthened, divided by W as while quiet (_lengthens).
            rtt = now - call.sent_at[slot]
            self._sample_rate(rtt, self._delivered - call.delivered_at[slot])
            quiet = now - self._loss_seen >= LOSS_MEMORY
            self._sample_rtt(rtt, call.width if quiet or self._lengthens(rtt) else 1)
        if call.lone and use == 0 and echo == 0 and call.data_asked[slot] == 0:
            # The multicast RESULT of the opening use's only DATA: a probe asked nothing of the DATA, so
            # the sample stands (a peer that started the call late is in it, as the timer must learn).
            self._sample_lone(now - call.sent_at[slot])
        replay = self._question_number(slot, echo) is not None  # an answer to a question, not the multicast
        if call.asks[slot]:
            self._answered(slot, echo, now)
        overtaken = call.overtaking.answered(
            slot, first_send, call.sent_at[slot], self._reordering(), not self._out_of_step
        )
        call.plan.deliver(use, values, exp)
        self._last_progress = now
        following = use + call.width
        if following < call.uses:
            self._wait(slot, following, exp)
        else:
            call.current[slot] = -1
            call.deadline[slot] = math.inf
            call.outstanding -= 1
        self._advance_lowest()
        if ce:
            self.stats.ce_marks += 1
            self._decrease(serial)
        else:
            self._grow()
        for lost in overtaken:
            self._suspect(lost, now, fast=True)
        if replay:
            # The switch answered a question with the RESULT: the use was complete, and its multicast,
            # which left before the answer, was lost. The timeout was a loss, as a MISSING shows for a
            # DATA: held on, each use held with it cost a doubled timeout more (a second each once backed
            # off) while a lost RESULT or DATA behind it kept every other rank waiting.
            self._ask_held(now)
        self._fill(now, slot)  # after the questions: they go out ahead of new DATA, and widen the window

    def _missing(self, slot: int, contributors: int, echo: int, now: float) -> None:
        """The answer to one of this rank's QUERYs: its contribution to the use was missing when that
        QUERY arrived. Resend the DATA if the question was asked after its latest transmission (it should
        have arrived first: it was lost); a younger transmission answers for itself, and its timer stands.
        Which came first is counted in questions, not read from their times, so that an answer later than
        the QUESTION_MEMORY latest questions still counts: ignored, the MISSING of a rank whose questions
        came faster than their answers was never acted on. An answer naming no question is ignored."""
        call = self._call
        assert call is not None
        number = self._question_number(slot, echo)
        if number is None:
            self.stats.ignored += 1
            return
        self.stats.missing_received += 1
        self._sample_question(now - self._asked_time(slot, number))
        if contributors >> self.member.rank & 1:
            # In already (the switch answers so only a rank whose contribution is missing): the others'
            # are awaited; ask again later.
            call.asks[slot] = 0
            call.deadline[slot] = now + self._question_timeout(1, now)
        elif number > call.data_asked[slot]:
            call.asks[slot] = 0
            self.stats.missing_resends += 1
            self._lost(call.serial[slot])
            self._resend(slot, now)
            self._loss_seen = now
            self._ask_held(now)
            self._fill(now, -1)

    # ------------------------------------------------------------------ congestion window
    def _limited(self) -> bool:
        """Whether the window, not slot pacing alone, decides when a use is sent."""
        call = self._call
        assert call is not None
        return self.congestion_control and self.cwnd < call.width

    def _wait(self, slot: int, use: int, agreed_exp: int) -> None:
        """The slot's next use, not sent until the window admits it (_fill)."""
        call = self._call
        assert call is not None
        call.current[slot] = use
        call.agreed[slot] = agreed_exp
        call.held[slot] = False
        call.waiting[slot] = True
        call.waiting_count += 1
        call.deadline[slot] = math.inf

    def _advance_lowest(self) -> None:
        """L moves past every use whose result is in: its slot has moved on, or is done. O(1) amortized."""
        call = self._call
        assert call is not None
        while call.lowest < call.uses:
            held = call.current[call.lowest % call.width]
            if 0 <= held <= call.lowest:
                break
            call.lowest += 1

    def _fill(self, now: float, freed: int) -> None:
        """Send the waiting uses the window admits, lowest use first. Without a limit (cwnd >= W) a slot
        sends as soon as it is free, as without congestion control; with one, use u goes when its slot is
        free and u < L + cwnd + R (docs/protocol.md, *Congestion*): a window over the use sequence, so that
        no two ranks can each hold a use the other has not sent. R counts the outstanding uses asked
        after: found lost, they are no longer in the network (RFC 6675's pipe), and without R a use in
        recovery at L held the whole window back, the link idle, until its DATA or RESULT came again.
        Past that window the uses go on while fewer than cwnd are in flight (see below)."""
        call = self._call
        assert call is not None
        if call.waiting_count == 0:
            return
        limited = self._limited()
        # While the priming is incomplete (L < M) the window ends at M: a float call's chunks wait for the
        # exponents it agrees. (M is 1 unless W * N > 4K, so this is normally the call's first packet alone.)
        gate = call.priming if call.lowest < call.priming else call.uses
        alone = call.waiting_count == 1 and freed >= 0 and call.waiting[freed]  # the freed slot's use only
        if not limited and gate == call.uses and alone:
            call.waiting_count = 0
            self._send(freed, call.current[freed], call.agreed[freed], now)
            return
        if limited:
            if freed >= 0 and call.waiting[freed] and call.current[freed] < call.edge:
                call.waiting_count -= 1
                self._send(freed, call.current[freed], call.agreed[freed], now)
            use, end = max(call.edge, call.lowest), min(call.lowest + self.cwnd + call.recovering, gate)
            call.edge = max(call.edge, end)
        else:
            use, end = call.lowest, gate
            call.edge = gate
        while use < end and call.waiting_count:
            slot = use % call.width
            if call.waiting[slot] and call.current[slot] == use:
                call.waiting_count -= 1
                self._send(slot, use, call.agreed[slot], now)
            use += 1
        if limited:
            # Beyond the window, uses go on while fewer than cwnd of this rank's uses are in flight (sent and
            # unanswered, less those asked after: RFC 6675's pipe, as R above), lowest first, each as soon as
            # its slot is free. The window above keeps every rank's L live; this keeps the link busy while L
            # is in recovery, which the window alone left idle for the recovery's round trips. Counting the
            # uses asked after too left 4 Mbit/s links idle a sixth of the time under 5 % loss, where a
            # quarter of the uses wait for some rank's recovery: the cap (_cap) now bounds the DATA ahead of a
            # recovery's QUERY in the link's queue. The walk passes over every use it cannot send: one already
            # sent or answered (its slot holds it or a later use, or none: after a decrease lowers the edge,
            # those lie between it and the highest use let out), and one whose slot still holds an earlier
            # use. Stopping at the first of those (u = L + W while L is in recovery) held every slot's next
            # use from there on behind L, where an unlimited window holds back L's own slot only: with the
            # window one use short of W, calls under 5 % random loss took 40 % longer than with it whole
            # (docs/performance.md, *Heavy loss*). A use passed over for its slot is not let out: the edge
            # stays at the first of them, so that it goes by this walk, within the flight, once its slot is
            # free (not at once, as a use below the edge does). The walk ends past the last waiting use.
            use = max(call.edge, call.lowest)
            flight = call.outstanding - call.waiting_count - call.recovering
            ahead = sum(1 for s in range(call.width) if call.waiting[s] and call.current[s] >= use)
            held = -1  # the first use passed over because its slot still holds an earlier one
            while flight < self.cwnd and use < gate and ahead:
                slot = use % call.width
                if call.waiting[slot] and call.current[slot] == use:
                    call.waiting_count -= 1
                    ahead -= 1
                    self._send(slot, use, call.agreed[slot], now)
                    flight += 1
                elif held < 0 and 0 <= call.current[slot] < use:
                    held = use
                use += 1
            call.edge = max(call.edge, use if held < 0 else held)

    def _new_event(self, serial: int) -> bool:
        """Whether a CE mark or a loss about the use first sent as `serial` is a new congestion event: one
        per window (a signal about a use sent before the last decrease is part of the same event)."""
        return self.congestion_control and self._call is not None and serial >= self._recover

    def _decrease(self, serial: int) -> None:
        """CE or a loss about the use first sent as `serial`: halve the window in use, once per window."""
        call = self._call
        if call is None or not self._new_event(serial):
            return
        self._recover = self._serial
        self._acked = 0
        self._shrink(min(max(min(self.cwnd, call.width) // 2, self.cwnd_floor), self.member.half))
        self.stats.window_decreases += 1

    def _shrink(self, cwnd: int) -> None:
        """A smaller window takes effect at once: the edge comes down to its end."""
        call = self._call
        assert call is not None
        self.cwnd = cwnd
        call.edge = min(call.edge, call.lowest + self.cwnd + call.recovering)
        self.stats.cwnd = self.cwnd

    def _lost(self, serial: int) -> None:
        """A loss of this rank's DATA, about the use first sent as `serial` (a MISSING, or a timeout within
        LOSS_MEMORY of one): congestion, and a decrease, only while this rank's uses stand in a queue.
        A queue that overflows drops while it is full; a loss with no queue of the job's uses is the
        link's or a switch's own. Halving for every loss (TCP's rule) kept the window at its floor at 5 %
        random loss, where a window of 10 uses loses a DATA in 40 % of its round trips, and a lost use at L
        then holds every other use of the window back until it is recovered (docs/performance.md, *Heavy
        loss*). The queue is the question round trip's excess over the least round trip seen (a question
        is answered at once, so no peer's recovery is in it), QUEUE_DELAY or more. Not TCP Vegas's backlog
        in packets (the uses in flight times that excess's share of the round trip): on loopback, where
        four ranks and the switch share two cores, round trips wait for a core, and the backlog read tens
        of uses into that wait, and at the floor the backlog can never reach the floor. CE needs no such
        test: a marking queue says that it is one (_decrease)."""
        if not self._new_event(serial):
            return
        if self._question_rtt() - self._base_rtt < QUEUE_DELAY:
            self.stats.random_losses += 1
            return
        self._decrease(serial)

    def _grow(self) -> None:
        """A result without CE: `cwnd_step` uses more per window of them (a TCP segment's worth), while
        the window limits the call, and never past the cap, which comes down first if it has."""
        cap = self._within_cap()
        if not self._limited():
            return
        self._acked += 1
        if self._acked >= self.cwnd:
            self._acked = 0
            self.cwnd = min(self.cwnd + self.cwnd_step, self.member.half, cap)
            self.stats.cwnd = self.cwnd

    def _within_cap(self) -> int:
        """The cap, with the window brought within it (as a decrease does, edge included)."""
        cap = self._cap()
        if self.cwnd > cap:
            self._shrink(cap)
        return cap

    def _sample_rate(self, rtt: float, delivered: int) -> None:
        """A use's round trip (first send, Karn) and the results that arrived within it, its own included:
        a delivery rate (BBR's sample), and the least round trip, for the cap."""
        if rtt > 0.0:
            self._rate[0] = max(self._rate[0], delivered / rtt)
            self._least[0] = min(self._least[0], rtt)
            self._least_ever = min(self._least_ever, rtt)

    def _cap(self) -> int:
        """The most uses the window holds: the highest delivery rate times the least data round trip
        and QUEUE_TARGET (a bandwidth-delay product and that much queue), both measured over this call
        and the last (a path that has become faster is learnt within two calls); H until a call has
        measured a rate, and with congestion control off. A loss with a queue halves the window, so without
        a cap random loss alone bounded it, and at 1 % on 4 Mbit/s links it held 10-17 uses (85-145 ms)
        in each uplink: every recovery, and a call's last losses above all, waited that long. The first
        call is not capped: its early samples, taken while its pipe fills, are below the link's rate.
        Nor is a window that shares a queue another flow keeps standing (the least round trip of these
        two calls QUEUE_TARGET or more above the least ever seen; the rank's own queue drains at every
        call's start): there the cap held the job to the share it had, and the next call's rate to less,
        and beside a TCP flow on a tail-drop link the jobs kept a sixth of an equal share. Loopback's rate
        is tens of thousands of uses a second, and its cap far above H (docs/protocol.md, *Congestion*)."""
        if (
            not self.congestion_control
            or self._rate[1] <= 0.0
            or min(self._least) - self._least_ever >= QUEUE_TARGET
        ):
            return self.member.half
        rate, least = max(self._rate), min(self._least)
        return max(self.cwnd_floor, min(self.member.half, math.ceil(rate * (least + QUEUE_TARGET))))

    def _stale(self, held: int) -> None:
        call = self._call
        assert call is not None
        call.error = abandoned_error(call.number, self.member.job_id, held)

    def _abort(self, seq: int, abort: _Abort) -> None:
        number = seq >> USE_BITS
        call = self._call
        if call is not None and number == call.number:
            if call.error is None:
                call.error = self._mismatch(abort)
            return
        ahead = (number - self.call_number) % CALL_NUMBERS
        if call is None and ahead == 0 or 0 < ahead < CALL_NUMBERS // 2:
            self._aborts.setdefault(number, abort)
            while len(self._aborts) > REMEMBERED_ABORTS:
                self._aborts.popitem(last=False)
        else:
            self.stats.ignored += 1  # an old call's abort, duplicated or late

    def _mismatch(self, abort: _Abort) -> AllreduceMismatch:
        call = self._call
        assert call is not None
        return mismatch_error(
            call.number, self.member, call.descriptor, abort.rank, abort.offender, abort.held
        )

    def _sample_rtt(self, rtt: float, samples_per_rtt: int = 1) -> None:
        """RFC 6298 smoothing, with a floor of RTO_SRTT_MULTIPLE x srtt; within [RTO_MIN, RTO_MAX]; the
        gains divided by `samples_per_rtt` (see _result)."""
        self._srtt, self._rttvar = smooth(self._srtt, self._rttvar, rtt, samples_per_rtt)
        self._base_rtt = min(self._base_rtt, rtt)
        # RFC 6298's srtt + 4 x rttvar alone sits just above the median when a queue makes round trips
        # steady (measured: 10% of uses resent for nothing with 32 slots at 4 Mbit/s); and a use also
        # waits while a peer recovers its previous one. Fast retransmission recovers loss mid-call,
        # so the timer can afford to be late: never under RTO_SRTT_MULTIPLE round trips.
        self.rto = retransmission_timeout(self._srtt, self._rttvar)
        if len(self.stats.rtt_samples) < RTT_SAMPLES:
            self.stats.rtt_samples.append(rtt)

    def _timeout(self, slot: int) -> float:
        """The data timeout of the slot's current use. A call that opens with one use alone (a float call's
        priming use, which every later use waits for; a call of one packet) times it by an estimate of
        its own: its round trip has no queue of this rank's window in it, so the data timer, three round
        trips of uses that queued behind a window, was hundreds of milliseconds for a packet that comes
        back in a few on 4 Mbit/s links (a lost priming DATA held every rank 0.35 s: docs/performance.md,
        *Heavy loss*). Never longer than the data timer."""
        return self._lone_rto if self._probing(slot) else self.rto

    def _probing(self, slot: int) -> bool:
        """Whether the slot's use is a call's opening use sent alone, timed by its shorter timeout."""
        call = self._call
        assert call is not None
        return call.lone and call.current[slot] == 0 and self._lone_rto < self.rto

    def _sample_lone(self, rtt: float) -> None:
        """A round trip of a call's opening use sent alone: RFC 6298's timeout on its own estimate."""
        self._lone_srtt, self._lone_rttvar = smooth(self._lone_srtt, self._lone_rttvar, rtt)
        self._lone_rto = retransmission_timeout(self._lone_srtt, self._lone_rttvar)

    def _lengthens(self, rtt: float) -> bool:
        """Whether a round trip is longer than both the smoothed one and RTO_SRTT_MULTIPLE question round
        trips. Under loss a use's round trip includes the slowest rank's recovery of it (a peer's lost
        DATA, found by that peer's timers). At TCP's gains the timers followed recovery times, and
        recovery times follow the timers (data timeouts find a call's last losses, question waits stop
        doubling at three data round trips): at 20 % loss each call's estimate lengthened the next call's
        recovery, from 0.4 ms to 85 ms in three calls of 256 uses on the fabric, whose round trip is
        0.1 ms, and a 1M call on loopback took 260 s (docs/performance.md, *Heavy loss*). A question is
        answered at once, through the same queues, so its round trip is the network's without any
        rank's recovery in it: a data round trip far beyond it is a wait for a peer, and moves the
        estimate by W samples per round trip, as while quiet. One within it, a queue that recovery
        builds on a slow link, keeps TCP's gains (with the division always, 4 Mbit/s links lost 3-4
        points of goodput at 5 % loss, 06504a8), as does a shorter one, a queue draining."""
        return self._srtt is not None and rtt > max(self._srtt, RTO_SRTT_MULTIPLE * self._question_rtt())

    def _emit(self, buffer: bytearray) -> None:
        self._out.append(bytes(buffer))
        self.stats.packets_sent += 1
        self.stats.bytes_sent += len(buffer)

    def _take(self) -> list[bytes]:
        out, self._out = self._out, []
        return out

    def _stall_message(self, idle: float) -> str:
        call = self._call
        assert call is not None
        return stall_message(
            idle, call.outstanding, call.uses, call.number, self.member, self.stats.retransmissions,
            self.stats.refused,
        )  # fmt: skip


def smooth(
    mean: float | None, deviation: float, sample: float, samples_per_rtt: int = 1
) -> tuple[float, float]:
    """RFC 6298's smoothing of one round-trip sample into a mean and a deviation (None: no sample yet),
    with its gains 1/8 and 1/4 divided by the samples a round trip brings (RFC 7323, Appendix G)."""
    if mean is None:
        return sample, sample / 2
    alpha, beta = 0.125 / samples_per_rtt, 0.25 / samples_per_rtt
    return (1 - alpha) * mean + alpha * sample, (1 - beta) * deviation + beta * abs(mean - sample)


def retransmission_timeout(srtt: float, rttvar: float) -> float:
    """RFC 6298's srtt + 4 x rttvar, never under RTO_SRTT_MULTIPLE x srtt (see Engine._sample_rtt), within
    [RTO_MIN, RTO_MAX]: the data timer, and the opening use's from its own estimate."""
    return min(max(srtt + 4 * rttvar, RTO_SRTT_MULTIPLE * srtt, RTO_MIN), RTO_MAX)


def question_flags(n: int) -> int:
    """The `flags` of the n-th QUERY about a use (n >= 1): 1 .. 255, never the 0 of a DATA, which a
    multicast RESULT keeps. The switch copies it into its answer, so an answer names the question it
    answers."""
    return (n - 1) % 255 + 1


# ---------------------------------------------------------------------- errors (both engines raise these)


def mismatch_error(
    number: int, member: Membership, descriptor: int, rank: int, offender: int, held: int
) -> AllreduceMismatch:
    """An ABORT for call `number`: rank `rank` called `offender`, the slot held `held` (0: not carried)."""
    if held:
        detail = (
            f"rank {rank} called {describe_word(offender)}, but the call's first contribution was "
            f"{describe_word(held)}"
        )
    else:
        detail = "the ranks' calls differ (the other ranks' errors say how)"
    return AllreduceMismatch(
        f"call #{number} of job {member.job_id} aborted by the switch: {detail}; this rank "
        f"(rank {member.rank}) called {describe_word(descriptor)}"
    )


def abandoned_error(number: int, job_id: int, held: int) -> AllreduceAborted:
    """A STALE for an outstanding use: the slot holds `held`, a later call's use."""
    return AllreduceAborted(
        f"call #{number} of job {job_id} was abandoned by the other ranks: the switch's "
        f"slot has moved on to call #{held >> USE_BITS} (an abort this rank did not hear of)"
    )


def stall_message(
    idle: float,
    outstanding: int,
    uses: int,
    number: int,
    member: Membership,
    retransmissions: int,
    refused: int,
) -> str:
    """Why a call made no progress, with what the socket saw (ICMP port unreachable or silence)."""
    message = (
        f"no progress for {idle:.1f} s: {outstanding} of {uses} packet(s) of call "
        f"#{number} still unanswered (job {member.job_id}, rank {member.rank}, "
        f"{retransmissions} retransmissions so far)"
    )
    if refused:
        return message + "; the switch's address refused datagrams (ICMP port unreachable): is it running?"
    return message + "; a peer may have died, or the job's entries are gone from the switch"


def stopped_message(number: int) -> str:
    """Why a communicator refuses calls after a timeout."""
    return (
        f"this communicator stopped after a timeout (call #{number}): its ranks are no longer "
        "known to be in step; join the job again"
    )
