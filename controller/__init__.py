"""p4reduce controller: the P4Runtime control plane that turns a p4reduce switch into a service.

It speaks only P4Runtime (through finsy), so the same code drives bmv2's
simple_switch_grpc, the embedded p4reduce-switch and a Tofino with a
P4Runtime server. See docs/controller.md.
"""
