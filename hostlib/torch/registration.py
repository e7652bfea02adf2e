"""Naming the `p4reduce` backend to torch.distributed: at `import hostlib.torch`, and at `import torch`.

torch calls the `torch.backends` entry points (pyproject.toml) near the end
of its own import, which may be happening *inside* `import hostlib.torch`
(when that is what first imported torch). So registering imports nothing
else of ours: the process group's module is imported when torch first asks
for a group.
"""

from __future__ import annotations

from typing import Any

BACKEND = "p4reduce"


def register() -> None:
    """Make `init_process_group("p4reduce")` (and new_group(backend="p4reduce")) create our group."""
    import torch.distributed as dist

    dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu", "cuda"])


def _create(options: Any, backend_options: Any) -> Any:
    from hostlib.torch.backend import create_group

    return create_group(options, backend_options)
