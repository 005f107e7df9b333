"""Events files in, match files out (SPEC §5).

Events: CSV with a header, or Parquet; one column per stream field (ENUM and
CHAR as their strings, BOOL as 0/1 or true/false); row order is arrival order.
Loading validates every value against the schema and names the first bad row.

Match files: CSV, header ``<key fields…>,seq,query,<measures…>``, one row per
report sorted by ``seq`` then query order. With several queries the key and
measure columns are the union over the queries, in order of first appearance;
a query leaves the columns it lacks empty.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import EventsError
from .lang import ast
from .lang.check import Checked


def kind_of(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix in (".csv", ".txt", ""):
        return "csv"
    raise EventsError(f"{path}: unknown events format {suffix!r}; use .csv or .parquet")


def where(path: Path, kind: str, row: int) -> str:
    # CSV: the header is line 1, so data row i is line i + 2
    return f"{path}:{row + 2}" if kind == "csv" else f"{path}: row {row}"


def load_events(path: str | Path, stream: ast.Stream) -> pd.DataFrame:
    """Read and validate an events file; columns come back in schema order with canonical types."""
    path = Path(path)
    kind = kind_of(path)
    try:
        if kind == "csv":
            raw = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
        else:
            raw = pd.read_parquet(path)
    except FileNotFoundError:
        raise EventsError(f"{path}: no such events file") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, OSError, ValueError) as e:
        raise EventsError(f"{path}: cannot read events: {e}") from None
    missing = [f.name for f in stream.fields if f.name not in raw.columns]
    if missing:
        raise EventsError(f"{path}: missing column(s) {', '.join(missing)}; stream {stream.name} has fields "
                          + ", ".join(f.name for f in stream.fields))
    return convert_frame(raw, stream, path, kind)


def convert_frame(raw: pd.DataFrame, stream: ast.Stream, path: Path, kind: str,
                  rows: np.ndarray | None = None) -> pd.DataFrame:
    """Every field of ``raw`` converted; the error, if any, names the earliest bad row over all columns."""
    out, errors = {}, []
    for f in stream.fields:
        try:
            out[f.name] = convert_column(raw[f.name].reset_index(drop=True), f, path, kind, rows)
        except EventsError as e:
            errors.append(e)
    if errors:
        raise min(errors, key=lambda e: e.row if e.row is not None else -1)
    return pd.DataFrame(out)


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def convert_column(col: pd.Series, f: ast.FieldDef, path: Path, kind: str,
                   rows: np.ndarray | None = None) -> pd.Series:
    """One column of an events file → canonical values, or an :class:`EventsError` naming the first bad row.

    ``rows`` gives each value's arrival index when ``col`` is a slice of the file (default: 0, 1, …).
    """
    t = f.type

    def fail(i: int, why: str):
        value = col.iloc[i]
        row = int(rows[i]) if rows is not None else i
        raise EventsError(f"{where(path, kind, row)}: column {f.name}: {value!r} {why}", row)

    if isinstance(t, ast.EnumType):
        values = col.astype(str)
        bad = ~values.isin(t.members).to_numpy()
        if bad.any():
            fail(_first_bad(bad), f"is not a member of {t}")
        return values.astype(object)
    if isinstance(t, ast.CharType):
        values = col.astype(str)
        lengths = values.map(lambda s: len(s.encode())).to_numpy()
        bad = lengths > t.length
        if bad.any():
            fail(_first_bad(bad), f"is longer than {t.length} bytes (CHAR({t.length}))")
        return values.astype(object)
    if isinstance(t, ast.UIntType) and t.is_bool:
        text = col.astype(str).str.strip().str.lower()
        mapping = {"0": 0, "1": 1, "false": 0, "true": 1}
        bad = ~text.isin(list(mapping)).to_numpy()
        if bad.any():
            fail(_first_bad(bad), "is not a BOOL (0, 1, true or false)")
        return text.map(mapping).astype(np.int64)
    # integers
    lo, hi = t.range
    if col.dtype.kind in "iu":
        values = col
    else:
        text = col.astype(str).str.strip()
        ok = text.str.fullmatch(r"[+-]?[0-9]+").to_numpy()
        if not ok.all():
            fail(_first_bad(~ok), f"is not an integer ({t})")
        try:
            values = text.astype(np.int64)
        except OverflowError:
            try:
                values = text.astype(np.uint64)
            except OverflowError:
                values = text.map(int).astype(object)
    arr = values.to_numpy()
    if arr.dtype == np.uint64:
        bad = arr > np.uint64(hi)
    elif arr.dtype == object:
        bad = np.array([not lo <= int(v) <= hi for v in arr], dtype=bool)
    else:
        bad = (arr < lo) | (arr > min(hi, (1 << 63) - 1)) if lo >= -(1 << 63) else np.zeros(len(arr), bool)
    if len(arr) and bad.any():
        fail(_first_bad(bad), f"is out of range for {t} ({lo} … {hi})")
    return values.reset_index(drop=True)


def check_order(frame: pd.DataFrame, checked: Checked, path: str | Path, seqs: np.ndarray | None = None) -> None:
    """SPEC §3.1: each query's time field must not decrease within a partition.

    Names the first row, in arrival order, that breaks it for any query.
    """
    if seqs is None:
        seqs = np.arange(len(frame))
    worst = None  # (row, previous row of its partition, query)
    for q in checked.queries:
        if q.order_by is None or len(frame) < 2:
            continue
        keys = list(q.partition_by)
        if keys:
            group = frame.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
        else:
            group = np.zeros(len(frame), dtype=np.int64)
        time = frame[q.order_by].to_numpy()
        order = np.lexsort((np.arange(len(frame)), group))
        g, t = group[order], time[order]
        back = (g[1:] == g[:-1]) & (t[1:] < t[:-1])
        if back.any():
            hits = np.flatnonzero(back)
            i = hits[np.argmin(order[hits + 1])]  # the earliest offending row of this query
            row, prev = int(order[i + 1]), int(order[i])
            if worst is None or row < worst[0]:
                worst = (row, prev, q)
    if worst is None:
        return
    row, prev, q = worst
    keys = list(q.partition_by)
    place = where(Path(path), kind_of(Path(path)), row)
    part = "partition " + ", ".join(f"{k}={frame[k].iloc[row]}" for k in keys) if keys else "the stream"
    t, t_prev = frame[q.order_by].iloc[row], frame[q.order_by].iloc[prev]
    raise EventsError(f"{place}: {q.order_by} {t} is earlier than {t_prev} at seq {int(seqs[prev])} in {part}; "
                      f"query {q.name} needs non-decreasing {q.order_by} (cepc never reorders)", row)


def match_columns(checked: Checked) -> tuple[list[str], list[str]]:
    """Key and measure columns of the match file for this query file."""
    keys: list[str] = []
    measures: list[str] = []
    for q in checked.queries:
        keys += [k for k in q.partition_by if k not in keys]
        measures += [m.alias for m in q.measures if m.alias not in measures]
    return keys, measures


def format_value(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    return str(v)


def match_rows(checked: Checked, frame: pd.DataFrame, matches, seqs: np.ndarray | None = None) -> list[list[str]]:
    keys, measures = match_columns(checked)
    if seqs is None:
        seqs = np.arange(len(frame))
    key_values = {k: frame[k].tolist() for k in keys}
    rows = []
    for m in matches:
        q = checked.queries[m.query]
        row = [format_value(key_values[k][m.row]) if k in q.partition_by else "" for k in keys]
        row += [str(int(seqs[m.row])), q.name]
        values = {mm.alias: v for mm, v in zip(q.measures, m.measures)}
        row += [format_value(values[a]) if a in values else "" for a in measures]
        rows.append(row)
    return rows


def write_matches(path: str | Path, checked: Checked, rows: list[list[str]]) -> None:
    keys, measures = match_columns(checked)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(keys + ["seq", "query"] + measures)
        w.writerows(rows)


def read_matches(path: str | Path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="") as fh:
        r = csv.reader(fh)
        header = next(r, [])
        return header, list(r)
