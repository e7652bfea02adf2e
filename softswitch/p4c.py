"""`p4reduce-p4c`: compile a v1model P4_16 program for the embedded switch, with p4c's flags.

    p4reduce-p4c PROGRAM.p4 -o OUT.json --p4runtime-files OUT.p4info.txtpb [-I DIR] [-D NAME[=VALUE]]

Exit codes follow p4c: 0 compiled, 1 errors in the program, 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from finsy.proto import p4i
from google.protobuf import json_format

from softswitch import ir
from softswitch import program as program_file
from softswitch.backends.common import UnsupportedError
from softswitch.backends.python.executor import Pipeline
from softswitch.frontend import compile_file
from softswitch.frontend.diagnostics import CompileError, Diagnostic
from softswitch.p4info import build_p4info, to_text
from softswitch.targets import DEFAULT, TARGETS

VERSION = "p4reduce-p4c 0.1.0 (P4_16, v1model subset)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="p4reduce-p4c",
        description="Compile a P4_16 v1model program for p4reduce-switch: writes the compiled program "
        "(JSON device config) and its P4Info, which matches what p4c writes for the same program.",
    )
    parser.add_argument("source", metavar="PROGRAM.p4", help="the P4_16 source file")
    parser.add_argument("-o", "--output", metavar="OUT.json", help="compiled program (default: PROGRAM.json)")
    parser.add_argument(
        "--p4runtime-files",
        metavar="FILE[,FILE]",
        help="P4Info output(s); the format follows the extension: .txt/.txtpb (text), .bin (binary), .json",
    )
    parser.add_argument(
        "-I", dest="includes", action="append", default=[], metavar="DIR", help="include path"
    )
    parser.add_argument(
        "-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]", help="preprocessor define"
    )
    parser.add_argument(
        "--target",
        default=DEFAULT,
        choices=sorted(TARGETS),
        help="; ".join(f"{t.name}: {t.summary}" for t in TARGETS.values())
        + ". Each predefines its macros ("
        + ", ".join(f"{t.name}: {' '.join(sorted(t.defines))}" for t in TARGETS.values())
        + ")",
    )
    parser.add_argument("--arch", default="v1model", help="accepted for p4c compatibility: v1model only")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    parser.add_argument("--version", action="version", version=VERSION)
    return parser


def _write_p4info(info: p4i.P4Info, path: Path) -> None:
    suffix = path.suffix.lower()
    if suffix in (".txt", ".txtpb", ".pbtxt"):
        path.write_text(to_text(info))
    elif suffix == ".bin":
        path.write_bytes(info.SerializeToString())
    elif suffix == ".json":
        path.write_text(json_format.MessageToJson(info))
    else:
        raise ValueError(f"{path}: unknown P4Info format (use .txtpb, .txt, .bin or .json)")


def compile_program(
    source: Path,
    include_dirs: list[str] | tuple[str, ...] = (),
    defines: dict[str, str] | None = None,
    target: str = DEFAULT,
) -> tuple[ir.Program, p4i.P4Info]:
    """Source -> (checked program, P4Info), loaded once by the switch's executor to prove it runs.

    Every failure is a CompileError with `file:line:col` diagnostics: the
    program's own errors; a construct the checker let through that the
    executor cannot run, as `unsupported:` where it is; what the `target`
    refuses beyond that (p4c's bmv2 back end's limits, for bmv2); and (a compiler bug,
    which the fuzz tests look for) anything else that escaped the checker,
    reported at the file's first line.
    """
    try:
        chosen = TARGETS[target]
        program = compile_file(source, include_dirs=include_dirs, defines=defines, predefined=chosen.defines)
        refused = chosen.check(program)
        if refused:
            raise CompileError(refused)
        info = build_p4info(program)
        Pipeline(program, info)
    except CompileError:
        raise
    except UnsupportedError as exc:
        if exc.pos is None:
            raise CompileError([Diagnostic(ir.Pos(str(source), 1, 1), f"unsupported: {exc}")]) from None
        raise CompileError([Diagnostic(exc.pos, f"unsupported: {exc.what}")]) from None
    except RecursionError:
        raise CompileError([Diagnostic(ir.Pos(str(source), 1, 1), "unsupported: nesting too deep")]) from None
    except Exception as exc:
        message = f"internal compiler error: {type(exc).__name__}: {exc}"
        raise CompileError([Diagnostic(ir.Pos(str(source), 1, 1), message)]) from None
    return program, info


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.arch != "v1model":
        print(
            f"p4reduce-p4c: error: architecture {args.arch!r} is not supported (v1model only)",
            file=sys.stderr,
        )
        return 2
    source = Path(args.source)
    if not source.is_file():
        print(f"p4reduce-p4c: error: {source}: no such file", file=sys.stderr)
        return 2
    defines = {}
    for define in args.defines:
        name, _, value = define.partition("=")
        defines[name] = value or "1"
    started = time.perf_counter()
    try:
        program, info = compile_program(source, args.includes, defines, args.target)
    except CompileError as error:
        print(error.render(), file=sys.stderr)
        return 1
    output = Path(args.output) if args.output else source.with_suffix(".json")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        program_file.save(program, output)
        for name in filter(None, (args.p4runtime_files or "").split(",")):
            path = Path(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_p4info(info, path)
    except (OSError, ValueError) as error:
        print(f"p4reduce-p4c: error: {error}", file=sys.stderr)
        return 2
    if not args.quiet:
        elapsed = time.perf_counter() - started
        print(f"p4reduce-p4c: compiled {source} -> {output} in {elapsed:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
