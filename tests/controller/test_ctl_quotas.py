"""Tenants and quotas (issue 28, part 2): a tenant over its quota is refused, named, and nothing changes.

Each test runs a real switch and daemon (ctl_support) whose config names two tenants with tokens of
their own: team-a may hold 2 jobs and 24 slots per switch, team-b has no limits. What an operator
sees is stated: the refusal's one line, `p4reduce-ctl tenants`, and quotas that hold across a
restart of the daemon (a job remembers its tenant on the switch).
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable

import pytest
from ctl_support import Daemon, cli, free_tcp_port

from controller import config
from controller.errors import ConfigError

TEAM_A, TEAM_B, ADMIN = "team-a-token-0123456789", "team-b-token-0123456789", "the-admin-token-0123456789"
TENANTS = [
    {"name": "team-a", "token": TEAM_A, "max_jobs": 2, "max_slots": 24},
    {"name": "team-b", "token": TEAM_B},
]


def create(d: Daemon, name: str, token: str, pool: int = 8) -> tuple[int, str]:
    result = cli("job", "create", name, "--world-size", "2", "--pool-size", str(pool), "--controller",
                 d.listen, "--token", token)  # fmt: skip
    return result.code, result.err.strip()


def jobs(d: Daemon) -> list[dict[str, object]]:
    result = cli("job", "list", "--json", "--controller", d.listen, "--token", ADMIN)
    assert result.code == 0, result.err
    return json.loads(result.out)


METRICS = f"127.0.0.1:{free_tcp_port()}"


@pytest.fixture
def tenanted(target: str, daemon: Callable[..., Daemon]) -> Daemon:
    if target != "soft":
        pytest.skip("quotas are the controller's: one target shows them")
    return daemon("--admin-token", ADMIN, "--metrics", METRICS, token=ADMIN, tenants=TENANTS)


def test_a_tenant_over_its_job_quota_is_refused_naming_it_and_nothing_changes(tenanted: Daemon) -> None:
    assert create(tenanted, "a1", TEAM_A) == (0, "")
    assert create(tenanted, "a2", TEAM_A) == (0, "")
    before = jobs(tenanted)
    code, err = create(tenanted, "a3", TEAM_A)
    assert code == 1
    assert err == "p4reduce-ctl: error: tenant 'team-a' is at its quota of 2 job(s) (max_jobs; it holds 2)"
    assert jobs(tenanted) == before  # no job, no slots, no id taken
    assert create(tenanted, "b1", TEAM_B) == (0, "")  # another tenant is not held back


def test_a_tenant_over_its_slot_quota_on_a_switch_is_refused_naming_it(tenanted: Daemon) -> None:
    assert create(tenanted, "big", TEAM_A, pool=16) == (0, "")
    code, err = create(tenanted, "more", TEAM_A, pool=16)
    assert code == 1
    assert err.endswith(
        "tenant 'team-a' would hold 32 slots on switch sw1, past its quota of 24 "
        "(max_slots; it holds 16 there)"
    )
    assert create(tenanted, "fits", TEAM_A, pool=8) == (0, "")


def test_quotas_hold_across_a_restart_of_the_daemon(tenanted: Daemon) -> None:
    assert create(tenanted, "a1", TEAM_A) == (0, "")
    assert create(tenanted, "a2", TEAM_A) == (0, "")
    tenanted.stop()
    tenanted.start()  # recovers the jobs from the switch, each with its tenant
    assert {j["name"]: j["tenant"] for j in jobs(tenanted)} == {"a1": "team-a", "a2": "team-a"}
    code, err = create(tenanted, "a3", TEAM_A)
    assert code == 1 and "at its quota of 2 job(s)" in err


def test_the_tenants_command_shows_usage_to_the_operator_and_a_tenant_its_own(tenanted: Daemon) -> None:
    assert create(tenanted, "a1", TEAM_A, pool=16) == (0, "")
    assert create(tenanted, "b1", TEAM_B, pool=8) == (0, "")
    shown = cli("tenants", "--json", "--controller", tenanted.listen, "--token", ADMIN)
    assert shown.code == 0, shown.err
    assert json.loads(shown.out) == [
        {"tenant": "team-a", "jobs": 1, "max_jobs": 2, "slots": {"sw1": 16}, "max_slots": 24},
        {"tenant": "team-b", "jobs": 1, "max_jobs": None, "slots": {"sw1": 8}, "max_slots": None},
    ]
    own = cli("tenants", "--json", "--controller", tenanted.listen, "--token", TEAM_B)
    assert [row["tenant"] for row in json.loads(own.out)] == ["team-b"]
    table = cli("tenants", "--controller", tenanted.listen, "--token", ADMIN).out
    assert "team-a  1/2" in table and "sw1 16" in table
    with urllib.request.urlopen(f"http://{METRICS}/metrics", timeout=10) as reply:
        metrics = reply.read().decode()
    for line in ('p4reduce_tenant_jobs{tenant="team-a"} 1.0', 'p4reduce_tenant_max_jobs{tenant="team-a"} 2.0',
                 'p4reduce_tenant_slots{switch="sw1",tenant="team-a"} 16.0',
                 'p4reduce_tenant_max_slots{tenant="team-a"} 24.0'):  # fmt: skip
        assert line in metrics
    assert 'p4reduce_tenant_max_jobs{tenant="team-b"}' not in metrics  # no limit, no quota line


def test_with_tenants_the_shared_access_token_creates_no_job(tenanted: Daemon) -> None:
    code, err = create(tenanted, "anon", "")
    assert code == 1 and "missing or wrong token" in err
    code, err = create(tenanted, "ops", ADMIN)  # the operator may, outside every quota
    assert code == 0


@pytest.mark.parametrize(
    ("tenants", "message"),
    [
        ([{"name": "x", "token": "short"}], "tenants[0]: its token must be at least 16 printable characters"),
        ([{"name": "x"}], "tenants[0]: give token or token_env"),
        ([{"name": "x", "token": TEAM_A, "max_jobs": -1}], "tenants[0].max_jobs: -1 is not a whole number"),
        ([{"name": "x", "token": TEAM_A}, {"name": "x", "token": TEAM_B}], "duplicate tenant name"),
        ([{"name": "x", "token": TEAM_A}, {"name": "y", "token": TEAM_A}], "two tenants have the same token"),
        ([{"name": "x", "token_env": "P4REDUCE_NO_SUCH_VARIABLE"}], "P4REDUCE_NO_SUCH_VARIABLE is not set"),
        ([{"name": "x", "token": TEAM_A, "quota": 3}], "tenants[0]: unknown key quota"),
    ],
)
def test_tenant_config_mistakes_are_one_line(tenants: list[dict[str, object]], message: str) -> None:
    data = {"switches": [{"name": "s", "grpc": "127.0.0.1:1", "p4info": "p", "device_config": "d",
                          "aggregation": {"ipv4": "10.0.0.1", "mac": "02:00:00:00:00:01"}}],
            "tenants": tenants}  # fmt: skip
    with pytest.raises(ConfigError, match=re.escape(message)):
        config.parse(data, config.Path("."))
