"""`cepc sim`: the Verilog on Verilator and the VHDL on GHDL, under one cocotb bench, against each other
and against the reference matcher.

The two back ends share no HDL: Amaranth → Yosys writes the Verilog, cepc's templates the VHDL. Each
differential case runs both and requires identical match rows, counters and spilled tuples, and the
reference matcher's rows. Slow (each distinct Verilog design is a C++ build, cached under build/sim/);
every test uses its own design options, so parallel workers never share a build directory.
"""

from __future__ import annotations

import csv
import os
import random
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cepc import events
from cepc.cli import main
from cepc.lang.check import check
from cepc.lang.parse import parse, parse_file
from cepc.nfa import reference
from cepc.nfa.lower import lower
from cepc.simulate import SimOptions, SimResult, simulate

import patterns as pt
from hwsim import unused_elaboratables
from oracle import expected_rows

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "sim"
MARATHON = ROOT / "examples" / "marathon" / "marathon.sql"
pytestmark = pytest.mark.slow
needs_ghdl = pytest.mark.skipif(shutil.which("ghdl") is None and os.environ.get("CI") != "true",
                                reason="GHDL is not installed (make setup installs it)")


def read(path: Path) -> list[list[str]]:
    with open(path, newline="") as fh:
        return list(csv.reader(fh))[1:]


def reference_rows(checked, frame: pd.DataFrame) -> list[list[str]]:
    return events.match_rows(checked, frame, reference.Matcher(checked).run(frame))


def run(checked, frame, simulator: str, packets=None, **options) -> SimResult:
    return simulate(checked, frame, SimOptions(simulator=simulator, build_root=BUILD, **options), packets)


def run_both(checked, frame, tmp_path: Path, packets=None, **options) -> SimResult:
    """Verilator (Verilog) and GHDL (VHDL) on the same stimulus must agree on everything they report:
    the match files, byte for byte, the counters and the spilled tuples (and with ``timing=True`` the
    cycle of every packet's last beat taken and of every record given)."""
    results = {}
    for simulator in ("verilator", "ghdl"):
        results[simulator] = run(checked, frame, simulator, packets, **options)
        events.write_matches(tmp_path / f"{simulator}.csv", checked, results[simulator].rows)
    verilog, vhdl = results["verilator"], results["ghdl"]
    assert (tmp_path / "ghdl.csv").read_bytes() == (tmp_path / "verilator.csv").read_bytes()
    assert vhdl.counters == verilog.counters
    assert vhdl.spilled == verilog.spilled
    if options.get("timing"):
        assert vhdl.timing["last_beats"] == verilog.timing["last_beats"]
        assert vhdl.timing["records"] == verilog.timing["records"]
    return vhdl


def keyed_frame(letters: str, keys: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"t": np.arange(len(letters), dtype=np.int64), "k": np.asarray(keys, dtype=np.int64),
                         "c": np.array(list(letters), dtype=object)})


# --- both back ends ---------------------------------------------------------------------------


# (test_sim_verilator.py runs every example, with these options, on Verilator)
@needs_ghdl
@pytest.mark.parametrize("example", ["marathon/marathon.sql", "network/network.sql", "mshape/mshape.sql",
                                     "finance/finance0/finance0.sql", "finance/finance2/finance2.sql",
                                     "finance/finance5/finance5.sql"])
def test_examples_simulate_to_their_expected_files(example, tmp_path):
    query = ROOT / "examples" / example
    out = tmp_path / "sim.csv"
    assert main(["sim", str(query), "--events", str(query.parent / "events.csv"), "-o", str(out),
                 "--compare", str(query.parent / "expected.csv"), "--bus-width", "24", "--packet-tuples", "5",
                 "--stall", "0.3", "--backpressure", "0.5", "--simulator", "ghdl"]) == 0
    assert read(out) == read(query.parent / "expected.csv")


@needs_ghdl
@pytest.mark.parametrize("seed, partitioner", [(1, "table"), (2, "pipeline"), (3, "table")])
def test_random_corpus_is_the_same_on_both_back_ends_and_the_reference(seed, partitioner, tmp_path):
    # both AFTER MATCH modes, buses of 8, 64 and 512 bits, packets of 1, 7 and 100 tuples,
    # with gaps in s_tvalid and backpressure on m_tready and spill_tready
    rng = np.random.default_rng(seed)
    after = "CONTINUE" if seed % 2 else "SKIP PAST LAST ROW"
    pattern = ["(P0 P3* P2 | P1 P1+ .)", "(P0 (P2 | P3){1,3} P1?)", "(. P2 P3* P0)"][seed - 1]
    text = pt.schema() + f"PARTITION BY k AFTER MATCH {after} PATTERN {pattern} DEFINE {pt.defines()};"
    checked = check(parse(text))
    n = 3000
    frame = pd.DataFrame({"t": np.arange(n, dtype=np.int64), "k": rng.integers(0, 10, n),
                          "c": np.array(list(pt.LETTERS), dtype=object)[rng.integers(0, 4, n)]})
    # the table hashed (12 entries asked: 4 buckets of 4 ways for 10 keys) or the pipeline
    result = run_both(checked, frame, tmp_path, bus_width=[8, 64, 512][seed - 1], partitions=12,
                      partitioner=partitioner, packet_tuples=[1, 7, 100][seed - 1], stall=0.2, backpressure=0.4,
                      seed=seed)
    assert result.counters["dropped"] == 0
    want = reference_rows(checked, frame)
    assert result.rows == want and len(want) > 100


# --- partial-match registers: aggregates in DEFINE, MEASURES, WITHIN, the length bound ---------------


@needs_ghdl
@pytest.mark.parametrize("seed, after, within, partitions, partitioner, update_cycles, bus_width, hazards", [
    (21, "SKIP PAST LAST ROW", None, None, "table", "1", 64, "auto"),  # direct-indexed (k UINT8)
    (22, "CONTINUE", 8, 8, "pipeline", "auto", 64, "auto"),
    # hashed: tags, and expiry beside them, with a tuple a cycle, the one-cycle update with --hazards stall
    # (six keys: tuples wait behind their bucket's, to the cycle); the two-cycle update on both back ends:
    # test_two_cycle_update_is_cycle_exact_on_both_back_ends, on four examples (CI's time)
    (23, "SKIP PAST LAST ROW", 20, 16, "table", "1", 128, "stall"),
])
def test_random_aggregate_corpus_is_the_same_on_both_back_ends_and_the_reference(
        seed, after, within, partitions, partitioner, update_cycles, bus_width, hazards, tmp_path):
    # every aggregate in DEFINE (over the predecessor's registers), every kind of measure, WITHIN
    import test_hw_aggregates as agg

    checked, frame, want = agg.random_case(seed, after, within, 1500, 500)
    result = run_both(checked, frame, tmp_path, bus_width=bus_width, partitions=partitions, partitioner=partitioner,
                      update_cycles=update_cycles, hazards=hazards, stall=0.1, backpressure=0.3, seed=seed, timing=True)
    assert result.hazards == ("stall" if hazards == "stall" else "forward")
    # (auto: the three-cycle update for the table, as the queries have partial-match registers)
    assert result.update_cycles == (3 if partitioner == "table" and update_cycles != "1" else 1)
    assert result.counters["dropped"] == 0 and result.counters["overflow"] == 0
    assert result.rows == want, checked.source.text


@needs_ghdl
# (the two-cycle table: test_within_eviction_is_exact_across_zero_and_for_windows_wider_than_the_time, and the
# two-cycle update's own tests below; CI's time)
@pytest.mark.parametrize("partitioner, update_cycles", [("table", "1"), ("pipeline", "auto")])
def test_partial_matches_dropped_at_the_length_bound_are_counted_the_same_on_both_back_ends(partitioner, update_cycles,
                                                                                            tmp_path):
    # P0 P1+ P2 with --max-match-length 3: a longer run of P1 outgrows the count register
    import test_hw_aggregates as agg

    from cepc.lang import ast

    pattern = ast.Seq((ast.Var("P0"), ast.Repeat(ast.Var("R"), 1, None), ast.Var("P2")))
    checked = check(parse(agg.query(pattern, "CONTINUE", None)))
    rng = random.Random(5)
    frame = agg.stream([(rng.randrange(3), rng.randrange(2), rng.randrange(256), rng.randrange(-128, 128), 1)
                        for _ in range(800)])
    result = run_both(checked, frame, tmp_path, bus_width=32, partitions=None if partitioner == "table" else 4,
                      partitioner=partitioner, update_cycles=update_cycles, max_length=3, backpressure=0.2, seed=5,
                      timing=True)
    assert result.update_cycles == (2 if update_cycles == "2" else 1)
    assert result.counters["overflow"] > 0


WINDOWS = ROOT / "tests" / "fixtures" / "vhdl" / "windows.sql"


@needs_ghdl
@pytest.mark.parametrize("partitioner, update_cycles", [("table", "1"), ("table", "2"), ("table", "3"),
                                                      ("pipeline", "auto")])
def test_within_eviction_is_exact_across_zero_and_for_windows_wider_than_the_time(partitioner, update_cycles,
                                                                                  tmp_path):
    # WITHIN evicts a partition past its expiry (its last time plus the window, compared unsigned):
    # a signed time crossing zero must keep its order (t = -5 then -1 is 4 apart, not 510), and a
    # window wider than the time field's range must never expire an entry (250 + 300 must not wrap)
    checked = check(parse_file(WINDOWS))
    rows = [(-5, 250, -1), (-1, 251, 1), (3, 252, -1), (4, 253, 1), (20, 254, -1), (35, 255, 1)]
    rng = np.random.default_rng(9)
    frame = pd.DataFrame({"t": [r[0] for r in rows], "u": [r[1] for r in rows], "k": [0] * len(rows),
                          "d": [r[2] for r in rows]})
    # and the same on a busier stream: times rising through zero over a few keys
    n = 400
    busy = pd.DataFrame({"t": np.linspace(-128, 127, n).astype(np.int64), "u": np.linspace(0, 255, n).astype(np.int64),
                         "k": rng.integers(1, 5, n), "d": rng.integers(-3, 3, n)})
    for stream_ in (frame, busy):
        want = expected_rows(checked, stream_)
        # (a 32-bit bus: a tuple a cycle, so with the two-cycle update tuples of a bucket of either
        # query's table back to back wait a cycle)
        result = run_both(checked, stream_, tmp_path, bus_width=32, partitions=None if partitioner == "table" else 6,
                          partitioner=partitioner, update_cycles=update_cycles, seed=9, timing=True)
        assert result.counters["dropped"] == 0
        assert result.rows == want
    # the first stream: signed_time matches twice (the pair at 20 and 35 is outside its window),
    # wide_window three times
    queries = [row[2] for row in expected_rows(checked, frame)]
    assert queries.count("signed_time") == 2 and queries.count("wide_window") == 3


@needs_ghdl
@pytest.mark.parametrize("partitioner, update_cycles", [("table", "1"), ("pipeline", "auto")])  # (as above)
def test_partial_match_corners_are_the_same_on_both_back_ends_and_the_reference(partitioner, update_cycles, tmp_path):
    # WITHIN without aggregates in DEFINE (the latest start wins; no MEASURES) beside signed
    # registers, a widening SUM, a CHAR register and measures that truncate and sign-extend
    from cepc.gen import generate

    checked = check(parse_file(ROOT / "tests" / "fixtures" / "vhdl" / "partial_matches.sql"))
    frame = generate(checked, 2000, 6, seed=7)
    want = expected_rows(checked, frame)
    assert {row[2] for row in want} == {"latest", "signed regs"}, "both queries match"
    result = run_both(checked, frame, tmp_path, bus_width=32, partitions=None if partitioner == "table" else 6,
                      partitioner=partitioner, update_cycles=update_cycles, stall=0.1, backpressure=0.3, seed=7,
                      timing=True)
    assert result.update_cycles == (2 if update_cycles == "2" else 1)
    assert result.counters["dropped"] == 0 and result.counters["overflow"] == 0
    assert result.rows == want


@needs_ghdl
@pytest.mark.parametrize("example, partitioner", [
    ("finance/finance0/finance0.sql", "pipeline"), ("finance/finance2/finance2.sql", "pipeline"),
    ("finance/finance5/finance5.sql", "table"),
])  # (mshape on both back ends: the two-cycle update's cycle-exact test below, for CI's time)
def test_market_examples_on_generated_trades_are_the_same_on_both_back_ends(example, partitioner, tmp_path):
    # Hirzel's queries on 1,500 generated trades over 12 symbols: rows with their measures (on the table
    # with the one-cycle update: test_two_cycle_update_is_cycle_exact_on_both_back_ends has the two-cycle)
    from cepc.gen import generate

    checked = check(parse_file(ROOT / "examples" / example))
    frame = generate(checked, 1500, 12, seed=4)
    want = expected_rows(checked, frame)
    assert len(want) >= 5
    result = run_both(checked, frame, tmp_path, bus_width=24, partitions=None if partitioner == "table" else 12,
                      partitioner=partitioner, update_cycles="1" if partitioner == "table" else "auto", stall=0.2,
                      backpressure=0.3, seed=4)
    assert result.counters["dropped"] == 0 and result.counters["overflow"] == 0
    assert result.rows == want


@needs_ghdl
@pytest.mark.parametrize("partitions, partitioner, update_cycles, bus_width",
                         [(4, "table", "auto", 32), (4, "table", "2", 128), (1, "pipeline", "auto", 32)])
def test_full_partitioner_spills_the_same_tuples_on_both_back_ends(partitions, partitioner, update_cycles, bus_width,
                                                                   tmp_path):
    # (with the two-cycle update on a 128-bit bus, a tuple a cycle: keys in 2 buckets, often back to back)
    text = pt.schema() + f"PARTITION BY k PATTERN (P0 P3 P3 P2) DEFINE {pt.defines()};"
    checked = check(parse(text))
    n = 400
    frame = pd.DataFrame({"t": np.arange(n, dtype=np.int64), "k": np.arange(n, dtype=np.int64) % 40,
                          "c": np.array(["a"] * n, dtype=object)})
    result = run_both(checked, frame, tmp_path, bus_width=bus_width, partitions=partitions, partitioner=partitioner,
                      update_cycles=update_cycles, backpressure=0.3, timing=True)
    c = result.counters
    assert c["tuples_in"] == n
    assert c["dropped"] > 0 and c["dropped"] == len(result.spilled)
    assert all(s["c"] == "a" and 0 <= s["k"] < 40 for s in result.spilled)


@needs_ghdl
def test_several_queries_share_framing_and_decoder_on_both_back_ends(tmp_path):
    # keyed and unkeyed queries, a two-field key, both AFTER MATCH modes: records interleave round-robin
    text = pt.schema() + f"""
        NAME first PARTITION BY k PATTERN (P0 P3* P2) DEFINE {pt.defines()};
        NAME second AFTER MATCH CONTINUE PATTERN (P1 P1) DEFINE {pt.defines()};
        NAME third PARTITION BY k, c AFTER MATCH CONTINUE PATTERN (P3 .) DEFINE {pt.defines()};"""
    checked = check(parse(text))
    rng = np.random.default_rng(7)
    n = 1500
    frame = pd.DataFrame({"t": np.arange(n, dtype=np.int64), "k": rng.integers(0, 6, n),
                          "c": np.array(list(pt.LETTERS), dtype=object)[rng.integers(0, 4, n)]})
    result = run_both(checked, frame, tmp_path, bus_width=40, partitions=30, packet_tuples=9, stall=0.1,
                      backpressure=0.6, seed=4)
    assert result.counters["dropped"] == 0
    want = reference_rows(checked, frame)
    assert result.rows == want
    assert {r[-1] for r in want} == {"first", "second", "third"}


@needs_ghdl
def test_malformed_packets_are_counted_and_framing_resyncs_on_both_back_ends(tmp_path):
    checked = check(parse_file(MARATHON))
    frame = events.load_events(MARATHON.parent / "events.csv", checked.stream)
    tup = lower(checked).tuple
    rows = [tup.to_bytes(r) for r in frame.to_dict("records")]
    junk = b"\xff" * 7  # a packet that ends mid-tuple: its partial tuple is dropped
    packets = [b"".join(rows[:4]) + junk, junk[:3], b"".join(rows[4:9]), b"".join(rows[9:])]
    result = run_both(checked, frame, tmp_path, packets, bus_width=48, partitions=7, stall=0.2)
    assert result.counters["malformed"] == 2
    assert result.counters["tuples_in"] == len(rows)
    assert result.rows == reference_rows(checked, frame)


@needs_ghdl
def test_eviction_frees_idle_partitions_on_both_back_ends(tmp_path):
    # two elements; keys 0 and 1 start partial matches and go quiet; later keys need room
    text = pt.schema() + "PARTITION BY k PATTERN (P0 P3 P2) DEFINE " + pt.defines() + ";"
    checked = check(parse(text))
    frame = keyed_frame("aa" + "b" * 40 + "adc", [0, 1] + [9] * 40 + [2, 2, 2])
    result = run_both(checked, frame, tmp_path, bus_width=64, partitions=2, partitioner="pipeline", evict_after=30,
                      packet_tuples=100)
    assert result.counters["dropped"] == 0 and result.counters["evicted"] >= 1
    assert [row[1] for row in result.rows] == ["44"]  # a d c of key 2
    # without eviction key 2 finds no room
    without = run(checked, frame, "ghdl", bus_width=64, partitions=2, partitioner="pipeline", packet_tuples=100)
    assert without.counters["dropped"] > 0 and without.rows == []


@needs_ghdl
def test_table_epoch_eviction_is_the_same_on_both_back_ends(tmp_path):
    # a hashed table of 8 entries (2 buckets of 4 ways): 12 keys start partial matches and fill it,
    # then 2,300 tuples that start nothing (no entry) age them past half the epoch range (2,048
    # epochs of one cycle with --evict-after 30); new keys then take the stale entries
    text = pt.schema() + "PARTITION BY k PATTERN (P0 P3 P2) DEFINE " + pt.defines() + ";"
    checked = check(parse(text))
    late = [k for k in range(20, 28) for _ in range(3)]
    frame = keyed_frame("a" * 12 + "b" * 2300 + "adc" * 8, list(range(12)) + [99] * 2300 + late)
    result = run_both(checked, frame, tmp_path, bus_width=64, partitions=8, partitioner="table", evict_after=30,
                      packet_tuples=100)
    # the first late key in each bucket takes a stale entry (an eviction); it completes its match and
    # frees that entry, which the bucket's next late key then takes as a free one: one eviction per bucket
    assert result.counters["evicted"] == 2
    # one late key is live at a time (each completes its match, freeing its entry): none is dropped
    assert result.rows == reference_rows(checked, frame) and len(result.rows) == 8


# --- the VHDL against the reference ----------------------------------------------------------------


@needs_ghdl
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pt.patterns(max_leaves=8), st.sampled_from(["SKIP PAST LAST ROW", "CONTINUE"]),
       st.sampled_from([8, 40, 64]), st.integers(1, 6), st.integers(0, 2**16))
def test_vhdl_random_patterns_match_the_reference(pattern, after, bus_width, partitions, seed):
    # the NFA core template over any pattern (one GHDL build per example: they are cheap)
    checked = check(parse(pt.query_text(pattern, after, partition=True)))
    if lower(checked).queries[0].nfa.n_states == 0:
        return  # a pattern of only empty words has no hardware (and never reports)
    rng = np.random.default_rng(seed)
    n = 80
    frame = keyed_frame("".join(rng.choice(list(pt.LETTERS), n)), list(rng.integers(0, partitions, n)))
    result = run(checked, frame, "ghdl", bus_width=bus_width, partitions=partitions, packet_tuples=11,
                 stall=0.2, backpressure=0.3, seed=seed)
    assert result.counters["dropped"] == 0
    assert result.rows == reference_rows(checked, frame)


@needs_ghdl
@pytest.mark.parametrize("keyed", [False, True])
def test_vhdl_heavy_backpressure_fills_the_fifos_without_losing_a_record(keyed):
    # almost every tuple matches and the sink takes about one record in ten cycles
    text = pt.schema() + ("PARTITION BY k " if keyed else "") + "AFTER MATCH CONTINUE PATTERN (P1) DEFINE " \
        + pt.defines() + ";"
    checked = check(parse(text))
    frame = keyed_frame("ab" * 150, [i % 3 for i in range(300)])
    result = run(checked, frame, "ghdl", bus_width=64, partitions=3, backpressure=0.9, seed=3)
    assert result.rows == reference_rows(checked, frame) and len(result.rows) == 300
    assert result.counters["matches_out"] == 300


@needs_ghdl
@pytest.mark.parametrize("bus_width, partitioner, update_cycles", [(8, "table", "auto"), (24, "pipeline", "auto"),
                                                                   (128, "table", "2"), (128, "table", "3")])
def test_every_beat_and_record_takes_the_same_cycle_on_both_back_ends(bus_width, partitioner, update_cycles):
    # cycle-exact: the clock cycle of every packet's last beat taken and of every record given, under
    # the same random gaps and backpressure (an 8-bit bus has a framer of its own, without the
    # trim cycle after a packet; a 128-bit one takes a tuple a cycle, so with the two-cycle update
    # a tuple of the bucket of the one before it waits a cycle)
    text = pt.schema() + f"PARTITION BY k AFTER MATCH CONTINUE PATTERN (P0 P3* P2) DEFINE {pt.defines()};"
    checked = check(parse(text))
    rng = np.random.default_rng(11)
    n = 300
    frame = pd.DataFrame({"t": np.arange(n, dtype=np.int64), "k": rng.integers(0, 6, n),
                          "c": np.array(list(pt.LETTERS), dtype=object)[rng.integers(0, 4, n)]})
    results = {simulator: run(checked, frame, simulator, bus_width=bus_width, partitioner=partitioner,
                              partitions=None if partitioner == "table" else 6, packet_tuples=7, stall=0.2,
                              backpressure=0.3, seed=11, timing=True, update_cycles=update_cycles)
               for simulator in ("verilator", "ghdl")}
    verilog, vhdl = results["verilator"], results["ghdl"]
    assert len(verilog.timing["records"]) == len(verilog.rows) > 20
    if update_cycles == "2":  # (the table direct-indexed: the bucket is the key)
        assert sum(a == b for a, b in zip(frame["k"], frame["k"][1:])) > 40
    assert vhdl.timing == verilog.timing
    assert vhdl.rows == verilog.rows and vhdl.counters == verilog.counters


@needs_ghdl
@pytest.mark.parametrize("partitions, keyed, bus_width, partitioner, update_cycles",
                         [(1, False, 64, "auto", 1), (5, True, 56, "pipeline", 1), (5, True, 56, "table", 1),
                          (5, True, 56, "table", 2), (5, True, 56, "table", 3)])
def test_latency_is_the_same_on_both_back_ends(partitions, keyed, bus_width, partitioner, update_cycles):
    from cepc.hw.top import latency

    text = pt.schema() + ("PARTITION BY k " if keyed else "") + "PATTERN (P0) DEFINE " + pt.defines() + ";"
    checked = check(parse(text))
    measured = {}
    for simulator in ("verilator", "ghdl"):
        result = run(checked, keyed_frame("a", [1]), simulator, bus_width=bus_width, partitions=partitions,
                     partitioner=partitioner, update_cycles=str(update_cycles), timing=True)
        # clock edges from the one taking the tuple's last beat to the one taking its record
        (beat,), (record,) = result.timing["last_beats"], result.timing["records"]
        measured[simulator] = record - beat
    assert measured["ghdl"] == measured["verilator"]
    # the sidecar's latency_cycles is an upper bound: a keyed tuple may wait a cycle for its slot
    kind = "table" if partitioner == "auto" else partitioner
    bound = latency(lower(checked), partitions, kind, update_cycles)
    assert bound - 1 <= measured["ghdl"] <= bound
    # 13 cycles, not 11: the lookup's register and a second record register; 15: the lookup registered
    # twice, and the register stage after the framer
    if partitioner == "table":
        assert bound == {1: 11, 2: 13, 3: 15}[update_cycles]


# --- the two-cycle update (--update-cycles 2) ------------------------------------------------------


def buckets_of(design, frame: pd.DataFrame, partitions: int) -> dict[str, list[int]]:
    """Each keyed query's table bucket of every tuple of ``frame``, as the hardware hashes it (the table
    sized as ``cepc sim`` sizes it for ``--partitions``)."""
    from cepc.hw import sizing
    from cepc.hw.top import table_partitioner

    choice = sizing.choose(design, sizing.DEVICES["ecp5-85f"], "table", partitions)
    out = {}
    for q in design.queries:
        if not q.key_fields:
            continue
        table = table_partitioner(q, design.tuple, choice.partitions, choice.ways)
        table._MustUse__silence = True  # (asked for its hash only: never elaborated)
        fields = [design.tuple.field(k) for k in q.key_fields]
        buckets = []
        for row in frame[list(q.key_fields)].itertuples(index=False):
            key, off = 0, 0
            for f, value in zip(fields, row):  # the key as the top packs it, the first field lowest
                key |= f.encode(value) << off
                off += f.width
            buckets.append(table.index(key))
        out[q.name] = buckets
    return out


def back_to_back(buckets: dict[str, list[int]], keys: list, distance: int = 1) -> tuple[int, int]:
    """Tuples whose key shares a bucket of some query's table with the tuple ``distance`` before them:
    how many, and how many of those have another key."""
    shared = [i for i in range(distance, len(keys)) if any(b[i] == b[i - distance] for b in buckets.values())]
    return len(shared), sum(keys[i] != keys[i - distance] for i in shared)


@needs_ghdl
@pytest.mark.parametrize("example, n, update_cycles, hazards", [
    ("mshape/mshape.sql", 1000, "2", "forward"), ("finance/finance0/finance0.sql", 1000, "2", "stall"),
    ("finance/finance5/finance5.sql", 1000, "2", "forward"), ("network/network.sql", 1000, "2", "forward"),
    ("mshape/mshape.sql", 1000, "3", "forward"), ("finance/finance0/finance0.sql", 1000, "3", "stall"),
    ("finance/finance5/finance5.sql", 1000, "3", "forward"), ("network/network.sql", 1000, "3", "forward")])
def test_two_and_three_cycle_updates_are_cycle_exact_on_both_back_ends(example, n, update_cycles, hazards, tmp_path):
    # --update-cycles 2 on a small hashed table (16 entries: 4 buckets of 4 ways) and 8 keys on a
    # 256-bit bus (a tuple a cycle): a fifth of the tuples or more share a bucket with the tuple just
    # before them, of their own key or another's. Each waits a cycle at stage 2, and then sees the
    # update of the one before it, on both back ends to the cycle, under gaps in the input and
    # backpressure; the matches are the reference's. (finance2, the largest design, 168 s of CI's time,
    # and marathon, whose states network's queries also have, are left out: finance2's two-cycle update is
    # test_hw_aggregates' test_the_examples_with_the_two_cycle_update, in amaranth.sim.)
    # finance0 with --hazards stall: a tuple waits while a key of its bucket is among the 8 before it.
    # With the three-cycle update a tuple waits while its bucket is that of either of the two before it
    # (about as many share the bucket of the one two before), or with --hazards stall of the 9 before it.
    from cepc.gen import generate

    checked = check(parse_file(ROOT / "examples" / example))
    design = lower(checked)
    frame = generate(checked, n, 8, seed=13)
    (key,) = {k for q in design.queries for k in q.key_fields}
    buckets = buckets_of(design, frame, 16)
    for distance in (1, 2) if update_cycles == "3" else (1,):
        shared, others = back_to_back(buckets, frame[key].tolist(), distance)
        assert shared > n // 5 and others > n // 10, (distance, shared, others)
    result = run_both(checked, frame, tmp_path, bus_width=256, partitions=16, partitioner="table",
                      update_cycles=update_cycles, hazards=hazards, packet_tuples=25, stall=0.1, backpressure=0.4, seed=13,
                      timing=True)
    assert result.counters["tuples_in"] == len(frame) and result.counters["dropped"] == 0
    assert result.hazards == hazards and result.update_cycles == int(update_cycles)
    want = expected_rows(checked, frame)
    assert result.rows == want and len(want) >= 9


@needs_ghdl
@pytest.mark.parametrize("update_cycles", ["2", "3"])
def test_two_and_three_cycle_updates_stall_with_the_same_margin_on_both_back_ends(update_cycles, tmp_path):
    # every tuple matches and the sink takes about one record in ten cycles: the output FIFO fills, and
    # the pipeline stalls with one slot more kept free than with the one-cycle update (its second
    # record register), on both back ends at the same cycles; no record is lost
    text = pt.schema() + "PARTITION BY k AFTER MATCH CONTINUE PATTERN (P1) DEFINE " + pt.defines() + ";"
    checked = check(parse(text))
    frame = keyed_frame("ab" * 150, [i // 2 % 3 for i in range(300)])  # pairs of a key back to back
    result = run_both(checked, frame, tmp_path, bus_width=128, partitions=3, partitioner="table",
                      update_cycles=update_cycles, packet_tuples=50, backpressure=0.9, seed=3, timing=True)
    assert result.rows == reference_rows(checked, frame) and len(result.rows) == 300
    assert result.counters["matches_out"] == 300


@needs_ghdl
@pytest.mark.parametrize("update_cycles", ["1", "2", "3"])
def test_a_write_is_stamped_with_the_epoch_of_its_lookup(update_cycles, tmp_path):
    # --evict-after 30: an epoch every enabled cycle, and an entry is stale 2,048 epochs after the one
    # its write is stamped with. Twelve keys start a partial match each ('a'); some 2,000 tuples later
    # they come back in turn ('d'), each one cycle later after its start than the key before it, and
    # then complete their matches ('c'). Keys that come back before their entry is stale match; the
    # later ones have lost it. Which key is the first to have lost it depends, to the cycle, on the
    # epoch its write is stamped with: its lookup's, with the two- and three-cycle updates too (where the
    # write is formed a cycle or two after the lookup). No tuple waits: no two in a row, nor two with one
    # between them, share a bucket (three fillers in turn).
    text = pt.schema() + "PARTITION BY k PATTERN (P0 P3 P2) DEFINE " + pt.defines() + ";"
    checked = check(parse(text))
    design = lower(checked)
    (every,) = buckets_of(design, keyed_frame("a" * 256, list(range(256))), 64).values()
    bucket = dict(enumerate(every))  # each key's (16 buckets of 4 ways)
    filler = [200]  # 'b' starts nothing: no entry
    for k in range(201, 256):
        if len(filler) < 3 and bucket[k] not in {bucket[f] for f in filler}:
            filler.append(k)
    keys = []  # in turn in buckets of their own (none of the fillers'), at most 4 in one
    for k in range(100):
        if bucket[k] not in {bucket[f] for f in filler} and bucket[k] not in {bucket[j] for j in keys[-2:]} \
                and [bucket[j] for j in keys].count(bucket[k]) < 4 and len(keys) < 12:
            keys.append(k)
    fill = 2030
    letters = "a" * 12 + "b" * fill + "db" * 12 + "c" * 12
    ks = keys + [filler[i % 3] for i in range(fill)] + [k for i, key in enumerate(keys) for k in (key, filler[i % 3])] \
        + keys
    frame = keyed_frame(letters, ks)
    buckets = buckets_of(design, frame, 64)
    assert len(keys) == 12 and back_to_back(buckets, ks)[0] == back_to_back(buckets, ks, 2)[0] == 0
    result = run_both(checked, frame, tmp_path, bus_width=128, partitions=64, partitioner="table", evict_after=30,
                      update_cycles=update_cycles, packet_tuples=len(frame), seed=5, timing=True)
    # the first six keys come back 2,042 to 2,047 cycles after their start (12 + 2,030 + their place), in time
    assert [int(row[0]) for row in result.rows] == keys[:6]
    assert result.counters["evicted"] == 0 and result.counters["dropped"] == 0


def awkward_frame(n: int, seed: int) -> pd.DataFrame:
    """Events for tests/fixtures/vhdl/awkward.sql: half of each field's values at its edges."""
    rng = np.random.default_rng(seed)

    def pick(edges, lo, hi, dtype):
        v = rng.integers(lo, hi, n, endpoint=True, dtype=dtype)
        e = np.array(edges, dtype=dtype)[rng.integers(0, len(edges), n)]
        return np.where(rng.random(n) < 0.5, e, v)

    return pd.DataFrame({
        "time": np.cumsum(rng.integers(0, 2**27, n, dtype=np.uint64)).astype(np.uint64),
        "range": np.array([0, 1, 199, 200, 201, 255])[rng.integers(0, 6, n)],
        "Signal": pick([-32768, -101, -100, -99, -5, 5, 6, 0, 32767], -32768, 32767, np.int64),
        "a b": pick([-128, -1, 0, 1, 127], -128, 127, np.int64),
        "x__y": pick([0, 7, 2999999999, 3000000000, 3000000100, 3000000101, 2**63 - 1, 2**63, 2**64 - 1],
                     0, 2**64 - 1, np.uint64),
        "X": pick([0, 8, 15], 0, 15, np.int64),
        "x": pick([-8, 0, 7], -8, 7, np.int64),
        "flag": rng.integers(0, 2, n),
        "sym": np.array(["ab", "xyz", "q", "abc", "", "zz", "a"], dtype=object)[rng.integers(0, 7, n)],
        "kind": np.array(["p", "q", "r*/"], dtype=object)[rng.integers(0, 3, n)],
    })


@needs_ghdl
def test_vhdl_predicates_over_every_type_match_the_reference():
    # signed/unsigned mixes, widening + - and * by constants, negation, BETWEEN, IN, CHAR, ENUM, BOOL,
    # constants wider than a VHDL integer, and names VHDL cannot take as they are. (The Verilog back end
    # cannot take this file: Yosys rejects the spaces in its names.)
    checked = check(parse_file(ROOT / "tests" / "fixtures" / "vhdl" / "awkward.sql"))
    frame = awkward_frame(1200, 1)
    result = run(checked, frame, "ghdl", bus_width=64, partitions=24, packet_tuples=13, stall=0.1, backpressure=0.2)
    assert result.counters["dropped"] == 0
    want = reference_rows(checked, frame)
    assert result.rows == want
    per_query = {q: sum(r[-1] == q for r in want) for q in ("my query", "next", "Next", "NEXT", "anything", "same")}
    assert all(count > 10 for count in per_query.values()), per_query


# --- the command -----------------------------------------------------------------------------------


@needs_ghdl  # (Verilator's: test_sim_verilator's)
def test_compare_reports_the_first_difference(tmp_path, capsys):
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("runner,seq,query\n2,3,q0\n4,12,q0\n")
    assert main(["sim", str(MARATHON), "--events", str(MARATHON.parent / "events.csv"), "-o", str(tmp_path / "s.csv"),
                 "--compare", str(wrong), "--simulator", "ghdl"]) == 1
    err = capsys.readouterr().err
    assert "differ at row 2 of 2" in err
    assert "simulation: 4,13,q0" in err and "wrong.csv: 4,12,q0" in err
    assert "> seq 12: time=71, checkpoint=Staten Island, runner=4, speed=13" in err


@needs_ghdl  # (Verilator's: test_sim_verilator's test_waves)
def test_waves(tmp_path):
    waves = tmp_path / "w.fst"
    assert main(["sim", str(MARATHON), "--events", str(MARATHON.parent / "events.csv"), "-o", str(tmp_path / "s.csv"),
                 "--waves", str(waves), "--simulator", "ghdl"]) == 0
    # an FST file: GHDL's, the zlib wrapper around a whole FST
    assert waves.read_bytes()[:1] == b"\xfe" and waves.stat().st_size > 1000


def test_checked_query_file_is_required(tmp_path, capsys):
    q = tmp_path / "q.sql"
    q.write_text("CREATE STREAM s (x UINT8); PATTERN (A) DEFINE A AS y = 1;")
    ev = tmp_path / "e.csv"
    ev.write_text("x\n1\n")
    assert main(["sim", str(q), "--events", str(ev), "-o", str(tmp_path / "s.csv")]) == 1
    assert "unknown field 'y'" in capsys.readouterr().err


def test_parse_file_roundtrip_for_sim_inputs():
    # the bench packs with the same TuplePlan the sidecar describes
    tup = lower(check(parse_file(MARATHON))).tuple
    row = {"time": 2**64 - 1, "checkpoint": "Bronx", "runner": 65535, "speed": 7}
    assert tup.unpack(int.from_bytes(tup.to_bytes(row), "little")) == row


@needs_ghdl
@pytest.mark.parametrize("example, partitions, keys", [
    ("marathon/marathon.sql", 16, 8), ("marathon/marathon.sql", 4096, 64), ("marathon/marathon.sql", 65536, 64),
    ("finance/finance0/finance0.sql", 16, 8)], ids=["36-bit", "18-bit", "direct-1-bit", "finance0-wide"])
def test_the_ecp5_block_ram_is_cycle_exact_with_the_inferred_one(example, partitions, keys, tmp_path):
    # `cepc synth --hdl vhdl` on an ECP5 board: the table's banks as DP16KDs read through their output
    # registers, simulated with the model the file then holds. Each shape the table takes: 512 x 36
    # (4 buckets; finance0's 600-bit entries across many blocks), 1024 x 18, and 16,384 x 1 in four banks
    # (direct-indexed); to the cycle what the generic VHDL (inferred memories) does, and the reference's
    from cepc.gen import generate

    checked = check(parse_file(ROOT / "examples" / example))
    frame = generate(checked, 800, keys, seed=5)
    options = dict(bus_width=256, partitions=partitions, partitioner="table", update_cycles="2", packet_tuples=25,
                   stall=0.1, backpressure=0.3, seed=5, timing=True)
    inferred = run(checked, frame, "ghdl", **options)
    ecp5 = run(checked, frame, "ghdl", primitives="ecp5", **options)
    assert ecp5.rows == inferred.rows == expected_rows(checked, frame) and len(ecp5.rows) > 5
    assert ecp5.counters == inferred.counters and ecp5.counters["dropped"] == 0
    assert ecp5.timing == inferred.timing


def test_device_primitives_are_for_ghdl(tmp_path):
    from cepc.errors import UsageError
    from cepc.gen import generate

    checked = check(parse_file(MARATHON))
    frame = generate(checked, 10, 2, seed=1)
    with unused_elaboratables() as unused:
        with pytest.raises(UsageError, match="simulate them with GHDL"):
            simulate(checked, frame, SimOptions(simulator="verilator", primitives="ecp5", build_root=tmp_path))
    assert unused == []  # the Top made for it, never elaborated, says nothing when it is collected
