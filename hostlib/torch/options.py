"""What the `p4reduce` process group needs beyond torch's rank and world size, and where it comes from.

Every setting is a field of `P4ReduceOptions` (passed as
`init_process_group("p4reduce", pg_options=...)`) or an environment
variable, so that a `torchrun` script needs no code beyond the backend's
name: an option given in code wins over the environment, which wins over the
default. A bad value is a `ValueError` naming the option or the variable.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

ENV_CONTROLLER = "P4REDUCE_CONTROLLER"
ENV_JOB = "P4REDUCE_JOB"
ENV_ADDRESS = "P4REDUCE_ADDRESS"
ENV_PROGRESS_TIMEOUT = "P4REDUCE_PROGRESS_TIMEOUT"
ENV_JOIN_TIMEOUT = "P4REDUCE_JOIN_TIMEOUT"
ENV_TOKEN = "P4REDUCE_TOKEN"
ENV_REDUCE_SCATTER = "P4REDUCE_REDUCE_SCATTER"
ENV_STRICT = "P4REDUCE_STRICT"
ENV_WIRE_BITS = "P4REDUCE_WIRE_BITS"

ReduceScatterRoute = Literal["switch", "gloo"]


@dataclass(frozen=True)
class P4ReduceOptions:
    """Settings of the `p4reduce` backend; None means: from the environment, else the default.

    controller: the job API, host:port (P4REDUCE_CONTROLLER; required).
    job: the controller job's name (P4REDUCE_JOB); default: rank 0 of each group makes a unique one
        and shares it through torch's store. Groups other than the default one add their group name.
    address: the IPv4 address this worker's UDP socket binds to, which must be the address the switch
        sees as the packets' source (P4REDUCE_ADDRESS); default: the address this host uses to reach the
        controller, right when the switch and the controller share a network (or all run on loopback).
    progress_timeout: seconds a switch call may make no progress before every rank raises
        (P4REDUCE_PROGRESS_TIMEOUT, default 10; never more than init_process_group's timeout).
    join_timeout: seconds to wait for every rank to join the job (P4REDUCE_JOIN_TIMEOUT; default
        init_process_group's timeout, at most 600).
    token: the controller's bearer token, if it wants one (P4REDUCE_TOKEN).
    reduce_scatter: "switch" sums reduce_scatter through the switch (an all-reduce of which each rank
        keeps its part), "gloo" delegates it (P4REDUCE_REDUCE_SCATTER, default "switch").
    strict: when the ranks cannot all join the job (no controller, a refused join), raise instead of
        sending every collective through Gloo with one warning naming why (P4REDUCE_STRICT=1; default
        off).
    wire_bits: bits per value on the wire for bfloat16 and float16 tensors (P4REDUCE_WIRE_BITS; default
        16: two bytes per value, as a bf16 ring moves; 32 sends them as float32 is sent, with the
        finer bound). float32 always travels at 32 bits and int32 exactly. Every rank must agree.
    """

    controller: str | None = None
    job: str | None = None
    address: str | None = None
    progress_timeout: float | None = None
    join_timeout: float | None = None
    token: str | None = None
    reduce_scatter: ReduceScatterRoute | None = None
    strict: bool | None = None
    wire_bits: int | None = None


@dataclass(frozen=True)
class Settings:
    """The options resolved: every field known and checked."""

    controller: str
    job: str | None
    address: str
    progress_timeout: float
    join_timeout: float
    token: str
    reduce_scatter: ReduceScatterRoute
    strict: bool = False
    wire_bits: int = 16


DEFAULT_PROGRESS_TIMEOUT = 10.0
MAX_JOIN_TIMEOUT = 600.0


def resolve(
    options: P4ReduceOptions | None, torch_timeout: float, env: Mapping[str, str] | None = None
) -> Settings:
    """`options` completed from `env` (os.environ by default) and the defaults, each value checked."""
    if options is None:
        options = P4ReduceOptions()
    if not isinstance(options, P4ReduceOptions):
        raise TypeError(
            f"pg_options for the p4reduce backend must be hostlib.torch.P4ReduceOptions, not "
            f"{type(options).__name__}"
        )
    env = os.environ if env is None else env
    given = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}

    def pick(name: str, variable: str) -> str | float | None:
        value = given[name]
        return value if value is not None else env.get(variable) or None

    controller = pick("controller", ENV_CONTROLLER)
    if controller is None:
        raise ValueError(
            f"the p4reduce backend needs the controller's job API address: set {ENV_CONTROLLER}=host:port "
            "(e.g. 127.0.0.1:50051) or pass pg_options=P4ReduceOptions(controller=...)"
        )
    host, port = _host_port(str(controller), ENV_CONTROLLER)
    progress = _seconds(pick("progress_timeout", ENV_PROGRESS_TIMEOUT), ENV_PROGRESS_TIMEOUT)
    join = _seconds(pick("join_timeout", ENV_JOIN_TIMEOUT), ENV_JOIN_TIMEOUT)
    route = pick("reduce_scatter", ENV_REDUCE_SCATTER) or "switch"
    if route not in ("switch", "gloo"):
        raise ValueError(f"reduce_scatter ({ENV_REDUCE_SCATTER}) must be 'switch' or 'gloo', not {route!r}")
    address = pick("address", ENV_ADDRESS)
    strict = given["strict"] if given["strict"] is not None else _flag(env.get(ENV_STRICT, ""), ENV_STRICT)
    return Settings(
        controller=f"{host}:{port}",
        job=_optional_str(pick("job", ENV_JOB)),
        address=_address(str(address)) if address is not None else source_address_towards(host, port),
        progress_timeout=min(progress or DEFAULT_PROGRESS_TIMEOUT, torch_timeout),
        join_timeout=join or min(torch_timeout, MAX_JOIN_TIMEOUT),
        token=str(pick("token", ENV_TOKEN) or ""),
        reduce_scatter=route,  # type: ignore[arg-type]
        strict=bool(strict),
        wire_bits=_wire_bits(pick("wire_bits", ENV_WIRE_BITS)),
    )


def _wire_bits(value: str | float | None) -> int:
    if value is None:
        return 16
    if str(value).strip() not in ("16", "32"):
        raise ValueError(f"wire_bits ({ENV_WIRE_BITS}) must be 16 or 32, not {value!r}")
    return int(str(value).strip())


def _flag(value: str, name: str) -> bool:
    text = value.strip().lower()
    if text in ("", "0", "false", "no", "off"):
        return False
    if text in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{name} must be 1 or 0 (true or false), not {value!r}")


def source_address_towards(host: str, port: int) -> str:
    """The IPv4 address the kernel would send from to reach host:port (no packet is sent)."""
    try:
        target = socket.gethostbyname(host)
    except OSError as error:
        raise ValueError(f"cannot resolve the controller's host {host!r}: {error}") from None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((target, port))
        except OSError as error:
            raise ValueError(
                f"no route to the controller at {target}:{port} ({error.strerror}); set {ENV_ADDRESS} to "
                "this worker's address on the switch's network"
            ) from None
        return str(probe.getsockname()[0])


def _host_port(value: str, name: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{name} must be host:port (e.g. 127.0.0.1:50051), not {value!r}")
    return host, int(port)


def _seconds(value: str | float | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, not {value!r}") from None
    if not 0 < seconds < float("inf"):
        raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
    return seconds


def _address(value: str) -> str:
    try:
        return str(ipaddress.IPv4Address(value))
    except ValueError:
        raise ValueError(f"{ENV_ADDRESS} must be this worker's IPv4 address, not {value!r}") from None


def _optional_str(value: str | float | None) -> str | None:
    return None if value is None else str(value)
