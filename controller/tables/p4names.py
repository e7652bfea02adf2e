"""The P4 control names the program's P4Info prefixes every object with (docs/protocol.md, *Names*).

v1model's own headers declare control *types* named Ingress and Egress, so
the program's controls are MyIngress and MyEgress; every table, action and
counter name the controller resolves starts with one of these.
"""

INGRESS = "MyIngress"
EGRESS = "MyEgress"
