"""The targets `p4reduce-p4c --target` compiles for: what each predefines, and what each refuses.

The embedded switch (`softswitch`, the default) runs every program its
front end accepts. `bmv2` also refuses what p4c's bmv2 back end refuses
(docs/softswitch.md, *Checking for bmv2*), so that a program
that runs here but not on simple_switch fails in CI, where p4c is absent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from softswitch import ir
from softswitch.frontend.diagnostics import Diagnostic
from softswitch.frontend.preprocess import PREDEFINED
from softswitch.targets import bmv2_cfg, bmv2_limits

Check = Callable[[ir.Program], list[Diagnostic]]


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    summary: str
    defines: Mapping[str, str]  # the macros the target predefines, as p4c predefines __TARGET_BMV2__
    checks: tuple[Check, ...] = ()

    def check(self, program: ir.Program) -> list[Diagnostic]:
        """Every refusal of the target's own checks, after the front end's."""
        return [d for check in self.checks for d in check(program)]


TARGETS: dict[str, Target] = {
    target.name: target
    for target in (
        Target("softswitch", "the embedded switch, p4reduce-switch (default)", PREDEFINED),
        Target(
            "bmv2",
            "bmv2's simple_switch as p4c compiles for it: the embedded subset less what p4c-bm2-ss refuses",
            {"__TARGET_BMV2__": "1"},
            (bmv2_cfg.check, bmv2_limits.check),
        ),
    )
}
DEFAULT = "softswitch"
