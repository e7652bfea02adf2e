#!/usr/bin/env bash
# Create (once) an isolated virtualenv holding p4runtime-shell, the P4Runtime
# project's interactive client, and print its location.
#
# p4runtime-shell pins protobuf < 3.21 and an old IPython, which cannot live
# next to the project's own protobuf 6 (finsy), so it gets its own venv and
# is never imported by the project. Idempotent: a complete venv is reused.
#
#   scripts/p4runtime-shell.sh            # create/verify, print the venv path
#   $VENV/bin/python -m p4runtime_sh --grpc-addr 127.0.0.1:9559 --device-id 1 \
#       --election-id 0,1 --config build/p4reduce.p4info.txtpb,build/p4reduce.json
#
# Environment: P4RT_VENV (default: <repo>/.venv-p4rt), PYTHON (default: /usr/bin/python3).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${P4RT_VENV:-$repo/.venv-p4rt}"
python="${PYTHON:-/usr/bin/python3}"

# The generated code in the p4runtime 1.4.1 wheel predates protobuf's C
# implementation checks; the pure-Python implementation runs it everywhere.
export PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import p4runtime_sh.shell' >/dev/null 2>&1; then
    echo "$venv"
    exit 0
fi

echo "creating $venv for p4runtime-shell" >&2
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >&2
"$venv/bin/python" -m pip install -q \
    "p4runtime-shell==0.0.6" "p4runtime==1.4.1" "protobuf==3.20.3" "grpcio>=1.59" >&2
"$venv/bin/python" -c 'import p4runtime_sh.shell' >&2
echo "$venv"
