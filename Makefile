# p4reduce — lab conventions of p4lang/tutorials: build/, logs/, pcaps/.
#   make install   create .venv (and, as root, install Debian packages); idempotent
#   make build     compile p4src/ with p4reduce-p4c (always, and again with bmv2's limits) and p4c (when on PATH with the bmv2 back end)
#   make demo      the main job: 4 workers all-reduce through the embedded switch
#   make switch    the embedded switch that controller/examples/loopback.yaml names, in the foreground
#   make torch-ddp  DDP training under torchrun on the p4reduce backend (own switch + controller); torch-fsdp: FSDP2
#   make test      the test suite
#   make lab       Mininet lab (root): WORKERS=4 SWITCH=soft|bmv2, or TOPO=mininet/topos/leafspine8.json [AGGREGATE_AT=root]
#   make bench     benchmarks
#   make asan      native code's tests under AddressSanitizer: the host engine's (asan-host) and the switch's C backend (asan-switch)
#   make fuzz      fuzz every native parser: the host engine's receive path (fuzz-host) and the switch's data plane (fuzz-switch);
#                  FUZZ_SECONDS per target (default 20)
#   make experiments  the performance report's experiments (root): CSV, PNG, TXT in $(OUT)
#                  one at a time: make exp-gloo | exp-workers | exp-loss | exp-switch | exp-hierarchy | exp-fairness | exp-aggregator; QUICK=1 for tiny sizes
#   make reliability  the reliability suite's long variants; figures in $(OUT)/reliability.jsonl
#   make test-python-backend  the switch, lab and protocol tests again with the Python backend
#   make stop      (root) remove what this checkout's interrupted labs or experiments left (.lab-state.json)
#   make clean     remove build/, logs/, pcaps/, results/

SHELL := /bin/bash
PYTHON_BASE ?= /usr/bin/python3
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
APT_PACKAGES := python3-venv python3-pip build-essential python3-dev clang mininet iproute2 ethtool tcpdump iputils-ping curl prometheus iperf3 sudo
BUILD := build
P4_MAIN := p4src/v1model/p4reduce.p4
P4_SOURCES := $(shell find p4src -name '*.p4' 2>/dev/null)
WORKERS ?= 4
SWITCH ?= soft
OUT ?= results
EXPERIMENTS := gloo workers loss switch hierarchy fairness aggregator
EXP_FLAGS := --out $(OUT) $(if $(QUICK),--quick)
NATIVE_SOURCES := $(wildcard hostlib/csrc/*.c hostlib/csrc/*.h)
PIP_LOG := $(VENV)/install.log
# pip's output goes to $(PIP_LOG); on failure its tail is shown
PIP_FAILED = { tail -30 $(PIP_LOG); echo "error: pip failed (the whole log: $(PIP_LOG))"; exit 1; }

FUZZ_SECONDS ?= 20
# The C backend's tests, for asan-switch: every program and packet loop test that builds C.
ASAN_TESTS := tests/executor tests/test_scenarios.py tests/tutorials tests/switch/test_switch_ports.py \
	tests/switch/test_switch_packet_io.py tests/hostlib/test_lanes.py
# What `make test` runs on the default (C) backend and test-python-backend runs again on the Python one.
BACKEND_TESTS := tests/switch tests/lab tests/hostlib/test_through_switch.py

.PHONY: install build demo switch torch-ddp torch-fsdp test lab bench stop clean lint experiments \
	asan asan-host asan-switch fuzz fuzz-host fuzz-switch test-python-backend reliability $(addprefix exp-,$(EXPERIMENTS))

install: $(VENV)/.installed $(VENV)/.native

$(VENV)/.installed: pyproject.toml setup.py
	@if [ "$$(id -u)" = 0 ]; then \
	  missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then echo "==> apt-get install$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi; \
	else \
	  for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo "note: Debian package $$p is missing; as root run: apt-get install $(APT_PACKAGES)"; done; \
	fi
	@# hostlib's native engine is C, compiled by pip install -e below (setup.py).
	@command -v cc >/dev/null && [ -f "$$($(PYTHON_BASE) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] \
	  || { echo "error: hostlib's native engine needs a C compiler and Python's headers; as root run: apt-get install build-essential python3-dev"; exit 1; }
	@# --system-site-packages: Debian's mininet module lives in dist-packages.
	@[ -x $(PY) ] || $(PYTHON_BASE) -m venv --system-site-packages $(VENV)
	@# pip's output goes to $(PIP_LOG), shown only when a step fails: a clean install prints a line per step.
	@echo "==> pip install (log: $(PIP_LOG))"; : > $(PIP_LOG)
	@$(PY) -m pip install --upgrade pip >>$(PIP_LOG) 2>&1 || $(PIP_FAILED)
	@$(PY) -m pip install torch==2.13.0 >>$(PIP_LOG) 2>&1 || $(PIP_FAILED)
	@$(PY) -m pip install -e '.[dev,torch,experiments]' >>$(PIP_LOG) 2>&1 || $(PIP_FAILED)
	@# The checkout itself on sys.path as well (mininet/, experiments/ and packages added later import at once).
	@$(PY) -c 'import pathlib, site; pathlib.Path(site.getsitepackages()[0], "p4reduce-checkout.pth").write_text("$(CURDIR)\n")'
	@# p4runtime-shell pins protobuf < 3.21: its own venv, for `p4reduce-ctl shell` and the interop tests.
	@echo "==> p4runtime-shell in .venv-p4rt"; bash scripts/p4runtime-shell.sh >>$(PIP_LOG) 2>&1 || $(PIP_FAILED)
	@touch $@

# The native engine again whenever its C sources change (pip install -e built it the first time).
$(VENV)/.native: $(NATIVE_SOURCES) setup.py $(VENV)/.installed
	$(PY) setup.py -q build_ext --inplace
	@touch $@

build: install
	@mkdir -p $(BUILD)
	$(BIN)/p4reduce-p4c $(P4_MAIN) -I p4src -o $(BUILD)/p4reduce.json --p4runtime-files $(BUILD)/p4reduce.p4info.txtpb
	@# what p4c's bmv2 back end would refuse fails here too, without p4c (docs/softswitch.md, Checking for bmv2)
	$(BIN)/p4reduce-p4c --target bmv2 -q $(P4_MAIN) -I p4src -o $(BUILD)/bmv2-check/p4reduce.json
	@# a p4c built with other back ends only (the Tofino one) is on PATH as p4c too: ask it for bmv2
	@if command -v p4c >/dev/null && p4c --help-targets 2>/dev/null | grep -q '^bmv2-v1model'; then \
	  mkdir -p $(BUILD)/bmv2 && p4c --target bmv2 --arch v1model -I p4src -o $(BUILD)/bmv2 \
	    --p4runtime-files $(BUILD)/bmv2/p4reduce.p4info.txtpb $(P4_MAIN); \
	else echo "no p4c with the bmv2 back end on PATH: skipped the bmv2 build (the embedded switch needs only build/p4reduce.json)"; fi

# The switch of controller/examples/loopback.yaml (P4Runtime 127.0.0.1:9559, DATA 127.0.0.1:20562): the
# daemon pushes build/p4reduce.json to it. METRICS=9101 serves its Prometheus metrics.
switch: build
	@echo "==> p4reduce-switch: P4Runtime 127.0.0.1:9559 (device 1), DATA 127.0.0.1:20562 (port 1); Ctrl-C stops it"
	$(BIN)/p4reduce-switch --no-p4 --device-id 1 --grpc-server-addr 127.0.0.1:9559 \
	  --udp-port 1@127.0.0.1:20562 --log-console $(if $(METRICS),--metrics $(METRICS))

demo: install
	$(PY) -m hostlib.demo

torch-ddp torch-fsdp: torch-%: install
	$(PY) -m hostlib.torch.launch --nproc-per-node $(WORKERS) examples/train_$*.py

test: install
	$(BIN)/pytest -q

test-python-backend: install
	P4REDUCE_SWITCH_BACKEND=python $(BIN)/pytest -q $(BACKEND_TESTS)

fuzz-switch: install
	$(PY) tests/fuzz/fuzz_switch.py --seconds $(FUZZ_SECONDS)

# Objects built with ASan need its runtime first in the process: the compiler's libasan, preloaded.
asan-switch: install
	P4REDUCE_SANITIZE=address P4REDUCE_CACHE_DIR=$(BUILD)/asan-cache ASAN_OPTIONS=detect_leaks=0 \
	  LD_PRELOAD=$$($${CC:-cc} -print-file-name=libasan.so) $(BIN)/pytest -q -p no:cacheprovider $(ASAN_TESTS)

bench: install
	$(PY) benchmarks/bench_pipeline.py
	$(PY) benchmarks/bench_switch.py
	$(PY) benchmarks/bench_hostlib.py
	$(PY) benchmarks/bench_allreduce.py
	$(PY) benchmarks/bench_ddp_overlap.py
	$(BIN)/p4reduce-bench --sizes 64K,1M --dtypes float32,int32 --drop-rate 0.01 --baseline gloo

reliability: install
	@mkdir -p $(OUT)
	P4REDUCE_LONG_TESTS=1 P4REDUCE_RELIABILITY_OUT=$(OUT)/reliability.jsonl $(BIN)/pytest -q tests/reliability

experiments: $(addprefix exp-,$(EXPERIMENTS))

$(addprefix exp-,$(EXPERIMENTS)): exp-%: install
	$(PY) -m experiments.$* $(EXP_FLAGS)

# TOPO=mininet/topos/leafspine8.json runs a topology file (WORKERS is then the file's);
# AGGREGATE_AT=root|SWITCH aggregates at one switch only (default: a tree of the switches).
lab: install
	$(PY) mininet/lab.py $(if $(TOPO),--topo $(TOPO),--workers $(WORKERS)) --switch $(SWITCH) \
	  $(if $(AGGREGATE_AT),--aggregate-at $(AGGREGATE_AT))

asan: asan-host asan-switch

fuzz: fuzz-host fuzz-switch

asan-host: install
	bash scripts/native-checks.sh asan

fuzz-host: install
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/native-checks.sh fuzz

lint: install
	$(BIN)/ruff check softswitch controller hostlib mininet tests benchmarks experiments examples

clean:
	rm -rf $(BUILD) logs pcaps results

stop: install
	$(PY) mininet/lab.py --clean
