"""One class per P4 object the controller manages, named as in the P4Info (docs/protocol.md).

Each class turns controller-level facts (a host, a job) into finsy entities
for its table and decodes what the switch reads back; none of them talks
to the switch by itself, so a whole job is written as one batch.
"""
