"""The command line (SPEC §5): check, graph, match, gen; events files in, match files out."""

from __future__ import annotations

import csv
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from cepc.cli import main

ROOT = Path(__file__).resolve().parent.parent
MARATHON = ROOT / "examples" / "marathon" / "marathon.sql"
MARATHON_SQL = ROOT / "examples" / "marathon" / "marathon_sql.sql"
MARATHON_EVENTS = ROOT / "examples" / "marathon" / "events.csv"


def read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


def test_check_prints_summary(capsys):
    assert main(["check", str(MARATHON)]) == 0
    out = capsys.readouterr().out
    assert "stream marathon: 4 fields, 99 bits per tuple (13 bytes on the wire)" in out
    assert "NFA         9 states, 12 edges, 3 start, 3 accepting" in out
    assert "predicates  7: A NOTB C NOTC D NOTD E" in out


def test_check_reports_errors_without_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.sql"
    bad.write_text("CREATE STREAM s (x UINT8);\nPATTERN (A B)\nDEFINE A AS x = 1, B AS y = 2;\n")
    assert main(["check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{bad}:3:25: error: unknown field 'y' in stream s")
    assert "Traceback" not in err


def test_missing_query_file_is_an_error(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope.sql")]) == 1
    assert "cannot read query file" in capsys.readouterr().err


@pytest.mark.parametrize("query", [MARATHON, MARATHON_SQL])
def test_match_writes_the_expected_file(query, tmp_path):
    out = tmp_path / "m.csv"
    assert main(["match", str(query), "--events", str(MARATHON_EVENTS), "-o", str(out)]) == 0
    assert read_csv(out) == read_csv(ROOT / "examples" / "marathon" / "expected.csv")
    assert read_csv(out)[0] == ["runner", "seq", "query"]


def test_match_reads_parquet_like_csv(tmp_path):
    pq = tmp_path / "e.parquet"
    pd.read_csv(MARATHON_EVENTS).to_parquet(pq)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    assert main(["match", str(MARATHON), "--events", str(MARATHON_EVENTS), "-o", str(a)]) == 0
    assert main(["match", str(MARATHON), "--events", str(pq), "-o", str(b)]) == 0
    assert read_csv(a) == read_csv(b)


@pytest.mark.parametrize("rows, message", [
    ("time,checkpoint,runner,speed\n1,Staten Island,1,2\n2,Brooklin,1,2\n",
     r":3: column checkpoint: 'Brooklin' is not a member of ENUM"),
    ("time,checkpoint,runner,speed\n1,Queens,70000,2\n", r":2: column runner: '70000' is out of range for UINT\(16\)"),
    ("time,checkpoint,runner,speed\n1,Queens,x1,2\n", r":2: column runner: 'x1' is not an integer"),
    ("time,checkpoint,runner\n1,Queens,1\n", r"missing column\(s\) speed"),
    ("time,checkpoint,runner,speed\n5,Queens,1,2\n7,Queens,2,2\n4,Queens,1,2\n",
     r":4: time 4 is earlier than 5 at seq 0 in partition runner=1"),
])
def test_bad_events_name_row_and_column(tmp_path, capsys, rows, message):
    ev = tmp_path / "e.csv"
    ev.write_text(rows)
    assert main(["match", str(MARATHON), "--events", str(ev), "-o", str(tmp_path / "m.csv")]) == 1
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert not (tmp_path / "m.csv").exists()


def test_order_error_names_the_first_bad_row_in_arrival_order(tmp_path, capsys):
    ev = tmp_path / "e.csv"
    ev.write_text("time,checkpoint,runner,speed\n5,Queens,1,2\n5,Queens,2,2\n4,Queens,2,2\n3,Queens,1,2\n")
    assert main(["match", str(MARATHON), "--events", str(ev), "-o", str(tmp_path / "m.csv")]) == 1
    assert f"{ev}:4: time 4 is earlier than 5 at seq 1 in partition runner=2" in capsys.readouterr().err


def test_time_may_interleave_across_partitions(tmp_path):
    # only each partition's own order matters (SPEC §3.1)
    ev = tmp_path / "e.csv"
    ev.write_text("time,checkpoint,runner,speed\n5,Staten Island,1,2\n1,Staten Island,2,2\n6,Queens,1,2\n")
    out = tmp_path / "m.csv"
    assert main(["match", str(MARATHON), "--events", str(ev), "-o", str(out)]) == 0
    assert read_csv(out) == [["runner", "seq", "query"], ["1", "2", "q0"]]


def test_several_queries_share_one_match_file(tmp_path):
    q = tmp_path / "q.sql"
    q.write_text("""CREATE STREAM s (t TIMESTAMP, k UINT8, g UINT8, v UINT8);
        NAME up PARTITION BY k MEASURES COUNT(*) AS n PATTERN (A B) DEFINE A AS v = 1, B AS v = 2;
        NAME any PARTITION BY g AFTER MATCH CONTINUE PATTERN (B) DEFINE B AS v = 2;""")
    ev = tmp_path / "e.csv"
    ev.write_text("t,k,g,v\n1,7,3,1\n2,7,4,2\n3,8,4,2\n")
    out = tmp_path / "m.csv"
    assert main(["match", str(q), "--events", str(ev), "-o", str(out)]) == 0
    assert read_csv(out) == [["k", "g", "seq", "query", "n"],
                             ["7", "", "1", "up", "2"], ["", "4", "1", "any", ""], ["", "4", "2", "any", ""]]


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_gen_makes_events_that_match(tmp_path, suffix):
    ev = tmp_path / f"e.{suffix}"
    assert main(["gen", str(MARATHON), "-n", "5000", "--keys", "50", "--seed", "3", "-o", str(ev)]) == 0
    df = pd.read_csv(ev) if suffix == "csv" else pd.read_parquet(ev)
    assert list(df.columns) == ["time", "checkpoint", "runner", "speed"]
    assert len(df) == 5000 and df["runner"].nunique() == 50
    assert df["time"].is_monotonic_increasing
    out = tmp_path / "m.csv"
    assert main(["match", str(MARATHON), "--events", str(ev), "-o", str(out)]) == 0
    matches = read_csv(out)[1:]
    assert len(matches) > 100  # the walk makes the pattern match often


def test_gen_is_deterministic_and_skew_concentrates_keys(tmp_path):
    a, b, c = (tmp_path / f"{x}.csv" for x in "abc")
    for path in (a, b):
        assert main(["gen", str(MARATHON), "-n", "2000", "--keys", "100", "--seed", "9", "-o", str(path)]) == 0
    assert a.read_text() == b.read_text()
    assert main(["gen", str(MARATHON), "-n", "2000", "--keys", "100", "--seed", "9", "--skew", "1.5",
                 "-o", str(c)]) == 0
    top = pd.read_csv(c)["runner"].value_counts().iloc[0]
    assert top > 2000 / 100 * 5


def test_gen_rejects_more_keys_than_the_key_type_holds(tmp_path, capsys):
    q = tmp_path / "q.sql"
    q.write_text("CREATE STREAM s (k UINT(2), v UINT8); PARTITION BY k PATTERN (A) DEFINE A AS v = 1;")
    assert main(["gen", str(q), "-n", "10", "--keys", "5", "-o", str(tmp_path / "e.csv")]) == 1
    assert "--keys 5 is more than UINT(2) key k can hold" in capsys.readouterr().err


def test_graph_writes_dot(tmp_path):
    out = tmp_path / "nfa.dot"
    assert main(["graph", str(MARATHON), "-o", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("digraph cepc {") and text.count("shape=doublecircle") == 3


@pytest.mark.skipif(shutil.which("dot") is None and os.environ.get("CI") != "true",
                    reason="graphviz 'dot' is not installed (make setup installs it)")
@pytest.mark.parametrize("suffix", ["svg", "png"])
def test_graph_renders_with_graphviz(tmp_path, suffix):
    out = tmp_path / f"nfa.{suffix}"
    assert main(["graph", str(MARATHON), "-o", str(out)]) == 0
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG") if suffix == "png" else b"<svg" in data


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith("cepc ")


def test_gen_orders_every_queries_time_field(tmp_path):
    q = tmp_path / "q.sql"
    q.write_text("""CREATE STREAM s (t TIMESTAMP, n UINT32, k UINT8, v UINT8);
        NAME a PARTITION BY k ORDER BY n PATTERN (A B) DEFINE A AS v = 1, B AS v = 2;
        NAME b PARTITION BY k WITHIN 50 PATTERN (A B) DEFINE A AS v = 1, B AS v = 3;""")
    ev, out = tmp_path / "e.csv", tmp_path / "m.csv"
    assert main(["gen", str(q), "-n", "500", "--keys", "5", "-o", str(ev)]) == 0
    df = pd.read_csv(ev)
    assert df["t"].is_monotonic_increasing and df["n"].is_monotonic_increasing
    assert main(["match", str(q), "--events", str(ev), "-o", str(out)]) == 0


def test_check_summary_singular(tmp_path, capsys):
    q = tmp_path / "q.sql"
    q.write_text("CREATE STREAM s (f BOOL); PATTERN (A) DEFINE A AS f;")
    assert main(["check", str(q)]) == 0
    assert "stream s: 1 field, 1 bit per tuple (1 byte on the wire)" in capsys.readouterr().out


def test_bad_value_error_names_the_earliest_row_over_all_columns(tmp_path, capsys):
    ev = tmp_path / "e.csv"
    ev.write_text("time,checkpoint,runner,speed\n1,Queens,1,2\n2,Queens,2,2\n3,Queens,3,x\n4,Brooklin,1,2\n")
    assert main(["match", str(MARATHON), "--events", str(ev), "-o", str(tmp_path / "m.csv")]) == 1
    assert f"{ev}:4: column speed: 'x' is not an integer" in capsys.readouterr().err
