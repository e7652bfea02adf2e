"""p4reduce-switch: the embedded P4 switch daemon, used like simple_switch_grpc.

    p4reduce-switch --no-p4 --device-id 1 --grpc-server-addr 127.0.0.1:9559 \\
        --udp-port 1@127.0.0.1:20562 -i 2@veth0 --cpu-port 255

starts the data plane with no program; a controller pushes one with
SetForwardingPipelineConfig (P4Info + the JSON program from p4reduce-p4c).
A program path instead of --no-p4 loads that program at start. SIGINT and
SIGTERM stop it cleanly (exit 0). User mistakes (bad flags, a port that
cannot be opened) end it with one line on stderr and exit status 2 or 1.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from softswitch.dataplane.lanes import LaneNameTaken
from softswitch.dataplane.loop import TRACE, Dataplane, Faults
from softswitch.dataplane.pcap import PcapDirectory
from softswitch.dataplane.ports import Port, RawPort, UdpPort

if TYPE_CHECKING:
    from finsy.proto import p4r

    from softswitch.p4runtime.server import P4RuntimeService

# Modules that load gRPC are imported inside functions: gRPC's C core reads
# GRPC_VERBOSITY once, at import, and main() must set it first so that a
# failure to bind shows our one-line error instead of its log lines.

LEVELS = {
    "trace": TRACE,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "off": logging.CRITICAL + 1,
}
log = logging.getLogger("softswitch.daemon")
MIN_ERROR_DETAILS = 64  # bytes: room for at least one p4.v1.Error with its code


class UsageError(Exception):
    """A mistake on the command line or in the files it names."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line instead of argparse's usage block: the mistake and where to look."""
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="p4reduce-switch",
        description="Embedded P4 switch (v1model) with a P4Runtime server; "
        "command-line compatible with bmv2's simple_switch_grpc where the flags apply.",
        epilog="Ports: -i gives raw Ethernet on a Linux interface (root); --udp-port gives a rootless port "
        "whose datagrams become Ethernet/IPv4/UDP frames (host MAC 02:00:<IPv4>, switch MAC "
        "02:50:52:00:<port>) and whose IPv4/UDP frames leave as datagrams to their IPv4/UDP destination. "
        "A lone '--' (bmv2's separator for target options) is accepted and ignored.",
    )
    p.add_argument(
        "program",
        nargs="?",
        type=Path,
        help="compiled program (JSON from p4reduce-p4c) to load at start; its P4Info is "
        "looked up beside it (X.json -> X.p4info.txtpb) unless --p4info is given",
    )
    p.add_argument(
        "--no-p4", action="store_true", help="start without a program; a P4Runtime client pushes one later"
    )
    p.add_argument("--p4info", type=Path, help="P4Info (text protobuf) of the program on the command line")
    p.add_argument(
        "-i",
        "--interface",
        action="append",
        default=[],
        metavar="PORT@IFACE",
        help="port PORT is the Linux interface IFACE (raw frames, AF_PACKET, root); repeatable",
    )
    p.add_argument(
        "--udp-port",
        action="append",
        default=[],
        metavar="PORT@ADDR:UDPPORT",
        help="port PORT is a UDP socket bound on ADDR:UDPPORT (no root needed); repeatable; "
        "several hosts may share one",
    )
    p.add_argument("--device-id", type=int, default=0, help="P4Runtime device id (default 0)")
    p.add_argument(
        "--grpc-server-addr",
        default="127.0.0.1:9559",
        metavar="HOST:PORT",
        help="P4Runtime server address (default 127.0.0.1:9559, loopback only)",
    )
    p.add_argument(
        "--cpu-port",
        type=int,
        metavar="PORT",
        help="port number whose frames become PacketIn and on which PacketOut is injected",
    )
    p.add_argument(
        "--pcap",
        type=Path,
        metavar="DIR",
        help="write DIR/<port>_in.pcap and DIR/<port>_out.pcap for every port (DIR must exist, as for bmv2)",
    )
    p.add_argument("--log-console", action="store_true", help="log to stderr at --log-level (else: warnings)")
    p.add_argument(
        "-L",
        "--log-level",
        choices=list(LEVELS),
        default="info",
        help="log level; debug logs one line per packet, trace adds hex dumps (default info)",
    )
    p.add_argument("--log-file", type=Path, help="also log to this file at --log-level")
    p.add_argument(
        "--drop-rate",
        type=float,
        default=0.0,
        metavar="P",
        help="fault injection: drop each ingress frame with probability P (default 0)",
    )
    p.add_argument(
        "--drop-rate-out",
        type=float,
        default=0.0,
        metavar="P",
        help="fault injection: drop each egress frame with probability P (default 0)",
    )
    p.add_argument(
        "--drop-ports",
        metavar="N,N",
        help="fault injection only on these ports: frames in from them and out to them (default every port)",
    )
    p.add_argument("--seed", type=int, help="seed of the fault injection generator (reproducible drops)")
    p.add_argument(
        "--stats-file",
        type=Path,
        metavar="FILE",
        help="at exit, write the packet loop's counters (rx, tx, dropped_fault_in, ...) to FILE as JSON",
    )
    p.add_argument(
        "--backend",
        choices=("auto", "c", "python"),
        default=None,
        help="how programs run: c (compiled to C with the system compiler, native speed), python (the "
        "reference, no compiler needed) or auto (default: c when a C compiler is present, else python "
        "with a one-line notice; $P4REDUCE_SWITCH_BACKEND changes the default)",
    )
    p.add_argument(
        "--conformance",
        choices=("spec", "bmv2"),
        default="spec",
        help="P4Runtime answers where bmv2 breaks the specification: spec (default) answers as the "
        "specification requires, bmv2 answers as simple_switch_grpc does (to test clients against bmv2); "
        "everywhere else both answer as simple_switch_grpc",
    )
    p.add_argument(
        "--max-streams",
        type=int,
        default=16,
        metavar="N",
        help="StreamChannels served at once (default 16); one more is refused with RESOURCE_EXHAUSTED, "
        "and unary RPCs keep threads of their own, so open streams never starve them",
    )
    p.add_argument(
        "--metrics",
        metavar="[HOST:]PORT",
        help="serve Prometheus metrics (ports, the packet loop, the program's counters) on "
        "http://HOST:PORT/metrics; HOST defaults to 127.0.0.1 (off by default)",
    )
    p.add_argument(
        "--error-details",
        default=None,
        metavar="BYTES|all",
        help="bytes of per-update errors a failed Write batch carries in its status (default: 6144 under "
        "--conformance spec, which a gRPC client with the default 8 KiB metadata limit receives, with "
        "compact errors and a note when they do not all fit; all under --conformance bmv2, as "
        "simple_switch_grpc); all: one error per update always (clients must raise grpc.max_metadata_size)",
    )
    p.add_argument("--thrift-port", type=int, help="accepted for simple_switch_grpc compatibility; ignored")
    p.add_argument("--nanolog", help="accepted for simple_switch_grpc compatibility; ignored")
    return p


def error_details(value: str | None) -> int | None:
    """--error-details: None (the conformance mode's default), 0 for `all`, else a number of bytes."""
    if value is None:
        return None
    if value == "all":
        return 0
    if not value.isdigit() or int(value) < MIN_ERROR_DETAILS:
        raise UsageError(
            f"--error-details must be 'all' or a number of bytes >= {MIN_ERROR_DETAILS}, not {value!r}"
        )
    return int(value)


def parse_port_spec(spec: str, flag: str) -> tuple[int, str]:
    """'N@REST' -> (N, REST)."""
    number, sep, rest = spec.partition("@")
    if not sep or not rest or not number.isdigit():
        raise UsageError(f"{flag} {spec!r}: expected PORT@...")
    port = int(number)
    if port >= 1 << 32:
        raise UsageError(f"{flag} {spec!r}: port number too large")
    return port, rest


def parse_udp_target(spec: str) -> tuple[int, str, int]:
    port, target = parse_port_spec(spec, "--udp-port")
    address, sep, udp = target.rpartition(":")
    if not sep or not address or not udp.isdigit() or not 0 < int(udp) < 65536:
        raise UsageError(f"--udp-port {spec!r}: expected PORT@ADDR:UDPPORT with UDPPORT 1..65535")
    return port, address, int(udp)


def open_ports(args: argparse.Namespace) -> list[Port]:
    raw = [(*parse_port_spec(spec, "-i"), spec) for spec in args.interface]
    udp = [(*parse_udp_target(spec), spec) for spec in args.udp_port]
    numbers = [item[0] for item in raw + udp] + ([args.cpu_port] if args.cpu_port is not None else [])
    clash = sorted({n for n in numbers if numbers.count(n) > 1})
    if clash:
        raise UsageError(f"port number {clash[0]} is used twice (ports and --cpu-port must differ)")
    ports: list[Port] = []
    try:
        for number, interface, spec in raw:
            try:
                ports.append(RawPort(number, interface))
            except OSError as error:
                reason = error.strerror or error
                raise UsageError(f"-i {spec}: cannot open interface {interface}: {reason}") from None
        for number, address, udp_port, spec in udp:
            try:
                ports.append(UdpPort(number, address, udp_port))
            except OSError as error:
                reason = error.strerror or error
                raise UsageError(f"--udp-port {spec}: cannot bind {address}:{udp_port}: {reason}") from None
    except UsageError:
        for port in ports:
            port.close()
        raise
    return ports


def startup_config(args: argparse.Namespace) -> p4r.ForwardingPipelineConfig | None:
    """The pipeline named on the command line, or None with --no-p4."""
    from finsy.proto import p4i, p4r
    from google.protobuf import text_format

    if args.no_p4:
        if args.program is not None:
            raise UsageError("give either --no-p4 or a program, not both")
        return None
    if args.program is None:
        raise UsageError("no program: give a compiled program path or --no-p4")
    p4info_path = args.p4info or args.program.with_suffix(".p4info.txtpb")
    try:
        device_config = args.program.read_bytes()
        text = p4info_path.read_text()
    except OSError as error:
        hint = "" if args.p4info else " (give --p4info)"
        raise UsageError(f"cannot read {error.filename}: {error.strerror}{hint}") from None
    p4info = p4i.P4Info()
    try:
        text_format.Parse(text, p4info)
    except text_format.ParseError as error:
        raise UsageError(f"{p4info_path}: not a text P4Info: {error}") from None
    return p4r.ForwardingPipelineConfig(p4info=p4info, p4_device_config=device_config)


def setup_logging(args: argparse.Namespace) -> None:
    logging.addLevelName(TRACE, "TRACE")
    level = LEVELS[args.log_level]
    root = logging.getLogger()
    root.setLevel(level)
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(level if args.log_console else max(level, logging.WARNING))
    formatter = logging.Formatter("%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", "%H:%M:%S")
    console.setFormatter(formatter)
    root.addHandler(console)
    if args.log_file is not None:
        try:
            handler = logging.FileHandler(args.log_file)
        except OSError as error:
            raise UsageError(f"--log-file {args.log_file}: {error.strerror}") from None
        handler.setFormatter(formatter)
        root.addHandler(handler)


def drop_ports(text: str | None) -> frozenset[int]:
    """`--drop-ports 5,6` -> {5, 6}; none: every port (an empty set)."""
    if not text:
        return frozenset()
    try:
        ports = frozenset(int(item) for item in text.split(","))
    except ValueError:
        raise ValueError(f"{text!r} is not a list of port numbers like 5,6") from None
    if any(not 0 <= port < 1 << 32 for port in ports):
        raise ValueError(f"{text!r} has a port number outside 0..2^32-1")
    return ports


def run(args: argparse.Namespace) -> int:
    """Start everything, serve until SIGINT/SIGTERM, stop everything."""
    from softswitch.backends.common import UnsupportedError
    from softswitch.backends.loader import compiler_notice, default_backend, load_pipeline
    from softswitch.p4runtime.conformance import Conformance
    from softswitch.p4runtime.errors import P4RuntimeError
    from softswitch.p4runtime.server import P4RuntimeService, serve

    try:
        faults = Faults(args.drop_rate, args.drop_rate_out, args.seed, drop_ports(args.drop_ports))
    except ValueError as error:
        raise UsageError(f"--drop-rate/--drop-rate-out/--drop-ports: {error}") from None
    if args.device_id < 0:
        raise UsageError("--device-id must be >= 0")
    if args.max_streams < 1:
        raise UsageError("--max-streams must be at least 1")
    metrics = None
    if args.metrics is not None:
        from softswitch.metrics import metrics_address

        try:
            metrics = metrics_address(args.metrics)
        except ValueError as error:
            raise UsageError(f"--metrics {error}") from None
    details_budget = error_details(args.error_details)
    try:
        backend = args.backend or default_backend()
    except UnsupportedError as error:
        raise UsageError(str(error)) from None
    notice = compiler_notice() if backend in ("auto", "c") else None
    if notice is not None and backend == "c":
        raise UsageError("--backend c: no C compiler found (install build-essential, or --backend python)")
    config = startup_config(args)
    setup_logging(args)
    if notice is not None:
        print(f"p4reduce-switch: notice: {notice}", file=sys.stderr)
    for flag in ("thrift_port", "nanolog"):
        if getattr(args, flag) is not None:
            log.warning("--%s is accepted for compatibility and ignored", flag.replace("_", "-"))
    if args.pcap is not None and not args.pcap.is_dir():
        # As simple_switch_grpc: a lab that works here must not fail on bmv2 for a missing folder.
        raise UsageError(f"--pcap {args.pcap}: directory does not exist (create it first)")
    ports = open_ports(args)
    pcap = PcapDirectory(args.pcap) if args.pcap is not None else None
    # The native loop runs unless the Python backend was asked for, or there is no compiler, or per-packet
    # debug logs were (those only the Python loop writes).
    native = backend != "python" and notice is None and LEVELS[args.log_level] > logging.DEBUG
    try:
        if native:
            from softswitch.dataplane.native import NativeDataplane

            dataplane: Dataplane | NativeDataplane = NativeDataplane(ports, args.cpu_port, faults, pcap)
        else:
            dataplane = Dataplane(ports, args.cpu_port, faults, pcap)
    except LaneNameTaken as error:
        for port in ports:
            port.close()
        raise UsageError(str(error.strerror)) from None
    log.info("packet loop: %s", "native (C, without the GIL)" if native else "Python")
    loader = functools.partial(load_pipeline, backend=backend)
    service = P4RuntimeService(
        args.device_id, dataplane, loader, Conformance(args.conformance), args.max_streams, details_budget
    )
    try:
        if config is not None:
            try:
                service.install(config)
            except P4RuntimeError as error:
                raise UsageError(f"{args.program}: {error.message}") from None
        server = serve(service, args.grpc_server_addr)
        if metrics is not None:
            start_metrics(service, *metrics)
    except (UsageError, OSError) as error:
        dataplane.close()
        raise UsageError(str(error)) from None
    stop = threading.Event()
    signalled: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # Only a flag: the handler runs on the main thread between two bytecodes, possibly while it
        # holds stop's internal lock inside stop.wait(), and stop.set() here would wait for that lock
        # for ever (a SIGTERM that hung the switch). The main loop below sets `stop`.
        signalled.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    for port in ports:
        log.info("port %d: %s", port.number, port.describe())
    log.info(
        "P4Runtime server on %s, device id %d%s, %s answers",
        args.grpc_server_addr,
        args.device_id,
        f", cpu port {args.cpu_port}" if args.cpu_port is not None else "",
        args.conformance,
    )
    loop = threading.Thread(target=dataplane.run, args=(stop,), name="packet-loop", daemon=True)
    loop.start()
    print(ready_line(args, ports, config is not None), flush=True)
    failed = False
    while not signalled:
        time.sleep(0.2)  # the flag is seen at most 0.2 s after a signal
        if not loop.is_alive():
            log.error("the packet loop stopped unexpectedly")
            failed = True
            break
    stop.set()
    server.stop(grace=0.5).wait()
    loop.join(timeout=5)
    dataplane.close()
    log.info("stopped: %s", ", ".join(f"{k}={v}" for k, v in sorted(dataplane.stats.items())) or "no traffic")
    if args.stats_file is not None:
        args.stats_file.write_text(json.dumps(dict(sorted(dataplane.stats.items())), indent=1) + "\n")
    return 1 if failed or loop.is_alive() else 0


def start_metrics(service: P4RuntimeService, host: str, port: int) -> None:
    from softswitch.metrics import serve_metrics

    try:
        serve_metrics(service, host, port)
    except OSError as error:
        raise UsageError(f"--metrics {host}:{port}: cannot listen: {error.strerror or error}") from None


def ready_line(args: argparse.Namespace, ports: list[Port], loaded: bool) -> str:
    """The one line on stdout that says the switch serves (simple_switch_grpc prints its own)."""
    where = ", ".join(f"{port.number} ({port.describe()})" for port in ports) or "none"
    program = str(args.program) if loaded else "no pipeline yet (a controller pushes one)"
    return (
        f"p4reduce-switch ready: P4Runtime on {args.grpc_server_addr}, device id {args.device_id}; "
        f"ports {where}; {program}"
    )


def main(argv: list[str] | None = None) -> int:
    # gRPC's C core would print its own multi-line complaint next to ours (e.g. address in use).
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    argv = list(sys.argv[1:] if argv is None else argv)
    argv = [a for a in argv if a != "--"]
    args = parser().parse_args(argv)
    try:
        return run(args)
    except UsageError as error:
        print(f"p4reduce-switch: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
