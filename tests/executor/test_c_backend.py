"""The C backend itself: refusals by name, the build cache, the fallback to Python, native state.

Agreement with the Python backend, packet by packet, is test_differential's job; here are the
parts only the C backend has.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from softswitch.backends.c import build
from softswitch.backends.c.pipeline import NativeArray
from softswitch.backends.c.pipeline import Pipeline as NativePipeline
from softswitch.backends.common import UnsupportedError
from softswitch.backends.loader import new_pipeline
from softswitch.backends.python.executor import Pipeline as PythonPipeline
from softswitch.p4c import compile_program
from softswitch.runtime import state as st
from tests.conftest import NO_COMPILER

pytestmark = pytest.mark.skipif(NO_COMPILER, reason="no C compiler (cc): the C backend cannot run")
SKELETON = (Path(__file__).resolve().parents[1] / "frontend/skeleton.p4.in").read_text()


def skeleton(tmp_path: Path, body: str = "", header: str = "bit<8> a; bit<16> b;") -> Path:
    path = tmp_path / "prog.p4"
    path.write_text(SKELETON.replace("BODY", body).replace("bit<8> a; bit<16> b;", header))
    return path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("P4REDUCE_CACHE_DIR", str(directory))
    return directory


def test_a_field_wider_than_64_bits_is_refused_by_name(tmp_path: Path) -> None:
    program, info = compile_program(skeleton(tmp_path, header="bit<8> a; bit<16> b; bit<128> addr;"))
    with pytest.raises(UnsupportedError, match=r"field h_t\.addr has type bit<128>.*--backend python"):
        new_pipeline(program, info, "c")


def test_auto_runs_a_refused_program_on_python_and_says_why_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    program, info = compile_program(skeleton(tmp_path, header="bit<8> a; bit<16> b; bit<128> addr;"))
    with caplog.at_level(logging.INFO, logger="softswitch.backends"):
        pipeline = new_pipeline(program, info, "auto")
    assert isinstance(pipeline, PythonPipeline)
    [record] = caplog.records
    assert "h_t.addr" in record.getMessage() and "\n" not in record.getMessage()
    assert pipeline.process(1, bytes(19))  # and it runs


def test_without_a_compiler_c_is_refused_and_auto_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: Path
) -> None:
    program, info = compile_program(skeleton(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UnsupportedError, match="no C compiler found"):
        new_pipeline(program, info, "c")
    assert isinstance(new_pipeline(program, info, "auto"), PythonPipeline)


def test_the_shared_object_is_built_once_per_program_and_kept_beside_its_source(
    tmp_path: Path, cache: Path
) -> None:
    program, info = compile_program(skeleton(tmp_path, body="t.apply();"))
    first = NativePipeline(program, info)
    built = sorted(cache.glob("*.so"))
    assert built == [first.library] and first.library.with_suffix(".c").read_text() == first.source
    mtime = first.library.stat().st_mtime_ns
    second = NativePipeline(program, info)
    assert second.library == first.library and first.library.stat().st_mtime_ns == mtime
    other, other_info = compile_program(skeleton(tmp_path, body="hdr.h.a = 1;"))
    assert NativePipeline(other, other_info).library != first.library
    assert len(list(cache.glob("*.so"))) == 2 and not list(cache.glob(".build-*"))


def test_generated_code_has_a_named_function_per_block_with_source_positions(tmp_path: Path) -> None:
    program, info = compile_program(skeleton(tmp_path, body="t.apply();"))
    source = NativePipeline(program, info).source
    for name in ("parser_P", "control_I", "table_I_t", "action_I_a", "deparser_D"):
        assert f" {name}(ctx_t *ctx" in source
    assert "/* table I.t (" in source and "prog.p4:" in source


def test_p4runtime_writes_reach_the_packets_and_reads_come_back_from_native_memory(tmp_path: Path) -> None:
    program, info = compile_program(skeleton(tmp_path, body="t.apply(); sm.egress_spec = 2;"))
    pipeline = NativePipeline(program, info)
    table = next(iter(pipeline.state.tables.values()))
    action = next(a.preamble.id for a in info.actions if a.preamble.name == "I.a")
    table.insert(st.Entry((7,), 0, st.ActionCall(action, (0x42,))))
    assert pipeline.process(1, bytes([7, 0, 0])) == [(2, bytes([0x42, 0, 0]))]
    table.modify((7,), 0, st.ActionCall(action, (0x43,)), b"")
    assert pipeline.process(1, bytes([7, 0, 0])) == [(2, bytes([0x43, 0, 0]))]
    table.delete((7,), 0)
    assert pipeline.process(1, bytes([7, 0, 0])) == [(2, bytes([7, 0, 0]))]


def test_registers_and_counters_are_views_of_the_packets_memory(tmp_path: Path) -> None:
    body = "r.read(hdr.h.a, 1); r.write(0, hdr.h.b[7:0]); c.count(1); sm.egress_spec = 1;"
    path = skeleton(tmp_path, body=body)
    path.write_text(
        path.read_text().replace(
            "action a(bit<8> x)",
            "register<bit<8>>(4) r; counter(2, CounterType.packets_and_bytes) c;\n    action a(bit<8> x)",
        )
    )
    program, info = compile_program(path)
    pipeline = NativePipeline(program, info)
    [register] = pipeline.state.registers.values()
    [counter] = pipeline.state.counters.values()
    assert isinstance(register.values, NativeArray)
    register.values[1] = 0x99
    assert pipeline.process(1, bytes([7, 0, 0x55])) == [(1, bytes([0x99, 0, 0x55]))]
    assert list(register.values) == [0x55, 0x99, 0, 0]
    assert (counter.packets[1], counter.bytes[1]) == (1, 3)
    register.values[1:] = [1, 2, 0xFF]  # a slice is one copy into the packets' memory
    assert list(register.values) == [0x55, 1, 2, 0xFF]
    with pytest.raises(ValueError, match="cannot assign 2 values to 3 cells"):
        register.values[1:] = [1, 2]
    with pytest.raises(ValueError, match="does not fit"):
        register.values[:] = [0, 0, 0, 0x100]
    assert list(register.values) == [0x55, 1, 2, 0xFF]
    register.reset()
    assert list(register.values) == [0, 0, 0, 0]


def test_a_frame_shorter_than_its_header_is_a_parser_error_not_a_read_past_the_end(tmp_path: Path) -> None:
    body = "if (sm.parser_error == error.PacketTooShort) { sm.egress_spec = 3; } else { sm.egress_spec = 1; }"
    program, info = compile_program(skeleton(tmp_path, body=body))
    pipeline = NativePipeline(program, info)
    for length in range(3):
        assert pipeline.process(1, bytes(length)) == [(3, bytes(length))]
    assert pipeline.process(1, bytes(3)) == [(1, bytes(3))]


def test_the_build_fails_with_the_compilers_message(tmp_path: Path, cache: Path) -> None:
    with pytest.raises(build.BuildError, match="refused the generated code"):
        build.build("this is not C;\n")
