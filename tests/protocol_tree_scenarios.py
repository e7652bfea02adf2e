"""Packet-level scenarios of aggregation trees (docs/protocol.md, *Aggregation trees*), for any switch.

The switch under test is a *child* for job A: its three workers (H1..H3,
ranks 0..2) contribute here, and the job's tree continues at a parent
behind port PARENT.port, where this switch is rank PARENT_RANK of job
PARENT_JOB with key PARENT_KEY (tables `upstream` and `from_parent`).
What a parent does needs nothing new: its children are members like
workers, so the single-switch scenarios cover it, and one scenario here
shows a child's ABORT arriving at a root.

Scenarios are `tests.protocol_scenarios.Scenario`s: run with `run_scenario`.
"""

from __future__ import annotations

from collections.abc import Sequence

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from contracts.protocol import RESULT_TTL, UDP_PORT, DropReason, MsgType, seq_of
from tests.protocol_scenarios import (
    A0,
    A1,
    A2,
    A_SUM,
    CE,
    DATA_LEN,
    DESC,
    ECT0,
    H6,
    IDX,
    JOB_A,
    NOTICE_LEN,
    SEQ,
    SWITCH_IP,
    SWITCH_MAC,
    Check,
    Host,
    Install,
    Job,
    Out,
    Scenario,
    Send,
    TableEntry,
    contribution,
    data_packet,
    ip_int,
    job_install,
    mac_int,
    p4reduce_payload,
    query,
    standard_setup,
    to_job,
    to_sender,
    vector,
)

PARENT = Host(port=8, mac="02:00:00:00:01:fe", ip="10.0.1.254", udp_port=UDP_PORT)
PARENT_JOB, PARENT_RANK, PARENT_KEY = 40, 2, 0x7777AAAA
J = JOB_A.job_id
MISSING = MsgType.MISSING
ROOT_SUM = vector(9, -9, 99, seed=21)  # what the parent multicasts: the whole tree's sum


def tree_install() -> Install:
    """What the controller writes on a child for job A: where its partial sums go, and whose
    packets from above speak of it."""
    return Install(
        entries=(
            TableEntry(
                "MyIngress.upstream",
                {"hdr.p4r.job_id": J},
                "MyIngress.set_upstream",
                {
                    "port": PARENT.port,
                    "parent_mac": mac_int(PARENT.mac),
                    "parent_ip": ip_int(PARENT.ip),
                    "own_ip": ip_int(SWITCH_IP),
                    "parent_job": PARENT_JOB,
                    "parent_rank": PARENT_RANK,
                    "parent_key": PARENT_KEY,
                },
            ),
            TableEntry(
                "MyIngress.from_parent",
                {"hdr.p4r.job_id": PARENT_JOB, "hdr.ipv4.src_addr": ip_int(PARENT.ip)},
                "MyIngress.set_child",
                {
                    "job_id": J,
                    "base": JOB_A.base,
                    "pool_size": JOB_A.pool_size,
                    "mcast_grp": JOB_A.mcast_grp,
                    "parent_port": PARENT.port,
                    "key": PARENT_KEY,
                    "epoch": JOB_A.epoch,
                },
            ),
        )
    )


def _frame(src: Host | None, dst: Host | None, payload: bytes, seq: int, tos: int = 0) -> bytes:
    """Between this switch (None) and the parent, both on UDP port 20562."""
    src_mac, src_ip = (SWITCH_MAC, SWITCH_IP) if src is None else (src.mac, src.ip)
    dst_mac, dst_ip = (SWITCH_MAC, SWITCH_IP) if dst is None else (dst.mac, dst.ip)
    ttl = RESULT_TTL if src is None else 30
    return bytes(
        Ether(src=src_mac, dst=dst_mac)
        / IP(src=src_ip, dst=dst_ip, id=seq & 0xFFFF, flags="DF", ttl=ttl, tos=tos)
        / UDP(sport=UDP_PORT, dport=UDP_PORT, chksum=0)
        / Raw(payload)
    )


def up(
    values: Sequence[int] | None, *, msg_type: int = MsgType.DATA, slot: int = 0, set_bit: int = 0,
    exp: int = 0, seq: int = SEQ, call: int = DESC, aux: int = 0, flags: int = 0, tos: int = 0,
) -> bytes:  # fmt: skip
    """What this switch sends its parent: a partial sum (DATA), or a QUERY or ABORT header."""
    payload = p4reduce_payload(
        msg_type=msg_type, rank=PARENT_RANK, job_id=PARENT_JOB, slot=slot, set_bit=set_bit, exp=exp,
        flags=flags, seq=seq, key=PARENT_KEY, call=call, aux=aux, values=values,
    )  # fmt: skip
    return _frame(None, PARENT, payload, seq, tos)


def down(
    values: Sequence[int] | None, *, msg_type: int = MsgType.RESULT, slot: int = 0, set_bit: int = 0,
    exp: int = 0, seq: int = SEQ, call: int = DESC, aux: int = 0, key: int = PARENT_KEY, rank: int = 5,
    tos: int = 0,
) -> bytes:  # fmt: skip
    """What the parent sends this switch (a RESULT replica, or a notice): the key it gave this switch."""
    payload = p4reduce_payload(
        msg_type=msg_type, rank=rank, job_id=PARENT_JOB, slot=slot, set_bit=set_bit, exp=exp, flags=0,
        seq=seq, key=key, call=call, aux=aux, values=values,
    )  # fmt: skip
    return _frame(PARENT, None, payload, seq, tos)


def _drop(reason: DropReason, packets: int, byte_count: int) -> dict[tuple[str, int], tuple[int, int]]:
    return {("MyIngress.ingress_drops", reason.value): (packets, byte_count)}


def _out(port: int, frame: bytes) -> tuple[Out, ...]:
    return (Out(port, frame),)


def tree_scenarios() -> tuple[Scenario, ...]:
    other_call = DESC + 1
    later = seq_of(4, 0)
    partial = (
        Send(1, contribution(JOB_A, 0, 0, A0, exp=140)),
        Send(2, contribution(JOB_A, 1, 0, A1, exp=130)),
        Send(3, contribution(JOB_A, 2, 0, A2, exp=135), _out(PARENT.port, up(A_SUM, exp=140))),
    )
    setup = Install(entries=tree_install().entries)
    return (
        Scenario(
            "tree_partial_sum_goes_up",
            "Below a parent, the use that completes here is not multicast: the packet holding the partial "
            "sum and the maximum exponent goes up, as this switch's DATA in the parent's instance of the "
            "job (its job id, rank, key and address), and the copy awaits the parent's result.",
            (
                setup,
                *partial,
                Check(
                    counters={
                        ("MyIngress.job_data_in", J): (3, 3 * DATA_LEN),
                        ("MyIngress.job_results_out", J): (0, 0),
                    },
                    registers={
                        ("MyIngress.awaiting", IDX(0, 0)): 1,
                        ("MyIngress.remaining", IDX(0, 0)): 0,
                        ("MyIngress.exp_max", IDX(0, 0)): 140,
                    },
                ),
            ),
        ),
        Scenario(
            "tree_result_comes_down_once",
            "The parent's RESULT is the tree's sum: the child keeps it for replays and multicasts it to its "
            "members with their own keys; a second copy of it is a duplicate, and a member's QUERY is then "
            "answered here with the tree's sum.",
            (
                setup,
                *partial,
                Send(PARENT.port, down(ROOT_SUM, exp=142), to_job(JOB_A, 5, 0, ROOT_SUM, exp=142)),
                Check(
                    counters={("MyIngress.job_results_out", J): (1, DATA_LEN)},
                    registers={("MyIngress.awaiting", IDX(0, 0)): 0, ("MyIngress.exp_max", IDX(0, 0)): 142},
                ),
                Send(PARENT.port, down(ROOT_SUM, exp=142), note="the same RESULT again"),
                Check(counters=_drop(DropReason.DUPLICATE, 1, DATA_LEN)),
                Send(
                    2,
                    query(JOB_A, 1, 0),
                    to_sender(JOB_A, 1, 0, ROOT_SUM, exp=142),
                    note="replayed here, from the stored tree sum",
                ),
            ),
        ),
        Scenario(
            "tree_query_while_awaiting_goes_up",
            "A member's QUERY about a use complete here whose result has not come down is asked after "
            "upstream, as a worker would ask (the parent replays or says MISSING); before the use is "
            "complete here the member is answered here, as on a single switch.",
            (
                setup,
                Send(1, contribution(JOB_A, 0, 0, A0, exp=140)),
                Send(
                    3, query(JOB_A, 2, 0), to_sender(JOB_A, 2, 0, None, msg_type=MsgType.MISSING, aux=0b001)
                ),
                Send(2, contribution(JOB_A, 1, 0, A1, exp=130)),
                Send(3, contribution(JOB_A, 2, 0, A2, exp=135), _out(PARENT.port, up(A_SUM, exp=140))),
                Send(1, query(JOB_A, 0, 0), _out(PARENT.port, up(None, msg_type=MsgType.QUERY))),
                Check(counters={("MyIngress.job_queries", J): (2, 2 * NOTICE_LEN)}),
            ),
        ),
        Scenario(
            "tree_missing_from_parent_resends_the_partial_sum",
            "The parent's MISSING (it lacks this switch's partial sum) makes the child send it again from "
            "the copy: sums, maximum exponent and descriptor. Once the result is in, a MISSING is a "
            "duplicate; about a use the copy does not hold, stale.",
            (
                setup,
                *partial,
                Send(
                    PARENT.port,
                    down(None, msg_type=MsgType.MISSING, aux=0b1),
                    _out(PARENT.port, up(A_SUM, exp=140)),
                ),
                Send(PARENT.port, down(ROOT_SUM, exp=140), to_job(JOB_A, 5, 0, ROOT_SUM, exp=140)),
                Send(PARENT.port, down(None, msg_type=MsgType.MISSING), note="after the result"),
                Send(PARENT.port, down(None, msg_type=MsgType.MISSING, seq=later), note="another use"),
                Check(
                    counters={
                        **_drop(DropReason.DUPLICATE, 1, NOTICE_LEN),
                        **_drop(DropReason.STALE, 1, NOTICE_LEN),
                    }
                ),
            ),
        ),
        Scenario(
            "tree_mismatch_aborts_through_the_parent",
            "Members that disagree on the call below a parent: the ABORT goes up (the parent aborts the "
            "whole tree), the call is aborted here, and the members hear it when the parent's ABORT comes "
            "down; a member's later packet of that call sends the ABORT up again (the first may be lost).",
            (
                setup,
                Send(1, contribution(JOB_A, 0, 0, A0)),
                Send(
                    2,
                    contribution(JOB_A, 1, 0, A1, call=other_call),
                    _out(PARENT.port, up(None, msg_type=MsgType.ABORT, call=other_call, aux=DESC)),
                ),
                Send(3, query(JOB_A, 2, 0), _out(PARENT.port, up(None, msg_type=MsgType.ABORT))),
                Send(
                    PARENT.port,
                    down(None, msg_type=MsgType.ABORT, call=other_call, aux=DESC),
                    to_job(JOB_A, 5, 0, None, msg_type=MsgType.ABORT, call=other_call, aux=DESC),
                ),
                Check(
                    counters={
                        **_drop(DropReason.CALL_MISMATCH, 1, DATA_LEN),
                        **_drop(DropReason.CALL_ABORTED, 1, NOTICE_LEN),
                        ("MyIngress.job_aborts", J): (3, DATA_LEN + 2 * NOTICE_LEN),
                    },
                    registers={("MyIngress.aborted", J): (JOB_A.epoch << 16) | (SEQ >> 16)},
                ),
            ),
        ),
        Scenario(
            "tree_stale_from_parent_is_an_abort",
            "A STALE from the parent about a use this switch still awaits means the parent's copy moved "
            "past it, which only an abort this switch missed explains: the call is aborted here and the "
            "members are told. About a use it no longer awaits, a STALE is a late answer to a late "
            "question (a duplicated QUERY): dropped.",
            (
                setup,
                Send(PARENT.port, down(None, msg_type=MsgType.STALE, aux=later), note="nothing awaited"),
                Check(
                    counters=_drop(DropReason.STALE, 1, NOTICE_LEN), registers={("MyIngress.aborted", J): 0}
                ),
                *partial,
                Send(
                    PARENT.port,
                    down(None, msg_type=MsgType.STALE, aux=later),
                    to_job(JOB_A, 5, 0, None, msg_type=MsgType.ABORT, aux=later),
                ),
                Check(registers={("MyIngress.aborted", J): (JOB_A.epoch << 16) | (SEQ >> 16)}),
            ),
        ),
        Scenario(
            "tree_only_the_parent_speaks_from_above",
            "From above, only the parent's address (from_parent), from its port, with the key it gave this "
            "switch, is heard; a RESULT for a use the copy does not hold is stale.",
            (
                setup,
                *partial,
                Send(PARENT.port, down(ROOT_SUM, key=0x1234), note="wrong key"),
                Send(1, down(ROOT_SUM), note="wrong port"),
                Send(PARENT.port, _forged_source(), note="no from_parent entry for this address"),
                Send(PARENT.port, down(ROOT_SUM, seq=later), note="a use the copy does not hold"),
                Check(
                    counters={
                        **_drop(DropReason.BAD_KEY, 1, DATA_LEN),
                        **_drop(DropReason.WRONG_SENDER, 1, DATA_LEN),
                        **_drop(DropReason.BAD_TYPE, 1, DATA_LEN),
                        **_drop(DropReason.STALE, 1, DATA_LEN),
                        ("MyIngress.job_results_out", J): (0, 0),
                    },
                    registers={("MyIngress.awaiting", IDX(0, 0)): 1},
                ),
            ),
        ),
        Scenario(
            "tree_root_hears_a_childs_abort",
            "At the root, a member's ABORT (a child switch whose members disagree) aborts the call and is "
            "multicast to every member, keeping the descriptors it carries.",
            (
                Send(
                    3,
                    query(JOB_A, 2, 0, msg_type=MsgType.ABORT, call=other_call, aux=DESC),
                    to_job(JOB_A, 2, 0, None, msg_type=MsgType.ABORT, call=other_call, aux=DESC),
                ),  # fmt: skip
                Send(1, contribution(JOB_A, 0, 0, A0), to_sender(JOB_A, 0, 0, None, msg_type=MsgType.ABORT)),
                Check(
                    counters=_drop(DropReason.CALL_ABORTED, 1, DATA_LEN),
                    registers={("MyIngress.aborted", J): (JOB_A.epoch << 16) | (SEQ >> 16)},
                ),
            ),
        ),
        Scenario(
            "tree_ce_below_goes_up_and_comes_down",
            "A CE-marked contribution below a parent marks the partial sum going up (and the copy sent up "
            "again on the parent's MISSING), so the parent's result reflects congestion anywhere in the "
            "tree; the child's own flag marks the result it multicasts, too.",
            (
                setup,
                Send(1, contribution(JOB_A, 0, 0, A0, tos=ECT0)),
                Send(2, contribution(JOB_A, 1, 0, A1, tos=CE)),
                Send(3, contribution(JOB_A, 2, 0, A2, tos=ECT0), _out(PARENT.port, up(A_SUM, tos=CE))),
                Send(
                    PARENT.port,
                    down(None, msg_type=MsgType.MISSING, aux=0b1, tos=ECT0),
                    _out(PARENT.port, up(A_SUM, tos=CE)),
                ),
                Send(PARENT.port, down(ROOT_SUM, tos=ECT0), to_job(JOB_A, 5, 0, ROOT_SUM, tos=CE)),
            ),
        ),
        Scenario(
            "tree_ce_from_above_reaches_every_member",
            "A parent's CE-marked RESULT (congestion elsewhere in the tree) goes to every member as it is, "
            "and the copy keeps the mark for later replays.",
            (
                setup,
                Send(1, contribution(JOB_A, 0, 0, A0, tos=ECT0)),
                Send(2, contribution(JOB_A, 1, 0, A1, tos=ECT0)),
                Send(3, contribution(JOB_A, 2, 0, A2, tos=ECT0), _out(PARENT.port, up(A_SUM, tos=ECT0))),
                Send(PARENT.port, down(ROOT_SUM, tos=CE), to_job(JOB_A, 5, 0, ROOT_SUM, tos=CE)),
                Check(registers={("MyIngress.congested", IDX(0, 0)): 1}),
                Send(2, query(JOB_A, 1, 0, tos=ECT0), to_sender(JOB_A, 1, 0, ROOT_SUM, tos=CE)),
            ),
        ),
        Scenario(
            "tree_lone_member_goes_straight_up",
            "A child with one member: its DATA completes the use here and goes up as it is.",
            (
                setup,
                Install(entries=_solo_entries()),
                Send(6, _solo_data(), _out(PARENT.port, up(A0, exp=133, slot=1))),
                Check(registers={("MyIngress.awaiting", IDX(1, 0)): 1}),
            ),
            standard_setup=False,
        ),
    )


def _forged_source() -> bytes:
    """A RESULT from an address that is not this switch's parent for the job."""
    impostor = Host(port=PARENT.port, mac=PARENT.mac, ip="10.0.1.253", udp_port=UDP_PORT)
    payload = p4reduce_payload(
        msg_type=MsgType.RESULT, rank=5, job_id=PARENT_JOB, slot=0, set_bit=0, exp=0, flags=0, seq=SEQ,
        key=PARENT_KEY, call=DESC, aux=0, values=ROOT_SUM,
    )  # fmt: skip
    return _frame(impostor, None, payload, SEQ)


def _solo_entries() -> tuple[TableEntry, ...]:
    """Job A again with H6 as its only member (rank 0): the standard setup's switch, one member."""
    solo = Job(J, base=JOB_A.base, pool_size=JOB_A.pool_size, mcast_grp=JOB_A.mcast_grp, workers=(H6,),
               epoch=JOB_A.epoch, keys=(0x60,))  # fmt: skip
    return (*standard_setup()[0].entries, *job_install(solo).entries)


def _solo_data() -> bytes:
    return data_packet(H6, J, 0, 1, A0, exp=133, key=0x60)
