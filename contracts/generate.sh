#!/usr/bin/env bash
# Regenerate the job API stubs. The generated code is committed because
# grpcio-tools 1.85 needs protobuf >= 7 while finsy needs protobuf < 7:
# these stubs were made with grpcio-tools 1.75.1 (protoc 31.1), whose code
# runs on any protobuf 6.31+ and grpcio 1.75.1+.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(mktemp -d)/gen
python3 -m venv "$venv"
"$venv/bin/pip" install -q "grpcio-tools==1.75.1"
"$venv/bin/python" -m grpc_tools.protoc -I. --python_out=. --pyi_out=. --grpc_python_out=. contracts/jobapi.proto
