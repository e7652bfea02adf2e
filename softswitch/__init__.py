"""p4reduce-switch: an embedded P4_16 (v1model) target in pure Python.

Front end (`frontend.compile_file`) → typed IR (`ir`) → P4Info (`p4info`)
and compiled pipeline (`executor.Pipeline`), served over P4Runtime by
`p4reduce-switch` (`daemon`). It runs any program within its subset and
refuses, with a clear error, anything outside it.
"""
