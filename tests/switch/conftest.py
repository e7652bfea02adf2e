"""Fixtures of the switch tests: a running P4Runtime server and a primary client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from finsy.proto import p4r
from switch_aggregation import compile_program
from switch_support import (
    DEVICE_ID,
    Server,
    StreamClient,
    become_primary,
    reflector_config,
    start_server,
    stop_server,
)

from softswitch.backends.loader import load_pipeline
from softswitch.p4runtime.arbitration import uint128


@pytest.fixture(scope="session")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """p4src/v1model/p4reduce.p4 compiled by p4reduce-p4c: (program JSON, P4Info)."""
    for module in ("softswitch.p4c", "softswitch.backends.python.executor"):
        pytest.importorskip(module, reason="the embedded switch's compiler and executor are needed")
    return compile_program(tmp_path_factory.mktemp("p4reduce"))


@pytest.fixture
def real_server() -> Iterator[Server]:
    """A P4Runtime server with no pipeline that loads real programs (compiler + executor)."""
    s = start_server(loader=load_pipeline)
    yield s
    stop_server(s)


@pytest.fixture
def server() -> Iterator[Server]:
    """A P4Runtime server with no pipeline."""
    s = start_server()
    yield s
    stop_server(s)


@pytest.fixture
def primary(server: Server) -> Iterator[StreamClient]:
    """The primary client (election id 10) of `server`, after it pushed the test pipeline."""
    client = become_primary(server.stub, 10)
    server.stub.SetForwardingPipelineConfig(
        p4r.SetForwardingPipelineConfigRequest(
            device_id=DEVICE_ID,
            election_id=uint128(10),
            config=reflector_config(cookie=7),
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        )
    )
    yield client
    client.close()
