"""The Spark golden model equals the in-process reference matcher, row for row (SPEC §3, §5)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pandas as pd
import pytest

from cepc.cli import main
from cepc.errors import EventsError
from cepc.golden import spark as golden
from cepc.lang.check import check
from cepc.lang.parse import parse, parse_file

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

if shutil.which("java") is None:  # pragma: no cover - Java 17 is part of the set-up
    pytest.fail("Java is not installed; the Spark golden model needs Java 17", pytrace=False)


@pytest.fixture(scope="module")
def spark():
    return golden.session()


def read(path: Path) -> list[list[str]]:
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


def run_both(query: Path | str, events: Path, tmp_path: Path) -> tuple[list, list]:
    checked = check(parse_file(query)) if isinstance(query, Path) else check(parse(query))
    g, m = tmp_path / "golden.csv", tmp_path / "match.csv"
    golden.golden(checked, events, g)
    qfile = query if isinstance(query, Path) else tmp_path / "q.sql"
    if not isinstance(query, Path):
        qfile.write_text(query)
    assert main(["match", str(qfile), "--events", str(events), "-o", str(m)]) == 0
    return read(g), read(m)


FINANCE = ["mshape/mshape.sql", "finance/finance0/finance0.sql", "finance/finance2/finance2.sql",
           "finance/finance5/finance5.sql"]


@pytest.mark.parametrize("example", ["marathon/marathon.sql", "network/network.sql"] + FINANCE)
def test_examples_match_their_expected_files(spark, example, tmp_path):
    query = ROOT / "examples" / example
    out = tmp_path / "g.csv"
    golden.golden(check(parse_file(query)), query.parent / "events.csv", out)
    assert read(out) == read(query.parent / "expected.csv")


def test_generated_events_in_many_files_equal_the_reference(spark, tmp_path):
    query = ROOT / "examples" / "marathon" / "marathon.sql"
    whole = tmp_path / "all.parquet"
    assert main(["gen", str(query), "-n", "30000", "--keys", "300", "--seed", "4", "-o", str(whole)]) == 0
    frame = pd.read_parquet(whole)
    parts = tmp_path / "parts"
    parts.mkdir()
    for i in range(0, len(frame), 7000):  # several files, taken in name order
        frame.iloc[i:i + 7000].to_parquet(parts / f"part-{i // 7000:03d}.parquet")
    g, m = run_both(query, whole, tmp_path)
    assert g == m and len(g) > 1000
    out = tmp_path / "parts.csv"
    golden.golden(check(parse_file(query)), parts, out)
    assert read(out) == m


def test_several_queries_with_measures_equal_the_reference(spark, tmp_path):
    query = """CREATE STREAM s (t TIMESTAMP, k UINT8, g ENUM('x', 'y'), v UINT8);
        NAME up PARTITION BY k MEASURES COUNT(*) AS n, FIRST(t) AS t0
            PATTERN (A B+ C) DEFINE A AS v < 50, B AS v > LAST(v), C AS v < LAST(v);
        NAME any PARTITION BY g AFTER MATCH CONTINUE WITHIN 40 PATTERN (A . C) DEFINE A AS v < 50, C AS v > 200;
        NAME all AFTER MATCH CONTINUE PATTERN (C C) DEFINE C AS v > 200;"""
    q = tmp_path / "q.sql"
    q.write_text(query)
    ev = tmp_path / "e.csv"
    assert main(["gen", str(q), "-n", "5000", "--keys", "20", "--seed", "2", "-o", str(ev)]) == 0
    g, m = run_both(q, ev, tmp_path)
    assert g == m and len(g) > 50


@pytest.mark.parametrize("example", FINANCE)
def test_finance_queries_on_generated_data_equal_the_reference(spark, example, tmp_path):
    # Hirzel's finance patterns (aggregates in DEFINE, MEASURES, WITHIN) on market-like data: the
    # Spark tasks run the lock-step partial-match engine; `cepc match` runs the reference
    query = ROOT / "examples" / example
    ev = tmp_path / "e.parquet"
    assert main(["gen", str(query), "-n", "60000", "--keys", "60", "--seed", "11", "-o", str(ev)]) == 0
    g, m = run_both(query, ev, tmp_path)
    assert g == m and len(g) > 10
    assert g[0][:3] == ["symbol", "seq", "query"] and len(g[0]) > 5  # with the measures


def test_all_finance_queries_in_one_file_share_one_pass(spark, tmp_path):
    # four queries over one PARTITION BY: one shuffle, every query matched in the same task;
    # the match file's measure columns are the union, in order of first appearance
    texts = [(ROOT / "examples" / e).read_text() for e in FINANCE]
    stream = texts[0][texts[0].index("CREATE STREAM"):texts[0].index(");", texts[0].index("CREATE STREAM")) + 2]
    body = "\n".join(t[t.index("NAME"):] for t in texts)
    q = tmp_path / "finance.sql"
    q.write_text(stream + "\n" + body)
    ev = tmp_path / "e.csv"
    assert main(["gen", str(q), "-n", "40000", "--keys", "30", "--seed", "12", "-o", str(ev)]) == 0
    g, m = run_both(q, ev, tmp_path)
    assert g == m
    assert {r[2] for r in g[1:]} == {"mshape", "finance0", "finance2", "finance5"}
    assert g[0] == ["symbol", "seq", "query", "started", "steps", "top", "closing", "n", "size", "entry",
                    "peak", "base", "took", "low", "high"]


def test_first_bad_row_is_reported(spark, tmp_path):
    query = ROOT / "examples" / "marathon" / "marathon.sql"
    ev = tmp_path / "e.csv"
    ev.write_text("time,checkpoint,runner,speed\n1,Queens,1,2\n2,Queens,2,2\n3,Queens,3,x\n4,Brooklin,1,2\n")
    with pytest.raises(EventsError, match=r":4: column speed: 'x' is not an integer"):
        golden.golden(check(parse_file(query)), ev, tmp_path / "g.csv")
    ev.write_text("time,checkpoint,runner,speed\n5,Queens,1,2\n5,Queens,2,2\n4,Queens,2,2\n3,Queens,1,2\n")
    with pytest.raises(EventsError, match=r":4: time 4 is earlier than 5 at seq 1 in partition runner=2"):
        golden.golden(check(parse_file(query)), ev, tmp_path / "g.csv")


def test_parquet_bad_values_are_found_in_read_and_unread_columns(spark, tmp_path):
    # Parquet takes a faster road (ENUM codes, narrowed integers, fields no query reads left out
    # when the footers prove them valid); bad values must still be named by their first row.
    query = check(parse_file(ROOT / "examples" / "marathon" / "marathon.sql"))
    good = {"time": [1, 2, 3, 4], "checkpoint": ["Queens"] * 4, "runner": [1, 2, 3, 1], "speed": [2, 2, 2, 2]}
    ev = tmp_path / "e.parquet"
    pd.DataFrame(good).to_parquet(ev)
    golden.golden(query, ev, tmp_path / "g.csv")  # valid: no error
    bad = dict(good, checkpoint=["Queens", "Queens", "Brooklin", "Nowhere"])
    pd.DataFrame(bad).to_parquet(ev)
    with pytest.raises(EventsError, match=r"e.parquet: row 2: column checkpoint: 'Brooklin' is not a member"):
        golden.golden(query, ev, tmp_path / "g.csv")
    bad = dict(good, speed=[2, 2, 70000, 2])  # speed is UINT16 and read by no query
    pd.DataFrame(bad).to_parquet(ev)
    with pytest.raises(EventsError, match=r"row 2: column speed: 70000 is out of range for UINT\(16\)"):
        golden.golden(query, ev, tmp_path / "g.csv")
    bad = dict(good, runner=[1, 2, -3, 1])  # a key out of range
    pd.DataFrame(bad).to_parquet(ev)
    with pytest.raises(EventsError, match=r"row 2: column runner: -3 is out of range"):
        golden.golden(query, ev, tmp_path / "g.csv")


def test_csv_and_parquet_give_the_same_file(spark, tmp_path):
    query = ROOT / "examples" / "network" / "network.sql"
    checked = check(parse_file(query))
    frame = pd.read_csv(query.parent / "events.csv", dtype=str)
    from cepc.events import load_events

    load_events(query.parent / "events.csv", checked.stream).to_parquet(tmp_path / "e.parquet")
    golden.golden(checked, tmp_path / "e.parquet", tmp_path / "p.csv")
    assert read(tmp_path / "p.csv") == read(query.parent / "expected.csv") and len(frame) > 0


def test_query_reading_no_field_on_parquet(spark, tmp_path):
    text = "CREATE STREAM s (x UINT8, f BOOL);\nAFTER MATCH CONTINUE PATTERN (A B) DEFINE A AS TRUE, B AS NOT FALSE;"
    ev = tmp_path / "e.parquet"
    pd.DataFrame({"x": [1, 2, 3], "f": [1, 0, 1]}).to_parquet(ev)
    golden.golden(check(parse(text)), ev, tmp_path / "g.csv")
    assert read(tmp_path / "g.csv") == [["seq", "query"], ["1", "q0"], ["2", "q0"]]


def test_packed_shuffle_carries_every_type_exactly(spark, tmp_path):
    # The Parquet road bit-packs ENUM codes, proven integers (offset from their minimum, signed
    # and up to 64-bit) and seq into 63-bit words, over several words; keys packed and loose.
    query = """CREATE STREAM s (t TIMESTAMP, a INT64, b UINT64, c INT8, e ENUM('x', 'y', 'z'),
                                n CHAR(3), f BOOL, u UINT32);
        NAME wide PARTITION BY b, n AFTER MATCH CONTINUE PATTERN (P Q+)
            DEFINE P AS a < 0 AND e = 'x', Q AS c >= -3 OR f;
        NAME neg PARTITION BY c, e PATTERN (P Q R?) DEFINE P AS a > 0, Q AS u > 4000000000, R AS NOT f;"""
    import numpy as np

    rng = np.random.default_rng(7)
    n = 6000
    frame = pd.DataFrame({
        "t": np.arange(n, dtype=np.int64) * 3,
        "a": rng.choice([-(1 << 40), -5, 0, 9, (1 << 40)], n),
        "b": rng.choice(np.array([(1 << 64) - 1, (1 << 63) + 4, 17], dtype=np.uint64), n),
        "c": rng.integers(-128, 128, n).astype(np.int8),
        "e": rng.choice(["x", "y", "z"], n),
        "n": rng.choice(["ab", "abc", ""], n),
        "f": rng.integers(0, 2, n).astype(bool),
        "u": rng.choice(np.array([0, 4000000001, (1 << 32) - 1], dtype=np.uint32), n),
    })
    q = tmp_path / "q.sql"
    q.write_text(query)
    parts = tmp_path / "parts"
    parts.mkdir()
    for i in range(0, n, 2500):
        frame.iloc[i:i + 2500].to_parquet(parts / f"p{i // 2500}.parquet")
    whole = tmp_path / "all.parquet"
    frame.to_parquet(whole)
    checked = check(parse(query))
    numbered, total = golden._number_parquet(golden._read(spark, whole, checked.stream), [whole])
    _, packing = golden._pack_parquet(numbered, [whole], checked.stream, set(frame.columns), total)
    assert packing.words == 2 and packing.loose == ("b", "n")  # b spans 64 bits, n is text
    assert packing.slot("a").base == -(1 << 40) and packing.slot("e").members == ("x", "y", "z")
    g, m = run_both(q, whole, tmp_path)
    assert g == m and len(g) > 500
    assert {r[0] for r in g[1:] if r[0]} == {str((1 << 64) - 1), str((1 << 63) + 4), "17"}
    golden.golden(check(parse(query)), parts, tmp_path / "parts.csv")
    assert read(tmp_path / "parts.csv") == m


def test_parquet_nulls_travel_loose_and_are_named(spark, tmp_path):
    query = check(parse_file(ROOT / "examples" / "marathon" / "marathon.sql"))
    ev = tmp_path / "e.parquet"
    pd.DataFrame({"time": [1, 2, 3, 4], "checkpoint": ["Queens"] * 4, "runner": pd.array([1, 2, None, 1], "Int64"),
                  "speed": [2, 2, 2, 2]}).to_parquet(ev)
    with pytest.raises(EventsError, match=r"row 2: column runner: .* is not an integer"):
        golden.golden(query, ev, tmp_path / "g.csv")
