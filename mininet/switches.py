"""Mininet switches that run a P4Runtime target: bmv2's simple_switch_grpc or p4reduce-switch.

Both classes take the same parameters and start their daemon the same way
(in the root namespace, one `-i PORT@INTF` per interface, logs in logs/,
pcaps in pcaps/), so a lab picks one with a flag. Both start without a
program (`--no-p4`): the controller pushes P4Info and device config over
P4Runtime, as it would to any switch.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from mininet.node import Switch

from hostlib.launch import wait_for_port


class P4RuntimeSwitch(Switch):
    """Common part: build the command line, start, wait for gRPC, stop."""

    def __init__(
        self,
        name: str,
        grpc_port: int = 9559,
        device_id: int = 1,
        cpu_port: int | None = None,
        log_dir: str = "logs",
        pcap_dir: str | None = "pcaps",
        drop_rate: float = 0.0,
        drop_rate_out: float = 0.0,
        **params: object,
    ) -> None:
        super().__init__(name, **params)
        self.grpc_port = grpc_port
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.log_dir = Path(log_dir)
        self.pcap_dir = Path(pcap_dir) if pcap_dir else None
        self.drop_rate = drop_rate
        self.drop_rate_out = drop_rate_out
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def log_file(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    def port_args(self) -> list[str]:
        args = []
        for port, intf in sorted(self.intfs.items()):
            if intf.name != "lo":
                args += ["-i", f"{port}@{intf.name}"]
        return args

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, controllers: list[object]) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if self.pcap_dir is not None:
            self.pcap_dir.mkdir(parents=True, exist_ok=True)
        command = self.command()
        with open(self.log_file, "ab") as log:
            log.write(f"$ {shlex.join(command)}\n".encode())
            log.flush()
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        wait_for_port(self.grpc_port, self.process, self.log_file, f"switch {self.name}")

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 (Mininet's signature)
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        super().stop(deleteIntfs)


class P4ReduceSwitch(P4RuntimeSwitch):
    """The embedded p4reduce-switch (pure Python, installed with the project)."""

    def command(self) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "softswitch.daemon",
            "--no-p4",
            *self.port_args(),
            "--device-id",
            str(self.device_id),
            "--grpc-server-addr",
            f"127.0.0.1:{self.grpc_port}",
            "--log-file",
            str(self.log_file),
            "--log-level",
            "info",
        ]
        if self.cpu_port is not None:
            command += ["--cpu-port", str(self.cpu_port)]
        if self.pcap_dir is not None:
            command += ["--pcap", str(self.pcap_dir / self.name)]
        if self.drop_rate or self.drop_rate_out:
            command += ["--drop-rate", str(self.drop_rate), "--drop-rate-out", str(self.drop_rate_out)]
            command += ["--seed", "1"]
        return command


class Bmv2GrpcSwitch(P4RuntimeSwitch):
    """bmv2's simple_switch_grpc (must be on PATH; see docs/lab.md)."""

    def command(self) -> list[str]:
        if self.drop_rate or self.drop_rate_out:
            raise RuntimeError("simple_switch_grpc has no loss injection; use --switch soft for --drop-rate")
        command = [
            "simple_switch_grpc",
            "--no-p4",
            *self.port_args(),
            "--device-id",
            str(self.device_id),
            "--log-file",
            str(self.log_dir / self.name),
            "--log-flush",
        ]
        if self.pcap_dir is not None:
            command += ["--pcap", str(self.pcap_dir / self.name)]
        command += ["--", "--grpc-server-addr", f"127.0.0.1:{self.grpc_port}"]
        if self.cpu_port is not None:
            command += ["--cpu-port", str(self.cpu_port)]
        return command


SWITCH_CLASSES = {"soft": P4ReduceSwitch, "bmv2": Bmv2GrpcSwitch}
