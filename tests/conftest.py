"""Fixtures shared by every test folder: the switch's two backends."""

from __future__ import annotations

import pytest

from softswitch.backends.c.build import compiler

NO_COMPILER = compiler() is None
BACKENDS = [
    pytest.param("python", id="python"),
    pytest.param(
        "c", id="c", marks=pytest.mark.skipif(NO_COMPILER, reason="no C compiler (cc) on this machine")
    ),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each backend of the embedded switch in turn: the Python reference and the native C one."""
    return request.param


@pytest.fixture(
    params=[
        pytest.param("python", id="python-loop"),
        pytest.param("native", id="native-loop", marks=BACKENDS[1].marks),
    ]
)
def dataplane_class(request: pytest.FixtureRequest) -> type:
    """Each packet loop in turn: the Python one and the native one (C, without the GIL)."""
    if request.param == "python":
        from softswitch.dataplane.loop import Dataplane

        return Dataplane
    from softswitch.dataplane.native import NativeDataplane

    return NativeDataplane
