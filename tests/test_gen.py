"""`cepc gen`'s models: the automaton walk (pattern) and market-like data (series)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cepc.cli import main
from cepc.errors import UsageError
from cepc.gen import choose_model, generate, history_fields
from cepc.lang.check import check
from cepc.lang.parse import parse, parse_file

ROOT = Path(__file__).resolve().parent.parent
FINANCE = [ROOT / "examples" / "finance" / n / f"{n}.sql" for n in ("finance0", "finance2", "finance5")]
MSHAPE = ROOT / "examples" / "mshape" / "mshape.sql"


@pytest.mark.parametrize("query", FINANCE + [MSHAPE])
def test_auto_draws_series_for_queries_that_read_the_partial_match(query):
    checked = check(parse_file(query))
    assert choose_model(checked) == "series"
    assert history_fields(checked) >= {"price"}
    assert "volume" not in history_fields(checked)


def test_auto_keeps_the_pattern_walk_otherwise():
    assert choose_model(check(parse_file(ROOT / "examples" / "marathon" / "marathon.sql"))) == "pattern"
    mixed = check(parse("""CREATE STREAM s (t TIMESTAMP, k UINT8, v UINT8);
        PARTITION BY k PATTERN (A B) DEFINE A AS v < 9, B AS v > LAST(v);
        PARTITION BY k PATTERN (A B) DEFINE A AS v < 9, B AS v > 9;"""))
    assert choose_model(mixed) == "pattern" and choose_model(mixed, "series") == "series"
    with pytest.raises(UsageError, match="--model must be one of auto, pattern, series, not 'walk'"):
        choose_model(mixed, "walk")


def test_series_prices_walk_per_symbol_and_sizes_are_heavy_tailed():
    checked = check(parse_file(FINANCE[0]))  # largeSize AS volume >= 5000
    df = generate(checked, 200_000, 50, seed=3)
    assert list(df.columns) == ["time", "symbol", "price", "volume"]
    assert df["time"].is_monotonic_increasing and df["symbol"].nunique() == 50
    by_symbol = df.sort_values("symbol", kind="stable")
    steps = by_symbol.groupby("symbol")["price"].diff().to_numpy()[1:]
    level = by_symbol["price"].to_numpy()[:-1]
    same = (by_symbol["symbol"].to_numpy()[1:] == by_symbol["symbol"].to_numpy()[:-1])
    steps, level = steps[same], level[same]
    assert 0.30 < (steps == 0).mean() < 0.40  # a third of the trades at an unchanged price
    assert np.abs(steps / level).max() < 0.01  # moves of basis points, never a jump
    assert 0.0002 < np.abs(steps / level)[steps != 0].mean() < 0.002
    moves = np.sign(steps[steps != 0])
    assert 0.55 < (moves[1:] == moves[:-1]).mean() < 0.65  # mild momentum
    assert 500 <= df["price"].min() and df["price"].max() <= 20000  # base levels 1000 … 10000, then drift
    large = (df["volume"] >= 5000).mean()
    assert 0.08 < large < 0.12  # the threshold sits at the 90th percentile
    assert df["volume"].min() >= 1 and df["volume"].median() < 2000  # most trades are small
    again = generate(checked, 200_000, 50, seed=3)
    assert again.equals(df)


def test_series_walks_stay_in_the_field_type():
    checked = check(parse("""CREATE STREAM s (t TIMESTAMP, k UINT8, v UINT8, w INT8, e ENUM('x', 'y'));
        PARTITION BY k PATTERN (A B C) DEFINE A AS e = 'x', B AS v > LAST(v) AND w < MIN(w),
        C AS w > 100;"""))
    df = generate(checked, 20_000, 7, seed=1)
    assert df["v"].between(0, 255).all() and df["w"].between(-128, 127).all()
    assert set(df["e"]) == {"x", "y"} and df["k"].nunique() == 7
    assert (df.groupby("k")["v"].diff().dropna() != 0).mean() > 0.5  # a walk, not constant


def test_gen_model_option_and_message(tmp_path, capsys):
    ev = tmp_path / "e.csv"
    assert main(["gen", str(FINANCE[1]), "-n", "3000", "--keys", "20", "--seed", "2", "-o", str(ev)]) == 0
    assert "3000 events over 20 keys (series model)" in capsys.readouterr().err
    df = pd.read_csv(ev)
    assert len(df) == 3000 and df["symbol"].nunique() == 20
    assert main(["gen", str(FINANCE[1]), "-n", "300", "--model", "pattern", "-o", str(ev)]) == 0
    assert "(pattern model)" in capsys.readouterr().err
    out = tmp_path / "m.csv"
    assert main(["match", str(FINANCE[1]), "--events", str(ev), "-o", str(out)]) == 0
