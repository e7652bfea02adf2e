"""Shared pieces of the switch tests: a hand-made P4Info, its runtime state, clients.

The P4Info below exercises every match kind, action scope, counter unit and
controller header the server supports, independently of the P4 compiler, so
the P4Runtime conformance tests pin the server's behaviour on their own.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
from finsy.proto import p4i, p4r, p4r_grpc, p4t, rpc_status

from softswitch.dataplane.loop import Dataplane
from softswitch.p4runtime.arbitration import uint128
from softswitch.p4runtime.conformance import Conformance
from softswitch.p4runtime.server import DEFAULT_MAX_STREAMS, P4RuntimeService, PipelineLoader, serve
from softswitch.runtime import state as st
from tests.ports import free_tcp_port

DEVICE_ID = 1

# Ids carry P4Info's type prefix in their top byte, as p4c assigns them (finsy checks).
T_EXACT, T_LPM, T_TERNARY, T_CONST = 0x02000001, 0x02000002, 0x02000003, 0x02000004
A_SET_PORT, A_DROP, A_NOACTION, A_TABLE_ONLY = 0x01000001, 0x01000002, 0x01000003, 0x01000004
C_PKTS, C_BOTH = 0x12000001, 0x12000002
R32, R8 = 0x16000001, 0x16000002
DC_EXACT = 0x13000001
CPM_IN, CPM_OUT = 0x04000001, 0x04000002
CPU_PORT = 255

_KIND = {
    st.EXACT: p4i.MatchField.EXACT,
    st.LPM: p4i.MatchField.LPM,
    st.TERNARY: p4i.MatchField.TERNARY,
    st.RANGE: p4i.MatchField.RANGE,
    st.OPTIONAL: p4i.MatchField.OPTIONAL,
}


def _pre(pid: int, name: str) -> p4i.Preamble:
    return p4i.Preamble(id=pid, name=name, alias=name)


def _table(
    tid: int,
    name: str,
    fields: list[tuple[str, str, int]],
    actions: list[tuple[int, int]],
    size: int,
    **extra: object,
) -> p4i.Table:
    table = p4i.Table(preamble=_pre(tid, name), size=size, **extra)  # type: ignore[arg-type]
    for i, (fname, kind, width) in enumerate(fields, start=1):
        table.match_fields.append(p4i.MatchField(id=i, name=fname, bitwidth=width, match_type=_KIND[kind]))
    for aid, scope in actions:
        table.action_refs.append(p4i.ActionRef(id=aid, scope=scope))
    return table


def make_p4info() -> p4i.P4Info:
    both = p4i.ActionRef.TABLE_AND_DEFAULT
    info = p4i.P4Info(pkg_info=p4i.PkgInfo(name="switch_test", arch="v1model"))
    info.actions.extend(
        [
            p4i.Action(
                preamble=_pre(A_SET_PORT, "set_port"),
                params=[p4i.Action.Param(id=1, name="port", bitwidth=9)],
            ),
            p4i.Action(preamble=_pre(A_DROP, "drop")),
            p4i.Action(preamble=_pre(A_NOACTION, "NoAction")),
            p4i.Action(
                preamble=_pre(A_TABLE_ONLY, "mark"),
                params=[
                    p4i.Action.Param(id=1, name="a", bitwidth=8),
                    p4i.Action.Param(id=2, name="b", bitwidth=48),
                ],
            ),
        ]
    )
    info.tables.extend(
        [
            _table(
                T_EXACT,
                "t_exact",
                [("f16", st.EXACT, 16), ("f9", st.EXACT, 9)],
                [
                    (A_SET_PORT, both),
                    (A_DROP, both),
                    (A_NOACTION, p4i.ActionRef.DEFAULT_ONLY),
                    (A_TABLE_ONLY, p4i.ActionRef.TABLE_ONLY),
                ],
                4,
                direct_resource_ids=[DC_EXACT],
            ),
            _table(T_LPM, "t_lpm", [("dst", st.LPM, 32)], [(A_SET_PORT, both), (A_NOACTION, both)], 16),
            _table(
                T_TERNARY,
                "t_ternary",
                [("t8", st.TERNARY, 8), ("r16", st.RANGE, 16), ("o8", st.OPTIONAL, 8)],
                [(A_SET_PORT, both), (A_NOACTION, both)],
                16,
            ),
            _table(
                T_CONST,
                "t_const",
                [("k", st.EXACT, 8)],
                [(A_DROP, both)],
                4,
                is_const_table=True,
                const_default_action_id=A_DROP,
            ),
        ]
    )
    info.counters.extend(
        [
            p4i.Counter(
                preamble=_pre(C_PKTS, "c_pkts"), spec=p4i.CounterSpec(unit=p4i.CounterSpec.PACKETS), size=8
            ),
            p4i.Counter(
                preamble=_pre(C_BOTH, "c_both"), spec=p4i.CounterSpec(unit=p4i.CounterSpec.BOTH), size=4
            ),
        ]
    )
    info.direct_counters.append(
        p4i.DirectCounter(
            preamble=_pre(DC_EXACT, "t_exact_counter"),
            spec=p4i.CounterSpec(unit=p4i.CounterSpec.BOTH),
            direct_table_id=T_EXACT,
        )
    )
    for rid, name, width, size in ((R32, "r32", 32, 8), (R8, "r8", 8, 4)):
        spec = p4t.P4DataTypeSpec(
            bitstring=p4t.P4BitstringLikeTypeSpec(bit=p4t.P4BitTypeSpec(bitwidth=width))
        )
        info.registers.append(p4i.Register(preamble=_pre(rid, name), type_spec=spec, size=size))
    info.controller_packet_metadata.extend(
        [
            p4i.ControllerPacketMetadata(
                preamble=_pre(CPM_IN, "packet_in"),
                metadata=[
                    p4i.ControllerPacketMetadata.Metadata(id=1, name="ingress_port", bitwidth=9),
                    p4i.ControllerPacketMetadata.Metadata(id=2, name="_pad", bitwidth=7),
                ],
            ),
            p4i.ControllerPacketMetadata(
                preamble=_pre(CPM_OUT, "packet_out"),
                metadata=[
                    p4i.ControllerPacketMetadata.Metadata(id=1, name="egress_port", bitwidth=9),
                    p4i.ControllerPacketMetadata.Metadata(id=2, name="_pad", bitwidth=7),
                ],
            ),
        ]
    )
    return info


_UNITS = {p4i.CounterSpec.PACKETS: "packets", p4i.CounterSpec.BYTES: "bytes", p4i.CounterSpec.BOTH: "both"}


def state_from_p4info(info: p4i.P4Info) -> st.RuntimeState:
    """The runtime state a compiled program with this P4Info would have."""
    state = st.RuntimeState()
    direct = {dc.direct_table_id for dc in info.direct_counters}
    kinds = {v: k for k, v in _KIND.items()}
    for t in info.tables:
        keys = [st.KeyField(m.name, kinds[m.match_type], m.bitwidth) for m in t.match_fields]
        default = st.ActionCall(t.const_default_action_id or A_NOACTION)
        table = st.Table(
            t.preamble.id,
            t.preamble.name,
            keys,
            t.size,
            default,
            default_is_const=bool(t.const_default_action_id),
            has_direct_counter=t.preamble.id in direct,
        )
        state.tables[t.preamble.id] = table
    for r in info.registers:
        state.registers[r.preamble.id] = st.Register(
            r.preamble.id, r.preamble.name, r.type_spec.bitstring.bit.bitwidth, r.size
        )
    for c in info.counters:
        state.counters[c.preamble.id] = st.Counter(
            c.preamble.id, c.preamble.name, _UNITS[c.spec.unit], c.size
        )
    return state


class ReflectorPipeline:
    """A test pipeline around the real state: the P4 program a controller test needs.

    A frame from the CPU port leaves on the port named by its packet_out
    header (9 bits + 7 pad); a frame from any other port goes to the CPU
    with a packet_in header carrying its ingress port. Every frame is
    counted in c_pkts[0]; `table lookup` is done on t_exact with the first
    two bytes, so tests can see entries take effect.
    """

    def __init__(self, info: p4i.P4Info, device_config: bytes) -> None:
        if device_config != b"reflector":
            raise ValueError("device config must be b'reflector'")
        self.state = state_from_p4info(info)

    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        self.state.counters[C_PKTS].count(0, len(frame))
        if ingress_port == CPU_PORT:
            return [(int.from_bytes(frame[:2], "big") >> 7, frame[2:])]
        hit = self.state.tables[T_EXACT].lookup((int.from_bytes(frame[:2], "big"), ingress_port))
        if hit is not None:
            hit.packets += 1
            hit.bytes += len(frame)
            if hit.action.action_id == A_SET_PORT:
                return [(hit.action.args[0], frame)]
        return [(CPU_PORT, (ingress_port << 7).to_bytes(2, "big") + frame)]


def reflector_config(cookie: int | None = None) -> p4r.ForwardingPipelineConfig:
    config = p4r.ForwardingPipelineConfig(p4info=make_p4info(), p4_device_config=b"reflector")
    if cookie is not None:
        config.cookie.cookie = cookie
    return config


@dataclass
class Server:
    """A P4Runtime service on a real gRPC server, with a channel to it."""

    service: P4RuntimeService
    dataplane: Dataplane
    server: grpc.Server
    address: str
    channel: grpc.Channel
    stub: p4r_grpc.P4RuntimeStub


def start_server(
    dataplane: Dataplane | None = None,
    device_id: int = DEVICE_ID,
    loader: PipelineLoader = ReflectorPipeline,
    conformance: Conformance = Conformance.SPEC,
    max_streams: int = DEFAULT_MAX_STREAMS,
    details_budget: int | None = None,
) -> Server:
    dataplane = dataplane or Dataplane([], cpu_port=CPU_PORT)
    service = P4RuntimeService(device_id, dataplane, loader, conformance, max_streams, details_budget)
    address = f"127.0.0.1:{free_tcp_port()}"
    server = serve(service, address)
    channel = grpc.insecure_channel(address)
    return Server(service, dataplane, server, address, channel, p4r_grpc.P4RuntimeStub(channel))


def stop_server(s: Server) -> None:
    s.channel.close()
    s.server.stop(grace=None).wait()
    s.dataplane.close()


class StreamClient:
    """A StreamChannel driven from a test: send() requests, recv() responses."""

    def __init__(self, stub: p4r_grpc.P4RuntimeStub) -> None:
        self._requests: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self.responses: queue.Queue[p4r.StreamMessageResponse | grpc.RpcError] = queue.Queue()
        self._call = stub.StreamChannel(self._iterate())
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _iterate(self) -> Iterator[p4r.StreamMessageRequest]:
        while True:
            item = self._requests.get()
            if item is None:
                return
            yield item

    def _pump(self) -> None:
        try:
            for response in self._call:
                self.responses.put(response)
        except grpc.RpcError as error:
            self.responses.put(error)

    def send(self, request: p4r.StreamMessageRequest) -> None:
        self._requests.put(request)

    def arbitrate(self, election: int | None, device_id: int = DEVICE_ID, role: str = "") -> None:
        update = p4r.MasterArbitrationUpdate(device_id=device_id)
        if election is not None:
            update.election_id.CopyFrom(uint128(election))
        if role:
            update.role.name = role
        self.send(p4r.StreamMessageRequest(arbitration=update))

    def recv(self, timeout: float = 5.0) -> p4r.StreamMessageResponse:
        item = self.responses.get(timeout=timeout)
        if isinstance(item, grpc.RpcError):
            raise item
        return item

    def recv_error(self, timeout: float = 5.0) -> grpc.RpcError:
        """The status that ended the stream (skipping messages before it)."""
        while True:
            item = self.responses.get(timeout=timeout)
            if isinstance(item, grpc.RpcError):
                return item

    def close(self) -> None:
        self._requests.put(None)
        self._call.cancel()
        self._thread.join(timeout=5)


def become_primary(stub: p4r_grpc.P4RuntimeStub, election: int = 10) -> StreamClient:
    client = StreamClient(stub)
    client.arbitrate(election)
    reply = client.recv()
    assert reply.arbitration.status.code == 0, reply
    return client


def batch_details(error: grpc.RpcError) -> list[p4r.Error]:
    """The p4.v1.Error list of a failed batch Write (from grpc-status-details-bin)."""
    for key, value in error.trailing_metadata() or ():  # type: ignore[attr-defined]
        if key == "grpc-status-details-bin":
            status = rpc_status.Status.FromString(value)
            out = []
            for detail in status.details:
                item = p4r.Error()
                assert detail.Unpack(item)
                out.append(item)
            return out
    raise AssertionError("no grpc-status-details-bin in the error")
