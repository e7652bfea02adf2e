"""Run by the p4runtime-shell venv's Python (not by pytest): one scripted shell session.

    python p4rt_shell_session.py ADDR DEVICE_ID P4INFO DEVICE_CONFIG SPEC_JSON

SPEC_JSON names a table entry and a multicast group to write:
{"table": ..., "match": {...}, "action": ..., "params": {...}, "group": N, "replicas": [[port, rid], ...]}.
Prints one JSON object: the tables, what was read back, and the error of a duplicate insert.
"""

import json
import sys

import p4runtime_sh.shell as sh
from p4runtime_sh.context import P4Type
from p4runtime_sh.p4runtime import P4RuntimeWriteException

address, device_id, p4info, device_config, spec_text = sys.argv[1:]
spec = json.loads(spec_text)
sh.setup(
    device_id=int(device_id),
    grpc_addr=address,
    election_id=(0, 1),
    config=sh.FwdPipeConfig(p4info, device_config),
    verbose=False,
)
try:
    tables = sorted(name for name, _ in sh.context.get_objs(P4Type.table))
    entry = sh.TableEntry(spec["table"])(action=spec["action"])
    for name, value in spec["match"].items():
        entry.match[name] = value
    for name, value in spec["params"].items():
        entry.action[name] = value
    entry.insert()
    try:
        entry.insert()
        duplicate = None
    except P4RuntimeWriteException as error:
        duplicate = [(index, e.canonical_code) for index, e in error.errors]
    read_back = [
        [m.exact.value.hex() for m in e.msg().match] + [p.value.hex() for p in e.msg().action.action.params]
        for e in sh.TableEntry(spec["table"]).read()
    ]
    group = sh.MulticastGroupEntry(spec["group"])
    for port, rid in spec["replicas"]:
        group.add(port, rid)
    group.insert()
    groups = [
        [[r.egress_port, r.instance] for r in g.msg().multicast_group_entry.replicas]
        for g in sh.MulticastGroupEntry(spec["group"]).read()
    ]
    print(json.dumps({"tables": tables, "entries": read_back, "duplicate": duplicate, "groups": groups}))
finally:
    sh.teardown()
