"""Fixtures of the reliability suite: the embedded switch (rootless UDP port) and its daemon."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "controller"))  # the controller tests' helpers
from ctl_support import (  # noqa: E402
    Artifacts,
    Daemon,
    Switch,
    compile_soft,
    daemons,
    job_credential,  # noqa: F401 - autouse: every test's jobs share the suite's credential
    start_switch,
    stop,
)


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Artifacts:
    return compile_soft(tmp_path_factory.mktemp("build-reliability"))


@pytest.fixture
def switch(artifacts: Artifacts, tmp_path: Path) -> Iterator[Switch]:
    sw = start_switch("soft", artifacts, tmp_path)
    try:
        yield sw
    finally:
        stop(sw.process)


@pytest.fixture
def daemon(switch: Switch, tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Start `p4reduce-ctl serve` against `switch`: daemon(*extra_args, token=..., **controller_config)."""
    with daemons(switch, tmp_path) as start:
        yield start
