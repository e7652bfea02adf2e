"""Every packet scenario of docs/protocol.md (one switch, and a child of a tree), run on the real P4
program on both of the switch's backends.

The program is compiled once by the front end, at the scenarios' K (tests/packet_program.py); each
scenario gets a fresh pipeline (empty tables, zeroed registers), driven through P4Info names.
"""

from __future__ import annotations

import pytest

from softswitch.backends.loader import new_pipeline
from softswitch.p4info import build_p4info
from tests.executor.pipeline_driver import PipelineDriver
from tests.packet_program import packet_program
from tests.protocol_scenarios import SCENARIOS, Scenario, run_scenario
from tests.protocol_tree_scenarios import tree_scenarios

ALL = SCENARIOS + tree_scenarios()


@pytest.fixture(scope="module")
def compiled():
    program = packet_program()
    return program, build_p4info(program)


@pytest.mark.parametrize("scenario", ALL, ids=[s.name for s in ALL])
def test_scenario(compiled, scenario: Scenario, backend: str) -> None:
    program, info = compiled
    run_scenario(PipelineDriver(new_pipeline(program, info, backend), info), scenario)
