"""Fixtures of the controller's integration tests: compiled program, switch, daemons (all cleaned up)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ctl_support import (
    TARGETS,
    Artifacts,
    Daemon,
    Switch,
    compile_bmv2,
    compile_soft,
    daemons,
    job_credential,  # noqa: F401 - autouse: every test's jobs share the suite's credential
    start_switch,
    stop,
)


@pytest.fixture(scope="session", params=TARGETS)
def target(request: pytest.FixtureRequest) -> str:
    """The switch under test: the embedded p4reduce-switch with the specification's answers where bmv2
    breaks it, the same switch with bmv2's answers everywhere, or bmv2 when p4c and simple_switch_grpc exist.
    """
    return str(request.param)


@pytest.fixture(scope="session")
def artifacts(target: str, tmp_path_factory: pytest.TempPathFactory) -> Artifacts:
    out = tmp_path_factory.mktemp(f"build-{target}")
    return compile_bmv2(out) if target == "bmv2" else compile_soft(out)


@pytest.fixture
def switch(target: str, artifacts: Artifacts, tmp_path: Path) -> Iterator[Switch]:
    sw = start_switch(target, artifacts, tmp_path)
    try:
        yield sw
    finally:
        stop(sw.process)


@pytest.fixture
def data_plane(switch: Switch) -> tuple[str, int]:
    """Where workers send DATA; only rootless targets can be reached from the test without namespaces."""
    if switch.udp_address is None:
        pytest.skip(f"{switch.target} has no rootless UDP port; its data plane is tested in the Mininet lab")
    from contracts.protocol import UDP_PORT

    return switch.udp_address, UDP_PORT


@pytest.fixture
def daemon(switch: Switch, tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Start `p4reduce-ctl serve` against `switch`: daemon(*extra_args, **controller_config)."""
    with daemons(switch, tmp_path) as start:
        yield start
