"""The generated top in ``amaranth.sim`` against the reference matcher (SPEC §3, §4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from amaranth.hdl import Fragment
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cepc import events
from cepc.hw.partition.table import DEPTH as TABLE_DEPTH
from cepc.hw.top import Top, latency, slot_period_for
from cepc.lang.check import check
from cepc.lang.parse import parse, parse_file
from cepc.nfa.lower import lower

import hwsim
import patterns as pt
from oracle import expected_rows

ROOT = Path(__file__).resolve().parent.parent


def marathon():
    c = check(parse_file(ROOT / "examples" / "marathon" / "marathon.sql"))
    return c, events.load_events(ROOT / "examples" / "marathon" / "events.csv", c.stream)


@pytest.mark.parametrize("bus_width", [8, 32, 104, 128, 512])
def test_marathon_on_every_bus_width(bus_width):
    c, frame = marathon()
    hwsim.run_and_compare(c, frame, bus_width=bus_width, partitions=8)


def test_marathon_with_stalls_and_backpressure():
    c, frame = marathon()
    for seed in range(3):
        hwsim.run_and_compare(c, frame, bus_width=24, partitions=6, stall=0.3, backpressure=0.5, seed=seed)


def test_marathon_in_many_packets():
    c, frame = marathon()
    hwsim.run_and_compare(c, frame, bus_width=64, partitions=8, packet_tuples=3)


def keyed_frame(letters: str, keys: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"t": np.arange(len(letters), dtype=np.int64), "k": np.asarray(keys, dtype=np.int64),
                         "c": np.array(list(letters), dtype=object)})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pt.patterns(max_leaves=8),
       st.lists(st.tuples(st.sampled_from(pt.LETTERS), st.integers(0, 4)), min_size=1, max_size=30),
       st.sampled_from(["SKIP PAST LAST ROW", "CONTINUE"]), st.sampled_from([8, 40, 64]),
       st.sampled_from(["pipeline", "table"]), st.integers(0, 2**16))
def test_random_patterns_match_the_reference(pattern, tuples, after, bus_width, partitioner, seed):
    checked = check(parse(pt.query_text(pattern, after, partition=True)))
    if lower(checked).queries[0].nfa.n_states == 0:
        return  # a pattern of only empty words has no hardware (and never reports)
    frame = keyed_frame("".join(c for c, _ in tuples), [k for _, k in tuples])
    # 5 pipeline elements, or a table of 8 hashed entries (keys 0-4 fit two buckets of four)
    hwsim.run_and_compare(checked, frame, bus_width=bus_width, partitions=5 if partitioner == "pipeline" else 8,
                          partitioner=partitioner, stall=0.2, backpressure=0.3, seed=seed)


@pytest.mark.parametrize("partitioner", ["pipeline", "table"])
def test_same_key_back_to_back_and_alternating(partitioner):
    text = pt.schema() + "PARTITION BY k PATTERN (P0 P3* P2) DEFINE " + pt.defines() + ";"
    checked = check(parse(text))
    same = keyed_frame("adddcadc" * 3, [1] * 24)
    alternating = keyed_frame("aaddccaadc" * 2, [1, 2] * 10)
    for frame in (same, alternating):
        hwsim.run_and_compare(checked, frame, bus_width=16, partitions=4, partitioner=partitioner)
        # a tuple a cycle: a bus as wide as a tuple, no gaps
        hwsim.run_and_compare(checked, frame, bus_width=lower(checked).tuple.nbytes * 8, partitions=4,
                              partitioner=partitioner)


def test_table_partitioner_takes_one_tuple_per_cycle():
    text = pt.schema() + "PARTITION BY k PATTERN (P0 P3+) DEFINE " + pt.defines() + ";"
    checked = check(parse(text))
    frame = keyed_frame("acdcadd" * 8, [i % 3 for i in range(56)])
    design = lower(checked)
    data = b"".join(design.tuple.to_bytes(r) for r in frame.to_dict("records"))
    width = design.tuple.nbytes * 8
    result = hwsim.simulate(design, [hwsim.beats(data, width)], bus_width=width, partitions=256,
                            partitioner="table", idle=20)
    assert hwsim.hw_rows(design, result, checked) == expected_rows(checked, frame)
    # 56 tuples, one beat each, at one per cycle: consumed in about 56 cycles, then the latency
    assert result.cycles - 20 <= 56 + latency(design, 256, "table") + 2


def test_query_without_partition_by_takes_one_tuple_per_cycle():
    text = pt.schema() + "PATTERN (P0 P3+) DEFINE " + pt.defines() + ";"
    checked = check(parse(text))
    frame = keyed_frame("acdcadd" * 4, [0] * 28)
    design = lower(checked)
    data = b"".join(design.tuple.to_bytes(r) for r in frame.to_dict("records"))
    width = design.tuple.nbytes * 8
    result = hwsim.simulate(design, [hwsim.beats(data, width)], bus_width=width, partitions=4, idle=20)
    assert hwsim.hw_rows(design, result, checked) == expected_rows(checked, frame)
    # 28 tuples, one beat each, at one per cycle: the stream is consumed in about 28 cycles
    assert result.cycles - 20 <= 28 + 12


def test_several_queries_share_framing_and_decoder():
    text = pt.schema() + f"""
        NAME first PARTITION BY k PATTERN (P0 P3* P2) DEFINE {pt.defines()};
        NAME second AFTER MATCH CONTINUE PATTERN (P1 P1) DEFINE {pt.defines()};
        NAME third PARTITION BY k, c AFTER MATCH CONTINUE PATTERN (P3 .) DEFINE {pt.defines()};"""
    checked = check(parse(text))
    frame = keyed_frame("abacdbbaccdaab" * 2, [0, 1, 2] * 9 + [0])
    hwsim.run_and_compare(checked, frame, bus_width=32, partitions=12, backpressure=0.4, seed=5)


def test_full_partitioner_drops_and_spills_every_unplaced_tuple():
    # 2 elements, 6 keys that all start partial matches: tuples beyond capacity spill
    text = pt.schema() + "PARTITION BY k PATTERN (P0 P3 P3 P2) DEFINE " + pt.defines() + ";"
    checked = check(parse(text))
    design = lower(checked)
    frame = keyed_frame("aaaaaadddddd", [0, 1, 2, 3, 4, 5] * 2)
    data = b"".join(design.tuple.to_bytes(r) for r in frame.to_dict("records"))
    result = hwsim.simulate(design, [hwsim.beats(data, 32)], bus_width=32, partitions=2, backpressure=0.3)
    c = result.counters
    assert c["tuples_in"] == 12
    assert c["dropped"] > 0
    assert c["dropped"] == len(result.spilled)
    spilled = [design.tuple.unpack(w) for w in result.spilled]
    # every spilled tuple is one of ours, intact
    rows = frame.to_dict("records")
    assert all(any(s == {k: r[k] for k in s} for r in rows) for s in spilled)


@pytest.mark.parametrize("partitioner, platform, two_beat, aggregate", [
    ("pipeline", None, (), False), ("pipeline", None, (), True), ("table", None, (), False),
    ("table", hwsim.Ice40(), (), False), ("pipeline", hwsim.Ice40(), ("spill",), False),
    ("pipeline", hwsim.Ice40(), ("spill", "records"), False), ("pipeline", hwsim.Ice40(), ("spill",), True)])
def test_a_spilled_tuple_gives_no_record_and_spills_once(partitioner, platform, two_beat, aggregate):
    # AFTER MATCH CONTINUE: each key's "a" both matches (P0) and leaves a partial match (P3*) to
    # keep, so a key with no room has its "a" spilled, and its record goes with it; its "d" later
    # starts nothing and is neither kept nor spilled. Stalls must not spill a tuple twice.
    # (aggregate: P3 reads the partial match too, always true here, so Woods' pipeline computes its
    # conditions a stage before the tail, and the register stage before the core holds each tuple through
    # the cycle after: the spilled tuple is written from there, not from a register of its own)
    defines = pt.defines() + (" AND t >= FIRST(t)" if aggregate else "")
    assert not aggregate or defines.endswith("P3 AS c IN ('c', 'd') AND t >= FIRST(t)")
    text = pt.schema() + "PARTITION BY k AFTER MATCH CONTINUE PATTERN (P0 P3*) DEFINE " + defines + ";"
    design = lower(check(parse(text)))
    n = 40
    frame = keyed_frame("a" * n + "d" * n, list(range(n)) * 2)
    data = b"".join(design.tuple.to_bytes(r) for r in frame.to_dict("records"))
    # (on the iCE40, the output and spill FIFOs are block RAM's, offered from its output latch: BlockRamFifo;
    # or, behind the pipeline partitioner, a word in two halves: TwoBeatFifo)
    result = hwsim.simulate(design, [hwsim.beats(data, 32)], bus_width=32, partitions=2, partitioner=partitioner,
                            backpressure=0.9, platform=platform, two_beat_fifos=two_beat)
    spilled = [design.tuple.unpack(w) for w in result.spilled]
    spilled_keys = [s["k"] for s in spilled]
    assert all(s["c"] == "a" for s in spilled)
    assert len(set(spilled_keys)) == len(spilled_keys) == result.counters["dropped"] > 0
    placed = sorted(set(range(n)) - set(spilled_keys))
    assert placed
    assert sorted(r["seq"] for r in result.records) == placed + [n + k for k in placed]


def test_wide_records_through_two_beat_fifos_match_the_reference():
    # finance0's 289-bit records and 160-bit tuples, each stored as two halves (the iCE40's FIFOs behind
    # the pipeline partitioner: TwoBeatFifo), under backpressure and stalls: every record whole, in order
    import random

    c = check(parse_file(ROOT / "examples" / "finance" / "finance0" / "finance0.sql"))
    rng = random.Random(9)
    prices, rows = {"IBM": 10000, "ACME": 5000, "XYZ": 700}, []
    for i in range(240):
        symbol = rng.choice(sorted(prices))
        prices[symbol] = max(1, prices[symbol] + rng.choice([-15, -5, 5, 10, 20, 25]))
        rows.append({"time": 100 * i, "symbol": symbol, "price": prices[symbol],
                     "volume": rng.choice([1000, 6000, 9000])})
    frame = pd.DataFrame(rows)
    for seed, backpressure, two_beat in ((1, 0.0, ("records",)), (2, 0.6, ("spill", "records"))):
        result = hwsim.run_and_compare(c, frame, bus_width=32, partitions=4, partitioner="pipeline", stall=0.2,
                                       backpressure=backpressure, seed=seed, platform=hwsim.Ice40(),
                                       two_beat_fifos=two_beat)
        assert len(result.records) > 10


def trades(example: str, symbols: int) -> tuple:
    """An example's query (mshape, finance0, finance5), checked, and 360 trades of ``symbols`` symbols whose
    prices wander up and down (mshape's: down to a new start every ninth)."""
    import random

    path = ROOT / "examples" / ("mshape/mshape.sql" if example == "mshape" else f"finance/{example}/{example}.sql")
    c = check(parse_file(path))
    rng = random.Random(len(example) + symbols)
    prices, rows = dict(zip(["IBM", "ACME"][:symbols], [40000, 30000])), []
    for i in range(360):
        symbol = rng.choice(sorted(prices))
        prices[symbol] = max(1, prices[symbol] + rng.choice([-60, -15, 10, 20, 70, 90, 120]))
        if example == "mshape" and i % 9 == 8:  # (a new pattern, below where the last began)
            prices[symbol] = max(1, prices[symbol] - 300)
        rows.append({"time": 1000 * i, "symbol": symbol, "price": prices[symbol],
                     "volume": rng.choice([1000, 6000, 9000])})
    return c, rows


@pytest.mark.parametrize("example, symbols", [("finance0", 1), ("finance5", 1), ("finance5", 2), ("mshape", 1),
                                             ("mshape", 2)])
def test_a_pipeline_of_one_or_two_elements_takes_its_conditions_a_stage_ahead(example, symbols):
    # `cepc synth`'s choice on the UP5K: Woods' pipeline with one element (and two). A keyed partial-match
    # core's conditions are computed a stage before the tail, from the state its key will find there
    # (`ahead_state`: with one element, from the tuple after stage 3's registers, the payload line
    # bypassed), and registered. Tuples of one key come every other cycle, so each reads the state its
    # key's last tuple wrote; under backpressure and stalls the registered conditions must wait too
    c, rows = trades(example, symbols)
    # (a byte a cycle; then with the output held back until the FIFOs fill and `en` falls, while tuples
    # wait at the tail and a stage before it: 64 bits, where a tuple takes three beats, and 256, where
    # the framer has the next tuple ready as one is taken, so the stages between two tuples hold copies
    # of each, not of one)
    # (on the iCE40, as for the iCEBreaker, the conditions' orderings take the tuple's fields inverted, from
    # registers of their own beside it)
    for seed, bus_width, backpressure, platform in ((1, 8, 0.0, None), (2, 64, 0.97, hwsim.Ice40()),
                                                    (3, 256, 0.97, None), (4, 256, 0.97, hwsim.Ice40())):
        result = hwsim.run_and_compare(c, pd.DataFrame(rows), bus_width=bus_width, partitions=symbols,
                                       partitioner="pipeline", stall=0.2, backpressure=backpressure, seed=seed,
                                       idle=600, platform=platform, late_measures=platform is not None)
        assert len(result.records) > 5


@pytest.mark.parametrize("example", ["finance0", "finance5", "mshape"])
def test_a_pipeline_of_one_element_takes_a_tuple_every_three_cycles_its_conditions_in_two(example):
    # `cepc synth --slot-period 3`: Woods' pipeline of one element takes a tuple every three cycles, its
    # conditions two stages before the tail, each compare's slices registered, then joined into `cond`
    # (the element's state and the tuple hold through both); a register stage before the element, so a
    # record comes a cycle later. Against the reference, a byte a cycle and 64 or 256 bits a cycle under
    # backpressure and stalls, as the iCEBreaker builds it; with nothing holding it back, 256 bits a
    # cycle takes a tuple every three cycles, not two
    c, rows = trades(example, 1)
    frame = pd.DataFrame(rows)
    for seed, bus_width, backpressure, platform in ((1, 8, 0.0, None), (2, 64, 0.97, hwsim.Ice40()),
                                                    (4, 256, 0.97, hwsim.Ice40())):
        result = hwsim.run_and_compare(c, frame, bus_width=bus_width, partitions=1, partitioner="pipeline",
                                       stall=0.2, backpressure=backpressure, seed=seed, idle=600,
                                       platform=platform, late_measures=platform is not None, slot_period=3)
        assert len(result.records) > 5
    paced = {period: hwsim.run_and_compare(c, frame, bus_width=256, partitions=1, idle=60, platform=hwsim.Ice40(),
                                           late_measures=True, slot_period=period).input_cycles
             for period in (2, 3)}
    assert abs(paced[2] - 2 * len(rows)) <= 10 and abs(paced[3] - 3 * len(rows)) <= 10, paced


def test_a_tuple_every_three_cycles_is_the_one_element_pipelines():
    # cepc synth --slot-period auto: 3 for the Verilog of a pipeline of one element whose keyed query
    # compares the tuple with its partial matches (mshape, finance's), else 2; asked for, as asked
    for name, three in (("mshape/mshape.sql", True), ("finance/finance0/finance0.sql", True),
                        ("marathon/marathon.sql", False), ("network/network.sql", False)):
        plan = lower(check(parse_file(ROOT / "examples" / name)))
        assert slot_period_for(plan, "pipeline", 1) == (3 if three else 2)
        assert slot_period_for(plan, "pipeline", 2) == slot_period_for(plan, "table", 1) == 2
        assert slot_period_for(plan, "pipeline", 1, hdl="vhdl") == 2 and slot_period_for(plan, "table", 9, "3") == 3
    design = lower(check(parse_file(ROOT / "examples" / "mshape" / "mshape.sql")))
    top = Top(design, bus_width=8, partitions=1, slot_period=3)
    top._MustUse__silence = True
    assert top.latency == latency(design, 1) + 1 == latency(design, 1, slot_period=3)
    for kw in ({"partitions": 2}, {"partitioner": "table"}, {"slot_period": 4, "partitions": 1}):
        with pytest.raises(ValueError, match="three cycles|every 2 or 3"):
            Top(design, bus_width=8, **({"slot_period": 3} | kw))
    unkeyed = lower(check(parse(pt.schema() + "PATTERN (P0) DEFINE " + pt.defines() + ";")))
    with pytest.raises(ValueError, match="PARTITION BY"):
        Top(unkeyed, bus_width=8, partitions=1, slot_period=3)


@pytest.mark.parametrize("two_beat, period", [((), 2), (("records",), 2), ((), 3)])
def test_a_pipelines_computed_measures_come_from_registers_and_its_records_a_cycle_later(two_beat, period):
    # `cepc synth`'s records behind Woods' pipeline (late_measures): finance5's `took`, time - FIRST(time),
    # its slices summed into registers loaded in the cycle after the record's own (select_sum), picked by
    # their carries in that cycle, and the record written then, a cycle later than `cepc compile`'s (not
    # with records in two beats, whose second beat is a cycle later already); with a tuple every three
    # cycles (one element), in three slices, one a cycle (staged_sum), and the record two cycles later.
    # A tuple comes every `period` cycles, so the record's registers hold through those cycles: every
    # record whole and right under backpressure and stalls, with one key's tuples back to back
    import random

    c = check(parse_file(ROOT / "examples" / "finance" / "finance5" / "finance5.sql"))
    design = lower(c)
    partitions = 2 if period == 2 else 1
    late = 0 if two_beat else period - 1
    top = Top(design, bus_width=8, partitions=partitions, late_measures=True, two_beat_fifos=two_beat,
              slot_period=period)
    top._MustUse__silence = True  # (only its queries and latency are asked)
    assert top.late_queries == (set() if two_beat else {0}) and top.late_cycles == late
    base = latency(design, partitions, slot_period=period)
    assert top.latency == base + (late or 1)
    others = [Top(design, bus_width=8, partitions=partitions, slot_period=period),
              Top(design, bus_width=8, partitioner="table", late_measures=True)]
    for other in others:
        other._MustUse__silence = True
    assert others[0].latency == base and not others[1].late_queries
    rng = random.Random(7)
    prices, rows = {"IBM": 40000, "ACME": 30000} if period == 2 else {"IBM": 40000}, []
    for i in range(300):
        symbol = rng.choice(sorted(prices))
        prices[symbol] = max(1, prices[symbol] + rng.choice([-60, -15, 10, 20, 70, 90, 400]))
        # (times across 2**32, where `took`'s low slices carry or borrow into the high, some out of
        # order: a negative `took`)
        rows.append({"time": 2**32 - 150_000 + 1000 * i + rng.randrange(-1500, 1500), "symbol": symbol,
                     "price": prices[symbol], "volume": 1000})
    frame = pd.DataFrame(rows)
    for seed, bus_width, backpressure in ((1, 256, 0.0), (2, 64, 0.97), (3, 256, 0.97)):
        result = hwsim.run_and_compare(c, frame, bus_width=bus_width, partitions=partitions, partitioner="pipeline",
                                       stall=0.2, backpressure=backpressure, seed=seed, idle=600,
                                       platform=hwsim.Ice40(), two_beat_fifos=two_beat, late_measures=True,
                                       slot_period=period)
        assert len(result.records) > 20 and len({r["measures"]["took"] for r in result.records}) > 10
        started = [r["measures"]["started"] for r in result.records]
        assert min(started) < 2**32 < max(started)
        assert min(r["measures"]["took"] for r in result.records) < 0
    # a match of two tuples: its record a cycle later (two), as the latency the top reports says
    data = b"".join(design.tuple.to_bytes({"time": t, "symbol": "IBM", "price": price, "volume": 1})
                    for t, price in ((5, 100), (9, 200)))
    first = {}
    for measures_late in (False, True):
        result = hwsim.simulate(design, [hwsim.beats(data, 64)], bus_width=64, partitions=partitions, idle=40,
                                late_measures=measures_late, two_beat_fifos=two_beat, slot_period=period)
        assert len(result.records) == 1 and result.records[0]["measures"]["took"] == 4
        first[measures_late] = result.first_record_cycle
    assert first[True] - first[False] == top.latency - base - bool(two_beat) == late


@pytest.mark.parametrize("period", [2, 3])
def test_late_measures_of_every_kind_match_the_reference(period):
    # Measures(late=…), each column that computes: a 65-bit difference of signed times, a 33-bit one of
    # unsigned prices and a sum of a time and a narrower signed field, negative or not (each across the
    # cycles in slices: select_sum, or at a tuple every three cycles staged_sum), a narrow sum and a
    # comparison (each registered whole); times across 2**32 and out of order, prices up and down
    import random

    text = """CREATE STREAM trades (time TIMESTAMP, symbol CHAR(4), price UINT32, shift INT32);
    NAME late PARTITION BY symbol
    MEASURES time - FIRST(time) AS took, COUNT(*) + 1 AS m, price > FIRST(price) AS up, FIRST(price) - price AS fell,
             time + shift AS shifted
    PATTERN ( . b+ c ) DEFINE b AS price >= LAST(price), c AS price < LAST(price);"""
    c = check(parse(text))
    rng = random.Random(5)
    symbols = ["A", "B"] if period == 2 else ["A"]  # (a tuple every three cycles: a pipeline of one element)
    rows = [{"time": 2**32 - 40_000 + 250 * i + rng.randrange(-400, 400), "symbol": rng.choice(symbols),
             "price": rng.choice([1, 2, 3, 2**31, 2**32 - 9]) + rng.randrange(9),
             "shift": rng.choice([-1, 1]) * rng.randrange(2**31)} for i in range(320)]
    result = hwsim.run_and_compare(c, pd.DataFrame(rows), bus_width=64, partitions=len(symbols),
                                   partitioner="pipeline", stall=0.2, backpressure=0.9, seed=5, idle=600,
                                   platform=hwsim.Ice40(), late_measures=True, slot_period=period)
    measures = [r["measures"] for r in result.records]
    assert len(measures) > 20 and {m["up"] for m in measures} == {0, 1}
    assert min(m["took"] for m in measures) < 0 < max(m["took"] for m in measures)

def test_two_beat_fifos_are_the_pipeline_partitioners():
    design = lower(check(parse_file(ROOT / "examples" / "marathon" / "marathon.sql")))
    with pytest.raises(ValueError, match="pipeline partitioner"):
        Top(design, partitioner="table", two_beat_fifos=("spill",))
    with pytest.raises(ValueError, match="among spill, records, not matches"):
        Top(design, two_beat_fifos=("matches",))
    # a record a cycle later than through the block RAM FIFO, where the records' FIFOs take two beats
    tops = [Top(design, partitions=4, two_beat_fifos=kinds) for kinds in (("spill",), ("records", "spill"))]
    for top in tops:
        top._MustUse__silence = True  # (only their latency and FIFOs are asked)
    assert [top.latency - latency(design, 4) for top in tops] == [0, 1]
    assert tops[1].two_beat_fifos == ("spill", "records")  # (in TWO_BEAT_FIFOS' order)


def test_malformed_packets_are_counted_and_framing_resyncs():
    c, frame = marathon()
    design = lower(c)
    rows = frame.to_dict("records")
    good = b"".join(design.tuple.to_bytes(r) for r in rows[:4])
    bad = design.tuple.to_bytes(rows[4])[:7]  # a packet ending mid-tuple
    rest = b"".join(design.tuple.to_bytes(r) for r in rows[4:])
    packets = [hwsim.beats(good, 32), hwsim.beats(bad, 32), hwsim.beats(rest, 32)]
    result = hwsim.simulate(design, packets, bus_width=32, partitions=8)
    assert result.counters["malformed"] == 1
    assert result.counters["tuples_in"] == len(rows)
    assert hwsim.hw_rows(design, result, c) == expected_rows(c, frame)


@pytest.mark.parametrize("partitions, keyed, partitioner", [(1, False, "pipeline"), (1, True, "pipeline"),
                                                           (4, True, "pipeline"), (9, True, "pipeline"),
                                                           (4, True, "table"), (256, True, "table")])
def test_latency_from_last_beat_to_record(partitions, keyed, partitioner):
    text = pt.schema() + ("PARTITION BY k " if keyed else "") + "PATTERN (P0) DEFINE " + pt.defines() + ";"
    design = lower(check(parse(text)))
    data = design.tuple.to_bytes({"t": 0, "k": 1, "c": "a"})
    result = hwsim.simulate(design, [hwsim.beats(data, 64)], bus_width=64, partitions=partitions, idle=30,
                            partitioner=partitioner)
    assert len(result.records) == 1
    # the beat is taken at edge 1, the record at edge `first_record_cycle`
    assert result.first_record_cycle - 1 == latency(design, partitions, partitioner)
    depth = (partitions if partitioner == "pipeline" else TABLE_DEPTH) if keyed else 1
    assert latency(design, partitions, partitioner) - depth <= 8  # the datapath around the partitioner


def test_eviction_with_a_long_timeout_changes_nothing():
    c, frame = marathon()
    result = hwsim.run_and_compare(c, frame, bus_width=32, partitions=8, evict_after=100_000)
    assert result.counters["evicted"] == 0


def test_eviction_frees_idle_partitions_so_new_keys_fit():
    # two elements; keys 0 and 1 start partial matches and go quiet; later keys need room
    text = pt.schema() + "PARTITION BY k PATTERN (P0 P3 P2) DEFINE " + pt.defines() + ";"
    checked = check(parse(text))
    design = lower(checked)
    frame = keyed_frame("aa" + "b" * 40 + "adc", [0, 1] + [9] * 40 + [2, 2, 2])
    data = b"".join(design.tuple.to_bytes(r) for r in frame.to_dict("records"))
    without = hwsim.simulate(design, [hwsim.beats(data, 64)], bus_width=64, partitions=2)
    assert without.counters["dropped"] > 0  # key 2 finds no room
    with_eviction = hwsim.simulate(design, [hwsim.beats(data, 64)], bus_width=64, partitions=2, evict_after=30)
    assert with_eviction.counters["dropped"] == 0
    assert with_eviction.counters["evicted"] >= 1
    assert [r["seq"] for r in with_eviction.records] == [44]  # a d c of key 2


@pytest.mark.parametrize("condition", ["NOT TRUE", "NOT FALSE", "x = 1 AND NOT FALSE", "x = 1 OR NOT TRUE",
                                       "NOT (TRUE AND TRUE)", "f = TRUE", "NOT f", "f"])
def test_boolean_literals_and_fields_match_the_reference(condition):
    checked = check(parse(f"CREATE STREAM s (x UINT8, f BOOL); AFTER MATCH CONTINUE PATTERN (A) DEFINE A AS {condition};"))
    frame = pd.DataFrame({"x": np.array([1, 2, 1], dtype=np.int64), "f": np.array([1, 0, 0], dtype=np.int64)})
    hwsim.run_and_compare(checked, frame, bus_width=8, partitions=1)


@pytest.mark.parametrize("keyed, platform", [(False, None), (True, None), (True, hwsim.Ice40())])
def test_heavy_backpressure_fills_the_fifos_without_losing_a_record(keyed, platform):
    # almost every tuple matches and the sink takes one record in ten cycles: the output
    # FIFOs fill up and the registered stall must hold the pipeline in time
    text = pt.schema() + ("PARTITION BY k " if keyed else "") + "AFTER MATCH CONTINUE PATTERN (P1) DEFINE " \
        + pt.defines() + ";"
    checked = check(parse(text))
    frame = keyed_frame("ab" * 60, [i % 3 for i in range(120)])
    result = hwsim.run_and_compare(checked, frame, bus_width=64, partitions=3, backpressure=0.9, seed=3,
                                   platform=platform)
    assert len(result.records) == 120


@pytest.mark.parametrize("partitions, spills", [(256, False), (64, True)])
def test_only_a_design_that_can_drop_has_a_spill_fifo(partitions, spills):
    # UINT8 keys: 256 partitions are direct-indexed (every key has its entry: nothing can be
    # dropped, and the top leaves the spill FIFO out); 64 are hashed, and a full bucket drops
    text = pt.schema() + "PARTITION BY k AFTER MATCH CONTINUE PATTERN (P0 P3*) DEFINE " + pt.defines() + ";"
    design = lower(check(parse(text)))
    top = Top(design, bus_width=32, partitions=partitions, partitioner="table")
    fragment = Fragment.get(top, None)
    names = [name for _, name, _ in fragment.subfragments]
    assert ("spill" in names) == spills
    n = 300
    frame = keyed_frame("a" * n, [i % 256 for i in range(n)])  # 256 distinct keys
    data = b"".join(design.tuple.to_bytes(r) for r in frame.to_dict("records"))
    result = hwsim.simulate(design, [hwsim.beats(data, 32)], bus_width=32, partitions=partitions, partitioner="table")
    assert (result.counters["dropped"] > 0) == spills and len(result.spilled) == result.counters["dropped"]


@pytest.mark.parametrize("keys, pace, cycles", [([0, 1, 2], 1, 2), ([5], 2, 2), ([0, 0, 1, 2, 2], 1.4, 2),
                                                ([0, 1, 2], 1, 3), ([5], 3, 3), ([0, 0, 1, 2, 2], 1.8, 3),
                                                ([0, 1, 0, 1], 1.5, 3)])
def test_the_two_cycle_update_holds_a_tuple_only_behind_one_of_its_bucket(keys, pace, cycles):
    # --update-cycles 2: a tuple a cycle while the keys take turns; a run of one key a tuple every
    # other cycle (each waits for the write of the one before); a record for every match all along.
    # --update-cycles 3: a tuple waits while its bucket is either of the two before it (0 0 1 2 2:
    # five tuples in nine cycles; 0 1 0 1: each waits a cycle)
    text = pt.schema() + "PARTITION BY k AFTER MATCH CONTINUE PATTERN (P0 P3*) DEFINE " + pt.defines() + ";"
    checked = check(parse(text))
    n = 60
    frame = keyed_frame("ac" * (n // 2), [keys[i % len(keys)] for i in range(n)])
    design = lower(checked)
    data = b"".join(design.tuple.to_bytes(r) for r in frame.to_dict("records"))
    width = design.tuple.nbytes * 8
    result = hwsim.simulate(design, [hwsim.beats(data, width)], bus_width=width, partitions=256,
                            partitioner="table", idle=20, update_cycles=cycles)
    assert hwsim.hw_rows(design, result, checked) == expected_rows(checked, frame)
    taken = result.cycles - 20 - latency(design, 256, "table", cycles)
    assert n * pace - 3 <= taken <= n * pace + 3, taken


@pytest.mark.parametrize("case, cycles", [(case, cycles) for case in ("latency", "backpressure", "spill")
                                          for cycles in (2, 3)])
def test_the_two_cycle_update_in_the_top(case, cycles):
    text = pt.schema() + "PARTITION BY k AFTER MATCH CONTINUE PATTERN (P1) DEFINE " + pt.defines() + ";"
    checked = check(parse(text))
    design = lower(checked)
    if case == "latency":  # two cycles more than the one-cycle update's: the update's, the record's
        # (three-cycle: four, its two, the record's and the register stage after the framer)
        data = design.tuple.to_bytes({"t": 0, "k": 1, "c": "a"})
        result = hwsim.simulate(design, [hwsim.beats(data, 64)], bus_width=64, partitions=4, idle=30,
                                partitioner="table", update_cycles=cycles)
        assert result.first_record_cycle - 1 == latency(design, 4, "table", cycles) == \
            latency(design, 4, "table") + 2 * (cycles - 1)
    elif case == "backpressure":  # the output FIFOs fill while tuples wait behind their bucket's
        frame = keyed_frame("ab" * 60, [i // 3 % 3 for i in range(120)])
        result = hwsim.run_and_compare(checked, frame, bus_width=64, partitions=3, backpressure=0.9, seed=3,
                                       partitioner="table", update_cycles=cycles)
        assert len(result.records) == 120
    else:  # a full bucket: the tuple spilled is the one whose key found no room
        spills = check(parse(pt.schema() + "PARTITION BY k AFTER MATCH CONTINUE PATTERN (P0 P3*) DEFINE "
                             + pt.defines() + ";"))
        design = lower(spills)
        frame = keyed_frame("a" * 12 + "d" * 12, [k for k in range(12)] * 2)
        data = b"".join(design.tuple.to_bytes(r) for r in frame.to_dict("records"))
        one, two = (hwsim.simulate(design, [hwsim.beats(data, 64)], bus_width=64, partitions=4, partitioner="table",
                                   update_cycles=c) for c in (1, cycles))
        assert one.counters["dropped"] > 0
        assert (two.spilled, two.counters, hwsim.hw_rows(design, two, spills)) == \
            (one.spilled, {**one.counters}, hwsim.hw_rows(design, one, spills))


@pytest.mark.parametrize("update_cycles, platform", [(1, None), (2, None), (2, hwsim.Ice40()), (3, None)])
def test_a_record_for_every_tuple_while_the_sink_all_but_stops(update_cycles, platform):
    # every tuple matches, at a tuple a cycle (the keys take turns: none waits behind its bucket),
    # while the sink takes a record one cycle in twenty: the output FIFO stays at its stall level, and
    # the writes in flight when the pipeline stops (STALL_MARGIN; the two-cycle update's second record
    # register one more) must all find room. (The iCE40's FIFO counts a write at once: a slot spare.)
    text = pt.schema() + "PARTITION BY k AFTER MATCH CONTINUE PATTERN (P1) DEFINE " + pt.defines() + ";"
    checked = check(parse(text))
    design = lower(checked)
    n = 150
    frame = keyed_frame("b" * n, [i % 7 for i in range(n)])
    data = b"".join(design.tuple.to_bytes(r) for r in frame.to_dict("records"))
    width = design.tuple.nbytes * 8
    result = hwsim.simulate(design, [hwsim.beats(data, width)], bus_width=width, partitions=16, partitioner="table",
                            backpressure=0.95, seed=1, update_cycles=update_cycles, platform=platform,
                            idle=400)
    assert hwsim.hw_rows(design, result, checked) == expected_rows(checked, frame)
    assert len(result.records) == result.counters["matches_out"] == n


def test_the_latency_of_a_design_without_partition_by_ignores_the_update_cycles():
    # (without PARTITION BY no key waits on a table: the two-cycle update is the one-cycle one)
    design = lower(check(parse(pt.schema() + "PATTERN (P1) DEFINE " + pt.defines() + ";")))
    assert latency(design, 4, "table", 2) == latency(design, 4, "table")
    data = design.tuple.to_bytes({"t": 0, "k": 1, "c": "b"})
    result = hwsim.simulate(design, [hwsim.beats(data, 64)], bus_width=64, partitions=4, idle=30,
                            partitioner="table", update_cycles=2)
    assert result.first_record_cycle - 1 == latency(design, 4, "table", 2)
