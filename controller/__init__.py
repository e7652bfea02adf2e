"""p4reduce controller: the P4Runtime control plane that turns a p4reduce switch into a service.

It speaks only P4Runtime (through finsy), so the same code drives bmv2's
simple_switch_grpc, the embedded p4reduce-switch and a Tofino with a
P4Runtime server. See docs/controller.md.
"""

import os as _os

# gRPC's C core reads GRPC_VERBOSITY when gRPC is first imported, and prints raw lines (E1123 ...
# add_port.cc ...) beside the one-line errors of p4reduce-ctl and the daemon's log: silence it before
# any module of the package imports grpc. GRPC_VERBOSITY=debug in the environment still wins.
_os.environ.setdefault("GRPC_VERBOSITY", "NONE")
