"""Mininet switches that run a P4Runtime target: bmv2's simple_switch_grpc or p4reduce-switch.

Both classes take the same parameters and start their daemon the same way
(in the root namespace, one `-i PORT@INTF` per interface, logs in logs/,
pcaps in pcaps/<name>/); `targets.py` writes the command lines. Both start
without a program (`--no-p4`): the controller pushes P4Info and device
config over P4Runtime, as it would to any switch. A switch that exits
while starting, or later while the lab still needs it, is reported with
the last lines of its log (`check_running`).
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from mininet.node import Switch
from targets import LAUNCHERS, SwitchLaunch, SwitchSpec, TargetError

from hostlib.launch import LaunchError, tail, wait_for_port


class P4RuntimeSwitch(Switch):
    """Start the target's daemon, wait for its gRPC port, stop it."""

    kind = ""

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
        drop_ports: tuple[int, ...] = (),
        switch_log: str = "info",
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
        self.drop_ports = drop_ports
        self.switch_log = switch_log
        self.process: subprocess.Popen[bytes] | None = None
        self.launch: SwitchLaunch | None = None

    def spec(self) -> SwitchSpec:
        interfaces = tuple(
            (port, intf.name) for port, intf in sorted(self.intfs.items()) if intf.name != "lo"
        )
        return SwitchSpec(
            name=self.name,
            grpc_address=f"127.0.0.1:{self.grpc_port}",
            device_id=self.device_id,
            interfaces=interfaces,
            cpu_port=self.cpu_port,
            log_dir=self.log_dir,
            pcap_dir=None if self.pcap_dir is None else self.pcap_dir / self.name,
            switch_log=self.switch_log,
            drop_rate=self.drop_rate,
            drop_rate_out=self.drop_rate_out,
            drop_ports=self.drop_ports,
        )

    def start(self, controllers: list[object]) -> None:
        spec = self.spec()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if spec.pcap_dir is not None:
            spec.pcap_dir.mkdir(parents=True, exist_ok=True)  # bmv2 exits when the folder is missing
        try:
            self.launch = launch = LAUNCHERS[self.kind](spec)
        except TargetError as error:
            raise LaunchError(f"switch {self.name}: {error}") from None
        with open(launch.console_log, "ab") as log:
            log.write(f"$ {shlex.join(launch.command)}\n".encode())
            log.flush()
            self.process = subprocess.Popen(launch.command, stdout=log, stderr=subprocess.STDOUT)
        wait_for_port(self.grpc_port, self.process, launch.console_log, f"switch {self.name}")

    def check_running(self) -> None:
        """LaunchError with the end of the switch's log when its daemon is gone."""
        if self.process is None or self.launch is None or self.process.poll() is None:
            return
        where = self.launch.console_log
        extra = "" if self.launch.trace_log == where else f" (its own log: {self.launch.trace_log})"
        code = self.process.returncode
        raise LaunchError(f"switch {self.name} exited with code {code}{extra}; {where} ends:\n{tail(where)}")

    def stop_daemon(self) -> None:
        """End the switch daemon (before Mininet deletes its links: a daemon still reading a deleted
        link would log an error per port on every clean teardown)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 (Mininet's signature)
        self.stop_daemon()
        super().stop(deleteIntfs)


class P4ReduceSwitch(P4RuntimeSwitch):
    """The embedded p4reduce-switch (pure Python, installed with the project)."""

    kind = "soft"


class Bmv2GrpcSwitch(P4RuntimeSwitch):
    """bmv2's simple_switch_grpc (must be on PATH; see docs/lab.md)."""

    kind = "bmv2"


SWITCH_CLASSES = {"soft": P4ReduceSwitch, "bmv2": Bmv2GrpcSwitch}
