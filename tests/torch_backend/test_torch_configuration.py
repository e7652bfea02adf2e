"""How the p4reduce backend is found and configured, and how it refuses a bad configuration.

Options come from P4ReduceOptions, else P4REDUCE_* variables, else defaults;
every bad value is an error naming the option. torch finds the backend by
its entry point, without the script importing hostlib.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch", reason="PyTorch is an optional extra (pip install 'p4reduce[torch]')")

from hostlib.launch import ROOT, free_port  # noqa: E402
from hostlib.torch.options import P4ReduceOptions, resolve  # noqa: E402

CONTROLLER = {"P4REDUCE_CONTROLLER": "127.0.0.1:50051"}
STORE = "tcp://127.0.0.1:{port}"  # a store of one rank, formatted with a free port by _python


def test_the_controller_comes_from_the_environment_and_an_option_wins_over_it() -> None:
    assert resolve(None, 1800, CONTROLLER).controller == "127.0.0.1:50051"
    given = P4ReduceOptions(controller="127.0.0.1:6000", job="train", reduce_scatter="gloo")
    settings = resolve(
        given, 1800, {**CONTROLLER, "P4REDUCE_JOB": "other", "P4REDUCE_REDUCE_SCATTER": "switch"}
    )
    assert (settings.controller, settings.job, settings.reduce_scatter) == ("127.0.0.1:6000", "train", "gloo")
    from_env = resolve(
        None, 1800, {**CONTROLLER, "P4REDUCE_JOB": "other", "P4REDUCE_PROGRESS_TIMEOUT": "2.5"}
    )
    assert (from_env.job, from_env.progress_timeout) == ("other", 2.5)


def test_defaults_follow_torch_s_timeout_and_the_route_to_the_controller() -> None:
    settings = resolve(None, 1800, CONTROLLER)
    assert settings.job is None and settings.reduce_scatter == "switch" and settings.token == ""
    assert settings.progress_timeout == 10.0 and settings.join_timeout == 600.0
    assert settings.address == "127.0.0.1", "the address the host reaches the controller from"
    short = resolve(P4ReduceOptions(progress_timeout=30), 5, CONTROLLER)
    assert short.progress_timeout == 5 and short.join_timeout == 5, "never longer than torch's own timeout"


@pytest.mark.parametrize(
    ("options", "env", "says"),
    [
        (None, {}, "P4REDUCE_CONTROLLER=host:port"),
        (None, {"P4REDUCE_CONTROLLER": "localhost"}, "must be host:port"),
        (None, {"P4REDUCE_CONTROLLER": "127.0.0.1:99999"}, "must be host:port"),
        (
            None,
            {**CONTROLLER, "P4REDUCE_PROGRESS_TIMEOUT": "soon"},
            "P4REDUCE_PROGRESS_TIMEOUT must be a number",
        ),
        (P4ReduceOptions(join_timeout=-1), CONTROLLER, "P4REDUCE_JOIN_TIMEOUT must be a positive"),
        (None, {**CONTROLLER, "P4REDUCE_ADDRESS": "eth0"}, "P4REDUCE_ADDRESS must be this worker's IPv4"),
        (None, {**CONTROLLER, "P4REDUCE_REDUCE_SCATTER": "ring"}, "must be 'switch' or 'gloo'"),
        (None, {"P4REDUCE_CONTROLLER": "no-such-host.invalid:1"}, "cannot resolve the controller's host"),
    ],
)
def test_a_bad_setting_is_refused_with_its_name(
    options: P4ReduceOptions | None, env: dict, says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        resolve(options, 1800, env)


def test_pg_options_of_another_backend_are_refused() -> None:
    with pytest.raises(TypeError, match="must be hostlib.torch.P4ReduceOptions"):
        resolve({"controller": "127.0.0.1:1"}, 1800, {})  # type: ignore[arg-type]


def _python(code: str, **env: str) -> str:
    """What a fresh interpreter running `code` prints: {STORE} is a one-rank store on a free port, and
    P4REDUCE_CONTROLLER is set only if given."""
    environment = {k: v for k, v in os.environ.items() if k != "P4REDUCE_CONTROLLER"}
    environment.update(OMP_NUM_THREADS="1", **env)
    code = textwrap.dedent(code).replace("{STORE}", STORE.format(port=free_port()))
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True
    )
    return done.stdout + done.stderr


def test_torch_finds_the_backend_by_its_entry_point_without_hostlib_being_imported() -> None:
    """A script that only names the backend gets our process group: here it says the controller is down."""
    dead = free_port()  # nothing listens there
    script = """
        import sys, torch, torch.distributed as dist
        print("registered", "p4reduce" in dist.Backend.backend_list, "hostlib.torch.backend" in sys.modules)
        try:
            dist.init_process_group("p4reduce", init_method="{STORE}", rank=0, world_size=1)
        except Exception as error:
            print(type(error).__name__, error)
    """
    out = _python(script, P4REDUCE_CONTROLLER=f"127.0.0.1:{dead}", P4REDUCE_STRICT="1")
    assert "registered True False" in out, "registered at import torch, the process group's code not loaded"
    assert "DistBackendError p4reduce: rank 0 could not join job" in out, out
    assert f"controller at 127.0.0.1:{dead} is unreachable" in out, out
    off = _python(script, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert "registered False False" in off, off


def test_without_a_controller_init_process_group_says_what_to_set() -> None:
    out = _python(
        """
        import torch.distributed as dist
        try:
            dist.init_process_group("p4reduce", init_method="{STORE}", rank=0, world_size=1)
        except ValueError as error:
            print("ValueError", error)
        """
    )
    assert "ValueError the p4reduce backend needs the controller's job API address" in out, out


def _fallback_rank(rank: int, world: int, port: int, dead: int) -> tuple[list[float], str, str]:
    """One rank of a job whose controller is down: what its all_reduce gives, its warning, its route."""
    import warnings

    import torch
    import torch.distributed as dist

    from tests.torch_backend.ranks import init

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        init("p4reduce", rank, world, port, controller=f"127.0.0.1:{dead}", join_timeout=5.0)
    tensor = torch.full((4,), float(rank + 1))
    dist.all_reduce(tensor)
    group = dist.distributed_c10d._get_default_group()
    routes = ",".join(sorted(f"{route}:{what}" for route, what in group.collectives))
    dist.destroy_process_group()
    said = [str(w.message) for w in caught if "p4reduce" in str(w.message)]
    return tensor.tolist(), " | ".join(said), routes


def test_without_a_controller_every_rank_falls_back_to_gloo_with_one_warning_naming_why() -> None:
    """Not strict (the default): the ranks agree through torch's store that a join failed, each warns
    once with the same reason, and every collective goes through Gloo, exact."""
    from tests.torch_backend.ranks import run_ranks

    dead = free_port()
    answers = run_ranks(_fallback_rank, 2, dead)
    assert all(ok for ok, _ in answers.values()), answers
    results = {rank: value for rank, (_, value) in answers.items()}
    assert [r[0] for r in results.values()] == [[3.0] * 4, [3.0] * 4]
    warnings_said = {r[1] for r in results.values()}
    assert len(warnings_said) == 1, warnings_said  # the same reason on every rank
    [said] = warnings_said
    assert "every collective of this group goes through Gloo: rank 0 could not join job" in said, said
    assert f"controller at 127.0.0.1:{dead} is unreachable" in said and "P4REDUCE_STRICT=1" in said
    assert all(r[2] == "gloo:all_reduce" for r in results.values())
