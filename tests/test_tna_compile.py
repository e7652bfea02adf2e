"""The TNA program through the real Tofino compiler, for Tofino 1 and Tofino 2 (issues 21 and 32).

A compiler counts as there for a target when it compiles a tiny TNA program for it into a chip binary
(`pipe/<target>.bin`): any p4c accepts `--target tofino --version`, p4c without the Tofino back end fails
only when it picks the back end (issue 32), and the back end's own binary, `p4c-barefoot`, which its
install puts on PATH beside the driver, compiles but never runs the assembler (issue 39). So only
drivers are candidates, and the probe asks for the binary. Where none is, these skip with a reason.
Where one is, they run the commands docs/p4src.md gives, require a clean exit, read the P4Info with the
controller's reader (the Tofino compiler's own form: `pipe.` names, barefoot externs) and check that its
view offers what the controller uses, with the v1model program's names, keys, parameters and widths.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

import finsy as fy
import pytest
from finsy.proto import p4i

from contracts.protocol import DEFAULT_SLOT_COUNT, DEFAULT_VALUES_PER_PACKET
from controller.p4info import controller_view, read_p4info
from controller.program import program_facts
from controller.tables.counters import DROP_COUNTERS, JOB_COUNTERS
from controller.tables.p4names import INGRESS
from softswitch.frontend import compile_file
from softswitch.p4info import build_p4info
from tests.p4src_text import P4SRC, TNA, V1MODEL

TARGETS = (("tofino", "tna"), ("tofino2", "t2na"))
# Drivers only: they run the back end and then the assembler (bfas); p4c-barefoot is the back end alone.
CANDIDATES = ("bf-p4c", "p4c")

# The smallest program of both architectures: a parser, a control and a deparser on each side.
TINY_TNA = """
#include <core.p4>
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#else
#include <tna.p4>
#endif
header eth_h { bit<48> dst; bit<48> src; bit<16> type; }
struct hdr_t { eth_h eth; }
struct md_t { }
parser IP(packet_in pkt, out hdr_t hdr, out md_t md, out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        pkt.extract(ig_intr_md); pkt.advance(PORT_METADATA_SIZE); pkt.extract(hdr.eth); transition accept;
    }
}
control I(inout hdr_t hdr, inout md_t md, in ingress_intrinsic_metadata_t ig_intr_md,
          in ingress_intrinsic_metadata_from_parser_t prsr,
          inout ingress_intrinsic_metadata_for_deparser_t dprsr,
          inout ingress_intrinsic_metadata_for_tm_t tm) {
    apply { tm.ucast_egress_port = ig_intr_md.ingress_port; }
}
control ID(packet_out pkt, inout hdr_t hdr, in md_t md, in ingress_intrinsic_metadata_for_deparser_t dprsr) {
    apply { pkt.emit(hdr); }
}
parser EP(packet_in pkt, out hdr_t hdr, out md_t md, out egress_intrinsic_metadata_t eg_intr_md) {
    state start { pkt.extract(eg_intr_md); pkt.extract(hdr.eth); transition accept; }
}
control E(inout hdr_t hdr, inout md_t md, in egress_intrinsic_metadata_t eg_intr_md,
          in egress_intrinsic_metadata_from_parser_t prsr,
          inout egress_intrinsic_metadata_for_deparser_t dprsr,
          inout egress_intrinsic_metadata_for_output_port_t oport) {
    apply { }
}
control ED(packet_out pkt, inout hdr_t hdr, in md_t md, in egress_intrinsic_metadata_for_deparser_t dprsr) {
    apply { pkt.emit(hdr); }
}
Pipeline(IP(), I(), ID(), EP(), E(), ED()) pipe;
Switch(pipe) main;
"""


@functools.cache
def tofino_compiler(target: str, arch: str) -> str | None:
    """The first driver on PATH that compiles TINY_TNA for `target` into its chip binary, if any."""
    for name in CANDIDATES:
        path = shutil.which(name)
        if path is None:
            continue
        with tempfile.TemporaryDirectory() as scratch:
            tiny = Path(scratch) / "tiny.p4"
            tiny.write_text(TINY_TNA)
            probe = subprocess.run(
                [path, "--target", target, "--arch", arch, "-o", str(Path(scratch) / "out"), str(tiny)],
                capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            assembled = (Path(scratch) / "out" / "pipe" / f"{target}.bin").is_file()
        if probe.returncode == 0 and assembled:
            return path
    return None


def what_the_controller_sees(info: p4i.P4Info) -> dict[str, object]:
    """Tables (keys, actions, annotations), the actions' parameters, and counters, by P4Runtime name."""
    actions = {a.preamble.id: a for a in info.actions}
    tables = {}
    params = {}
    for table in info.tables:
        listed = sorted(actions[ref.id].preamble.name for ref in table.action_refs)
        keys = tuple((m.name, m.bitwidth, m.match_type) for m in table.match_fields)
        annotations = tuple(a for a in table.preamble.annotations if a.startswith("@p4reduce"))
        tables[table.preamble.name] = (keys, listed, annotations)
        for ref in table.action_refs:
            action = actions[ref.id]
            params[action.preamble.name] = tuple((p.name, p.bitwidth) for p in action.params)
    counters = {c.preamble.name: (c.size, c.spec.unit) for c in info.counters}
    return {"tables": tables, "actions": params, "counters": counters}


@functools.cache
def v1model_view() -> dict[str, object]:
    """The v1model program's P4Info (p4reduce-p4c's equals p4c's, issue 32), tree role included."""
    return what_the_controller_sees(build_p4info(compile_file(V1MODEL, include_dirs=[P4SRC])))


@pytest.mark.parametrize(("target", "arch"), TARGETS)
def test_the_tna_program_compiles_and_offers_the_controller_its_names(
    target: str, arch: str, tmp_path: Path
) -> None:
    compiler = tofino_compiler(target, arch)
    if compiler is None:
        pytest.skip(
            f"no compiler compiles a TNA program for --target {target} --arch {arch} here "
            f"({', '.join(CANDIDATES)} on PATH, a driver with the Tofino back end and its assembler)"
        )
    text, binary = tmp_path / "p4reduce.p4info.txtpb", tmp_path / "p4reduce.p4info.bin"
    result = subprocess.run(
        [compiler, "--target", target, "--arch", arch, "-I", str(P4SRC), "-o", str(tmp_path / "out"),
         "--p4runtime-files", f"{text},{binary}", str(TNA)],
        capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    # the assembler ran: the placement fits the chip's stages (bf-p4c skips it, or it refuses, otherwise)
    assert (tmp_path / "out" / "pipe" / f"{target}.bin").stat().st_size > 0, result.stdout[-4000:]

    info = read_p4info(text)
    # the reader spells the barefoot externs out as the compiler encodes them
    assert info == p4i.P4Info.FromString(binary.read_bytes())
    view = controller_view(info)
    assert what_the_controller_sees(view) == v1model_view()

    schema = fy.P4Schema(view)
    facts = program_facts(schema, target)
    assert (facts.values_per_packet, facts.slot_count) == (DEFAULT_VALUES_PER_PACKET, DEFAULT_SLOT_COUNT)
    for name in JOB_COUNTERS:
        assert schema.counters[f"{INGRESS}.{name}"]
    for name, control in DROP_COUNTERS.items():
        assert schema.counters[f"{control}.{name}"]
