"""`cepc sim`: the compiled Verilog in Verilator under the cocotb bench, against the reference.

Slow (each distinct design is a C++ build); builds are cached under build/sim/.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cepc.cli import main
from cepc.lang.check import check
from cepc.lang.parse import parse, parse_file
from cepc.nfa.lower import lower
from cepc.simulate import SimOptions, simulate

import patterns as pt
from oracle import expected_rows

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def read(path: Path) -> list[list[str]]:
    with open(path, newline="") as fh:
        return list(csv.reader(fh))[1:]


EXAMPLES = ["marathon/marathon.sql", "network/network.sql", "mshape/mshape.sql", "finance/finance0/finance0.sql",
            "finance/finance2/finance2.sql", "finance/finance5/finance5.sql"]


# every example with the partitioner cepc picks (a block-RAM table); Woods' pipeline partitioner runs
# the examples in test_sim_ghdl (finance0 and finance2 on generated trades, on both back ends) and
# test_host_run (marathon, through the board top)
@pytest.mark.parametrize("example", EXAMPLES)
def test_examples_simulate_to_their_expected_files(example, tmp_path):
    query = ROOT / "examples" / example
    out = tmp_path / "sim.csv"
    assert main(["sim", str(query), "--events", str(query.parent / "events.csv"), "-o", str(out),
                 "--compare", str(query.parent / "expected.csv"), "--bus-width", "24", "--packet-tuples", "5",
                 "--stall", "0.3", "--backpressure", "0.5"]) == 0
    assert read(out) == read(query.parent / "expected.csv")


@pytest.mark.parametrize("ways", ["2", "1"])
def test_fewer_ways_simulate_to_the_expected_file(ways, tmp_path):
    # --ways: finance0's table with two entries a bucket, or one, on its example's trades
    query = ROOT / "examples" / "finance" / "finance0" / "finance0.sql"
    out = tmp_path / "sim.csv"
    assert main(["sim", str(query), "--events", str(query.parent / "events.csv"), "-o", str(out), "--ways", ways,
                 "--compare", str(query.parent / "expected.csv"), "--bus-width", "256", "--partitions", "64",
                 "--stall", "0.2", "--backpressure", "0.3"]) == 0
    assert read(out) == read(query.parent / "expected.csv")


@pytest.mark.parametrize("example", [e for e in EXAMPLES if "finance" in e or "mshape" in e])
def test_market_examples_on_generated_trades_match_the_reference(example):
    # Hirzel's queries on 4,000 generated trades over 20 symbols: rows and measures, stalls, backpressure
    from cepc.gen import generate

    checked = check(parse_file(ROOT / "examples" / example))
    frame = generate(checked, 4000, 20, seed=3)
    want = expected_rows(checked, frame)
    assert len(want) >= 20
    result = simulate(checked, frame, SimOptions(bus_width=24, stall=0.2, backpressure=0.3, seed=3,
                                                 build_root=ROOT / "build" / "sim"))
    assert result.counters["dropped"] == 0 and result.counters["overflow"] == 0
    assert result.rows == want


@pytest.mark.parametrize("example", ["mshape/mshape.sql", "finance/finance2/finance2.sql"])
def test_the_three_cycle_update_in_verilog_matches_the_reference(example):
    # --update-cycles 3 (the Verilog's): the largest core, and a table whose entries go stale; a
    # tuple a cycle from a 256-bit bus over 6 symbols, so that a tuple often waits behind its
    # bucket's two before it
    from cepc.gen import generate

    checked = check(parse_file(ROOT / "examples" / example))
    frame = generate(checked, 3000, 6, seed=5)
    want = expected_rows(checked, frame)
    assert len(want) >= 20
    result = simulate(checked, frame, SimOptions(bus_width=256, stall=0.1, backpressure=0.3, seed=5, update_cycles="3",
                                                 build_root=ROOT / "build" / "sim"))
    assert result.counters["dropped"] == 0 and result.counters["overflow"] == 0
    assert result.rows == want


CORPUS = [  # seed, bus width, tuples per packet, AFTER MATCH; each with the default (table) partitioner
    (1, 8, 1, "CONTINUE"), (2, 64, 7, "SKIP PAST LAST ROW"), (3, 512, 100, "CONTINUE"),
    (4, 24, 13, "SKIP PAST LAST ROW"), (5, 40, 64, "SKIP PAST LAST ROW"), (6, 128, 3, "CONTINUE"),
]
# and one with Woods' pipeline partitioner (test_sim_ghdl's corpus runs buses of 8, 64 and 512 bits on
# both back ends, one of them on the pipeline; CI's time)
CASES = [(*c, "auto") for c in CORPUS if c[0] != 2] + [(*CORPUS[1], "pipeline")]


def corpus_case(seed: int, after: str, n: int = 3000):
    """A seeded random pattern of three or more states that matches often, but not at every tuple,
    on a seeded random keyed stream."""
    rng = random.Random(seed)
    stream = np.random.default_rng(seed)
    frame = pd.DataFrame({"t": np.arange(n, dtype=np.int64), "k": stream.integers(0, 10, n),
                          "c": np.array(list(pt.LETTERS), dtype=object)[stream.integers(0, 4, n)]})
    while True:
        pattern = pt.random_pattern(rng)
        checked = check(parse(pt.query_text(pattern, after, partition=True)))
        want = expected_rows(checked, frame)
        if 100 <= len(want) <= n // 3 and lower(checked).queries[0].nfa.n_states >= 3:
            return checked, frame, want


@pytest.mark.parametrize("seed,bus_width,packet_tuples,after,partitioner", CASES)
def test_random_corpus_matches_the_reference(seed, bus_width, packet_tuples, after, partitioner):
    checked, frame, want = corpus_case(seed, after)
    partitions = 12 if partitioner == "pipeline" else None  # auto: a direct-indexed table for k UINT8
    result = simulate(checked, frame, SimOptions(bus_width=bus_width, partitions=partitions,
                                                 partitioner=partitioner, packet_tuples=packet_tuples,
                                                 stall=0.2, backpressure=0.4, seed=seed,
                                                 build_root=ROOT / "build" / "sim"))
    assert result.counters["dropped"] == 0 and result.counters["tuples_in"] == len(frame)
    assert result.rows == want, checked.source.text


# (partial-match registers on both back ends: test_sim_ghdl's test_random_aggregate_corpus_is_the_same_on_both_back_ends_and_the_reference)


@pytest.mark.parametrize("partitioner", ["table", "pipeline"])
def test_full_partitioner_accounts_for_every_tuple(partitioner):
    text = pt.schema() + f"PARTITION BY k PATTERN (P0 P3 P3 P2) DEFINE {pt.defines()};"
    checked = check(parse(text))
    n = 400
    frame = pd.DataFrame({"t": np.arange(n, dtype=np.int64), "k": np.arange(n, dtype=np.int64) % 40,
                          "c": np.array(["a"] * n, dtype=object)})
    result = simulate(checked, frame, SimOptions(bus_width=32, partitions=4, partitioner=partitioner,
                                                 backpressure=0.3, build_root=ROOT / "build" / "sim"))
    c = result.counters
    assert c["tuples_in"] == n
    assert c["dropped"] > 0 and c["dropped"] == len(result.spilled)
    assert all(s["c"] == "a" and 0 <= s["k"] < 40 for s in result.spilled)


def test_compare_reports_the_first_difference(tmp_path, capsys):
    query = ROOT / "examples" / "marathon" / "marathon.sql"
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("runner,seq,query\n2,3,q0\n4,12,q0\n")
    # (the options of test_examples_simulate_to_their_expected_files: its build, not one of its own)
    assert main(["sim", str(query), "--events", str(query.parent / "events.csv"), "-o", str(tmp_path / "s.csv"),
                 "--compare", str(wrong), "--bus-width", "24", "--packet-tuples", "5", "--stall", "0.3",
                 "--backpressure", "0.5"]) == 1
    err = capsys.readouterr().err
    assert "differ at row 2 of 2" in err
    assert "simulation: 4,13,q0" in err and "wrong.csv: 4,12,q0" in err
    assert "> seq 12: time=71, checkpoint=Staten Island, runner=4, speed=13" in err


def test_waves(tmp_path):
    query = ROOT / "examples" / "marathon" / "marathon.sql"
    waves = tmp_path / "w.fst"
    assert main(["sim", str(query), "--events", str(query.parent / "events.csv"), "-o", str(tmp_path / "s.csv"),
                 "--waves", str(waves)]) == 0
    assert waves.read_bytes()[:1] == b"\x00" and waves.stat().st_size > 1000  # an FST header block


def test_only_the_ports_are_visible_to_the_bench(tmp_path):
    # The bench drives and reads the top's ports alone. cocotb's runner makes every signal public
    # (--public-flat-rw): tens of thousands on a partial-match design, each in Verilator's symbol
    # table and kept from its optimisations; finance2's C++ took 36 s, against 5.5 s with the ports.
    import re

    checked = check(parse(pt.schema() + f"PARTITION BY k PATTERN (P0 P1+ P2) DEFINE {pt.defines()};"))
    n = 300
    stream = np.random.default_rng(5)
    frame = pd.DataFrame({"t": np.arange(n, dtype=np.int64), "k": stream.integers(0, 6, n),
                          "c": np.array(list(pt.LETTERS), dtype=object)[stream.integers(0, 4, n)]})
    result = simulate(checked, frame, SimOptions(bus_width=16, partitions=8, build_root=tmp_path))
    want = expected_rows(checked, frame)
    assert want and result.rows == want
    [work] = tmp_path.iterdir()
    header = re.search(r"^module cepc_top\((.*)\);", (work / "cepc_top.v").read_text(), re.M)
    ports = {port.strip() for port in header.group(1).split(",")}
    symbols = "".join(f.read_text() for f in (work / "obj").glob("Vtop__Syms*.cpp"))
    assert set(re.findall(r'varInsert\("(\w+)"', symbols)) == ports


def test_checked_query_file_is_required(tmp_path, capsys):
    q = tmp_path / "q.sql"
    q.write_text("CREATE STREAM s (x UINT8); PATTERN (A) DEFINE A AS y = 1;")
    ev = tmp_path / "e.csv"
    ev.write_text("x\n1\n")
    assert main(["sim", str(q), "--events", str(ev), "-o", str(tmp_path / "s.csv")]) == 1
    assert "unknown field 'y'" in capsys.readouterr().err


def test_parse_file_roundtrip_for_sim_inputs():
    # the bench packs with the same TuplePlan the sidecar describes
    from cepc.nfa.lower import lower

    checked = check(parse_file(ROOT / "examples" / "marathon" / "marathon.sql"))
    tup = lower(checked).tuple
    row = {"time": 2**64 - 1, "checkpoint": "Bronx", "runner": 65535, "speed": 7}
    assert tup.unpack(int.from_bytes(tup.to_bytes(row), "little")) == row


def _simulate_one(args):
    text, seed, root = args
    checked = check(parse(text))
    frame, want = _small_case(checked, seed)
    result = simulate(checked, frame, SimOptions(bus_width=32, partitions=8, partitioner="pipeline",
                                                 seed=seed, build_root=Path(root)))
    return result.rows == want, result.counters["tuples_in"], len(frame)


def _small_case(checked, seed):
    stream = np.random.default_rng(seed)
    n = 200 + 50 * seed  # a different length per run: one run's files must not leak into the other
    frame = pd.DataFrame({"t": np.arange(n, dtype=np.int64), "k": stream.integers(0, 5, n),
                          "c": np.array(list(pt.LETTERS), dtype=object)[stream.integers(0, 4, n)]})
    return frame, expected_rows(checked, frame)


def test_concurrent_runs_of_one_design_do_not_share_files(tmp_path):
    # two `cepc sim` processes, one design, one build directory: each gets its own result
    import multiprocessing

    text = pt.schema() + f"PARTITION BY k PATTERN (P0 P1+ P2) DEFINE {pt.defines()};"
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.map(_simulate_one, [(text, seed, str(tmp_path)) for seed in (1, 2)])
    for same, tuples_in, n in results:
        assert same and tuples_in == n


# --automaton dfa (both encodings) and --no-decoder in Verilator: the network example's two queries on
# generated packets, the rows of the reference
@pytest.mark.parametrize("options", [{"automaton": "dfa", "dfa_encoding": "onehot"},
                                     {"automaton": "dfa", "dfa_encoding": "binary"}, {"decoder": False}])
def test_dfa_and_no_decoder_simulate_to_the_reference(options):
    from cepc.gen import generate

    checked = check(parse_file(ROOT / "examples" / "network" / "network.sql"))
    frame = generate(checked, 3000, 30, seed=5)
    want = expected_rows(checked, frame)
    assert want
    # (64 partitions, not the 32,768 cepc gives network's tables: their memories took most of the build)
    result = simulate(checked, frame, SimOptions(bus_width=40, partitions=64, stall=0.2, backpressure=0.3, seed=5,
                                                 build_root=ROOT / "build" / "sim", **options))
    assert result.rows == want
    assert result.counters["dropped"] == 0
