"""The controller reads the Tofino compiler's P4Info form and resolves its own names in it (issue 32).

`data/tofino_form.p4info.txtpb` is written by hand in the form bf-p4c writes by default: names with
the Pipeline instance's prefix, counters and registers as barefoot externs. A Tofino switch is driven
by the same table modules only if the names they use (`MyIngress.job_table`, `MyIngress.job_data_in`)
encode to the ids of that P4Info, and the switch is given the P4Info unchanged.
"""

from __future__ import annotations

from pathlib import Path

import finsy as fy
import pytest
from finsy.proto import p4i

from controller.errors import SwitchError
from controller.p4info import barefoot_message, controller_view, parse_p4info, pipeline_prefix, read_p4info
from controller.p4switch import SwitchSession
from controller.program import program_facts
from controller.tables.job_table import JobTable

TOFINO_FORM = Path(__file__).parent / "data" / "tofino_form.p4info.txtpb"
JOB_DATA_IN_ID = 0x83000001  # the counter extern instance's id in that file
OWNER_ID = 0x8B000001


@pytest.fixture
def info() -> p4i.P4Info:
    return read_p4info(TOFINO_FORM)


def test_the_barefoot_details_are_read_from_the_text(info: p4i.P4Info) -> None:
    counters = {e.extern_type_name: e for e in info.externs}["Counter"]
    details = barefoot_message("Counter")
    assert counters.instances[0].info.Unpack(details)
    assert details.size == 1024  # type: ignore[attr-defined]
    assert details.spec.unit == 3  # type: ignore[attr-defined]  # PACKETS_AND_BYTES
    snapshot = barefoot_message("Snapshot")
    assert {e.extern_type_name: e for e in info.externs}["Snapshot"].instances[0].info.Unpack(snapshot)
    assert [(f.name, f.bitwidth) for f in snapshot.fields] == [("hdr.p4r.job_id", 16)]  # type: ignore[attr-defined]


def test_a_binary_p4info_reads_the_same(info: p4i.P4Info, tmp_path: Path) -> None:
    binary = tmp_path / "p4reduce.p4info.bin"
    binary.write_bytes(info.SerializeToString())
    assert read_p4info(binary) == info


def test_the_view_drops_the_pipeline_prefix_and_makes_the_externs_counters_and_registers(
    info: p4i.P4Info,
) -> None:
    assert pipeline_prefix(info) == "pipe."
    view = controller_view(info)
    assert [t.preamble.name for t in view.tables] == ["MyIngress.job_table"]
    counters = [
        (c.preamble.name, c.preamble.id, c.size, p4i.CounterSpec.Unit.Name(c.spec.unit))
        for c in view.counters
    ]
    assert counters == [
        ("MyIngress.job_data_in", JOB_DATA_IN_ID, 1024, "BOTH"),
        ("MyEgress.egress_drops", JOB_DATA_IN_ID + 1, 16, "PACKETS"),
    ]
    registers = [
        (r.preamble.name, r.preamble.id, r.size, r.type_spec.bitstring.bit.bitwidth) for r in view.registers
    ]
    assert registers == [("MyIngress.owner", OWNER_ID, 2048, 32)]
    assert {e.extern_type_name: [i.preamble.name for i in e.instances] for e in view.externs} == {
        "PortMetadata": ["IngressParser.$PORT_METADATA"],
        "Snapshot": ["MyEgress.MyEgress"],
    }
    assert info.tables[0].preamble.name == "pipe.MyIngress.job_table"  # the file's P4Info is left as it is


def test_the_controllers_names_encode_to_the_compilers_ids(info: p4i.P4Info) -> None:
    pipeline = fy.P4Schema(info)
    names = SwitchSession._names(pipeline)
    entry = (
        fy.P4TableEntry(
            JobTable.TABLE,
            match=fy.P4TableMatch({"hdr.p4r.job_id": 7, "hdr.p4r.rank": 1}),
            action=fy.P4TableAction("MyIngress.set_job", base=16, epoch=3),
        )
        .encode(names)
        .table_entry
    )
    assert entry.table_id == info.tables[0].preamble.id
    assert entry.action.action.action_id == info.actions[0].preamble.id
    assert [p.value for p in entry.action.action.params] == [b"\x10", b"\x03"]
    counter = fy.P4CounterEntry("MyIngress.job_data_in", index=7).encode(names).counter_entry
    assert counter.counter_id == JOB_DATA_IN_ID
    assert program_facts(names, "tofino").values_per_packet == 64
    assert program_facts(names, "tofino").slot_count == 2048
    # the switch gets the P4Info as compiled, and the cookie is of those bytes
    assert pipeline.get_pipeline_config().p4info == info


def test_the_standard_form_is_its_own_view() -> None:
    standard = parse_p4info('tables { preamble { id: 33554433 name: "MyIngress.job_table" } }')
    assert pipeline_prefix(standard) == ""
    assert controller_view(standard) is standard
    pipeline = fy.P4Schema(standard)
    assert SwitchSession._names(pipeline) is pipeline


def test_an_extern_type_it_cannot_spell_out_asks_for_the_binary_form(tmp_path: Path) -> None:
    meter = tmp_path / "meter.p4info.txtpb"
    meter.write_text(
        'externs { extern_type_id: 133 extern_type_name: "Meter" instances { preamble { id: 2231369729 '
        'name: "pipe.MyIngress.m" } info { [type.googleapis.com/barefoot.Meter] { size: 4 } } } }'
    )
    with pytest.raises(SwitchError, match=r"barefoot\.Meter.*--p4runtime-files NAME\.p4info\.bin"):
        read_p4info(meter)


def test_two_pipelines_are_refused() -> None:
    two = parse_p4info(
        'tables { preamble { id: 33554433 name: "pipe0.MyIngress.job_table" } }'
        'tables { preamble { id: 33554434 name: "pipe1.MyIngress.job_table" } }'
    )
    with pytest.raises(SwitchError, match="several pipelines"):
        controller_view(two)
