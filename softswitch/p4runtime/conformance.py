"""Which answers the server gives where bmv2 and the P4Runtime specification disagree.

Clients are written and tested against bmv2's `simple_switch_grpc` (its
P4Runtime server is PI), so the embedded switch answers as PI does wherever
a client can tell the two apart. Where PI's answer breaks a rule the
specification states plainly (a config that cannot run is accepted, a
RECONCILE_AND_COMMIT that fails and blocks every later push, ...), the
default keeps the specification's answer; `BMV2` reproduces PI's there too,
so that a client can be tested against every answer bmv2 gives
(docs/softswitch.md lists both columns).
"""

from __future__ import annotations

import enum


class Conformance(enum.Enum):
    SPEC = "spec"  # PI's answers where the specification leaves room, the specification's elsewhere
    BMV2 = "bmv2"  # PI's answers everywhere, also where they break the specification

    @property
    def bmv2(self) -> bool:
        return self is Conformance.BMV2
