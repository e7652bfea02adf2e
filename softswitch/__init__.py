"""p4reduce-switch: an embedded P4_16 (v1model) target.

Front end (`frontend.compile_file`) → typed IR (`ir`) → P4Info (`p4info`)
and a pipeline from a backend (`backends.loader`), served over P4Runtime
(`p4runtime`) with ports and a packet loop (`dataplane`) by
`p4reduce-switch` (`daemon`). It runs any program within its subset and
refuses, with a clear error, anything outside it. docs/softswitch.md maps
the rooms.
"""
