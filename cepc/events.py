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
        if isinstance(value, np.generic):  # name the value as the user wrote it, not numpy's repr
            value = value.item()
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


def group_codes(frame: pd.DataFrame, fields) -> np.ndarray:
    """A dense integer code per row for its partition (all 0 without PARTITION BY)."""
    fields = list(fields)
    if not fields or len(frame) == 0:
        return np.zeros(len(frame), dtype=np.int64)
    if len(fields) == 1:
        return pd.factorize(frame[fields[0]], sort=False)[0].astype(np.int64)
    return frame.groupby(fields, sort=False, dropna=False).ngroup().to_numpy().astype(np.int64)


def grouped_order(group: np.ndarray) -> np.ndarray:
    """Row indices grouped by partition code, arrival order within each partition (a stable sort;
    codes below 2^16 take numpy's linear-time radix sort)."""
    if len(group) and group.max() < (1 << 16):
        return np.argsort(group.astype(np.uint16), kind="stable")
    return np.argsort(group, kind="stable")


def order_violation(group: np.ndarray, times: np.ndarray, order: np.ndarray | None = None) -> tuple[int, int] | None:
    """SPEC §3.1 for one query over rows in arrival order: the first row whose time is below the
    previous time of its partition, as (row, that previous row), or None.

    ``order``: :func:`grouped_order` of ``group``, if the caller has it already.
    """
    if len(times) < 2:
        return None
    if order is None:
        order = grouped_order(group)
    g, t = group[order], times[order]
    back = (g[1:] == g[:-1]) & (t[1:] < t[:-1])
    if not back.any():
        return None
    hits = np.flatnonzero(back)
    i = hits[np.argmin(order[hits + 1])]  # the earliest offending row
    return int(order[i + 1]), int(order[i])


def order_error(frame: pd.DataFrame, q: ast.Query, row: int, prev: int, seqs: np.ndarray,
                path: str | Path, kind: str) -> EventsError:
    """The error for an order violation found by :func:`order_violation` (rows index ``frame``)."""
    keys = list(q.partition_by)
    place = where(Path(path), kind, int(seqs[row]))
    part = "partition " + ", ".join(f"{k}={frame[k].iloc[row]}" for k in keys) if keys else "the stream"
    t, t_prev = frame[q.order_by].iloc[row], frame[q.order_by].iloc[prev]
    return EventsError(f"{place}: {q.order_by} {t} is earlier than {t_prev} at seq {int(seqs[prev])} in {part}; "
                       f"query {q.name} needs non-decreasing {q.order_by} (cepc never reorders)", int(seqs[row]))


def first_order_error(frame: pd.DataFrame, queries, path: str | Path, kind: str,
                      seqs: np.ndarray | None = None, groups: dict | None = None) -> EventsError | None:
    """The order error (SPEC §3.1) at the earliest row over ``queries``, or None.

    ``groups`` maps a PARTITION BY tuple to (codes, grouped order), computed once per caller.
    """
    if seqs is None:
        seqs = np.arange(len(frame))
    worst = None  # (row, previous row of its partition, query)
    for q in queries:
        if q.order_by is None:
            continue
        if groups is not None and q.partition_by in groups:
            group, order = groups[q.partition_by]
        else:
            group = group_codes(frame, q.partition_by)
            order = None
        bad = order_violation(group, frame[q.order_by].to_numpy(), order)
        if bad is not None and (worst is None or bad[0] < worst[0]):
            worst = (*bad, q)
    if worst is None:
        return None
    row, prev, q = worst
    return order_error(frame, q, row, prev, seqs, path, kind)


def check_order(frame: pd.DataFrame, checked: Checked, path: str | Path, seqs: np.ndarray | None = None) -> None:
    """SPEC §3.1: each query's time field must not decrease within a partition.

    Raises the error naming the first row, in arrival order, that breaks it for any query.
    """
    error = first_order_error(frame, checked.queries, path, kind_of(Path(path)), seqs)
    if error is not None:
        raise error


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


def write_match_table(path: str | Path, table) -> None:
    """Write a match file from an Arrow table already in match-file column order (null → empty
    cell), byte-identical to :func:`write_matches`: the csv module's minimal quoting."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    with open(path, "w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerow(table.column_names)
    try:  # Arrow's writer is fast; with no quoting it refuses any value that would need quotes
        with open(path, "ab") as fh:
            pacsv.write_csv(table, fh, pacsv.WriteOptions(include_header=False, quoting_style="none"))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        with open(path, "a", newline="") as fh:
            rows = zip(*(["" if v is None else str(v) for v in c.to_pylist()] for c in table.columns))
            csv.writer(fh, lineterminator="\n").writerows(rows)


def read_matches(path: str | Path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="") as fh:
        r = csv.reader(fh)
        header = next(r, [])
        return header, list(r)
