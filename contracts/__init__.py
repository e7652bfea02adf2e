"""The contracts between p4reduce's rooms: the wire protocol and the job API.

`contracts.protocol` mirrors p4src/common/constants.p4 (docs/protocol.md is
the specification); `contracts.jobapi_pb2*` are the generated stubs of
contracts/jobapi.proto, spoken between workers, the CLI and the controller.
"""
