"""finsy, a P4Runtime client nobody here wrote, drives the switch end to end.

finsy arbitrates, checks the pipeline cookie, pushes P4Info + device config,
writes and reads entities with its own encoders, and talks gNMI (which this
switch answers with UNIMPLEMENTED, as finsy tolerates).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import finsy as fy
from google.protobuf import text_format
from switch_support import DEVICE_ID, Server, make_p4info


async def _session(address: str, p4info: Path, blob: bytes) -> dict[str, object]:
    options = fy.SwitchOptions(p4info=p4info, p4blob=blob, device_id=DEVICE_ID)
    async with fy.Switch("sw", address, options) as switch:
        assert switch.is_primary
        await switch.write(
            [
                +fy.P4TableEntry(
                    "t_exact", match=fy.P4TableMatch(f16=7, f9=1), action=fy.P4TableAction("set_port", port=3)
                ),
                +fy.P4MulticastGroupEntry(5, replicas=[1, (2, 1)]),
            ]
        )
        entries = [e async for e in switch.read(fy.P4TableEntry("t_exact"))]
        groups = [g async for g in switch.read(fy.P4MulticastGroupEntry())]
        await switch.write([fy.P4RegisterEntry("r32", index=2, data=99)])
        registers = [r async for r in switch.read(fy.P4RegisterEntry("r32", index=2))]
        await switch.delete_all()
        left = [e async for e in switch.read(fy.P4TableEntry())]
        return {
            "entries": entries,
            "groups": groups,
            "registers": registers,
            "left": left,
            "version": str(switch.p4runtime_version),
        }


def test_finsy_pushes_the_pipeline_then_writes_and_reads(server: Server, tmp_path: Path) -> None:
    p4info = tmp_path / "test.p4info.txtpb"
    p4info.write_text(text_format.MessageToString(make_p4info()))
    result = asyncio.run(_session(server.address, p4info, b"reflector"))
    [entry] = result["entries"]  # type: ignore[misc]
    assert entry.match["f16"] == 7 and entry.match["f9"] == 1
    assert entry.action.name == "set_port" and entry.action.args == {"port": 3}
    [group] = result["groups"]  # type: ignore[misc]
    assert group.multicast_group_id == 5
    assert sorted((r, 0) if isinstance(r, int) else (r.port, r.instance) for r in group.replicas) == [
        (1, 0),
        (2, 1),
    ]
    [register] = result["registers"]  # type: ignore[misc]
    assert register.data == 99
    assert result["left"] == []
    assert result["version"].startswith("1.3.0")
    # finsy's pipeline is what the switch now runs.
    assert server.service.current is not None
    assert server.service.current.config.p4_device_config == b"reflector"


async def _program_session(address: str, p4info: Path, program: Path) -> dict[str, object]:
    options = fy.SwitchOptions(p4info=p4info, p4blob=program, device_id=DEVICE_ID)
    async with fy.Switch("sw", address, options) as switch:
        job = fy.P4TableEntry(
            "job_table",
            match=fy.P4TableMatch({"hdr.p4r.job_id": 3, "hdr.p4r.rank": 1}),
            action=fy.P4TableAction(
                "set_job", base=8, pool_size=4, num_workers=2, worker_bit=2, mcast_grp=9,
                sender_port=1, sender_ip="127.0.0.12", sender_udp_port=40000, key=0xC0FFEE, epoch=0x5EED,
            ),
        )  # fmt: skip
        await switch.write([+job, +fy.P4MulticastGroupEntry(9, replicas=[(1, 0), (1, 1)])])
        await switch.write([fy.P4RegisterEntry("owner", index=8, data=3)])
        return {
            "entries": [e async for e in switch.read(fy.P4TableEntry("job_table"))],
            "groups": [g async for g in switch.read(fy.P4MulticastGroupEntry(9))],
            "owner": [r async for r in switch.read(fy.P4RegisterEntry("owner", index=8))],
        }


def test_finsy_drives_the_real_program(real_server: Server, compiled: tuple[Path, Path]) -> None:
    program, p4info = compiled
    result = asyncio.run(_program_session(real_server.address, p4info, program))
    [entry] = result["entries"]  # type: ignore[misc]
    assert dict(entry.match) == {"job_id": 3, "rank": 1}  # finsy names fields by their last component
    assert entry.action.args["sender_ip"] == 0x7F00000C and entry.action.args["base"] == 8
    [group] = result["groups"]  # type: ignore[misc]
    assert sorted((r, 0) if isinstance(r, int) else (r.port, r.instance) for r in group.replicas) == [
        (1, 0),
        (1, 1),
    ]
    [owner] = result["owner"]  # type: ignore[misc]
    assert owner.data == 3
