"""The golden model: the reference matcher at scale on Spark (``cepc golden``).

pyspark is imported inside functions: ``cepc check`` must not start a JVM.

Plan of the job, per query file:

1. Read the events (CSV with a header, or Parquet; a file or a directory of
   files) as they are, every column a string for CSV.
2. Number the rows in arrival order — file name order, then position in the
   file — without a global sort: one aggregation counts the rows of each
   (file, Spark partition) piece, the driver turns the counts into offsets,
   and ``seq`` = offset + position within the piece.
3. For each query, repartition by its PARTITION BY fields, sort each Spark
   partition by key and ``seq``, and run the reference matcher over each
   partition with ``mapInPandas``: one matcher per Spark partition (not per
   key), predicates evaluated column-wise over Arrow batches.
4. Bad values and out-of-order time fields come back as error rows, so the
   driver reports the first bad row in arrival order, exactly as ``cepc match``.
5. Collect the reports, sort by ``seq`` then query, write the match file.

Why ``mapInPandas`` over ``applyInPandas``: ``applyInPandas`` calls Python
once per key, and with thousands of keys that call overhead dominates; a
partition-wide matcher keeps per-key state in a dict and pays it once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .. import events
from ..errors import EventsError, ToolError
from ..lang import ast
from ..lang.check import Checked

_ERROR = "__cepc_error__"


@dataclass
class GoldenStats:
    events: int
    matches: int
    seconds: float  # wall time of the Spark job, session start excluded


def session(master: str = "local[*]"):
    """The one SparkSession of this process (created on first use)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", _python())
    builder = (SparkSession.builder.master(master).appName("cepc-golden")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
               .config("spark.sql.shuffle.partitions", str(max(2, (os.cpu_count() or 2) * 2)))
               .config("spark.ui.showConsoleProgress", "true")
               .config("spark.driver.memory", os.environ.get("CEPC_SPARK_DRIVER_MEMORY", "4g")))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _python() -> str:
    import sys

    return sys.executable


def _data_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(("_", ".")))


def _is_parquet(path: Path) -> bool:
    files = _data_files(path)
    return bool(files) and files[0].suffix.lower() in (".parquet", ".pq")


def _read(spark, path: Path, stream: ast.Stream):
    from pyspark.sql import functions as F

    if not path.exists():
        raise EventsError(f"{path}: no such events file")
    files = _data_files(path)
    if not files:
        raise EventsError(f"{path}: no events files in this directory")
    suffix = files[0].suffix
    if suffix.lower() in (".parquet", ".pq"):
        df = spark.read.parquet(str(path))
    elif suffix.lower() in (".csv", ".txt", ""):
        df = spark.read.csv(str(path), header=True, inferSchema=False)
    else:
        raise EventsError(f"{path}: unknown events format {suffix!r}; use .csv or .parquet")
    missing = [f.name for f in stream.fields if f.name not in df.columns]
    if missing:
        raise EventsError(f"{path}: missing column(s) {', '.join(missing)}; stream {stream.name} has fields "
                          + ", ".join(f.name for f in stream.fields))
    for f in stream.fields:
        # CSV columns stay text (checked in Python with the row named); Parquet integers stay
        # native; ENUM and CHAR values are strings either way
        if isinstance(f.type, (ast.EnumType, ast.CharType)):
            df = df.withColumn(f.name, F.col(f.name).cast("string"))
    return df.select(*(f.name for f in stream.fields))


def _number_rows(df):
    """Add ``seq``: the row's index in arrival order (file name, then position in the file)."""
    from pyspark.sql import functions as F

    df = df.withColumn("_file", F.input_file_name()).withColumn("_pid", F.spark_partition_id()) \
           .withColumn("_mid", F.monotonically_increasing_id())
    pieces = df.groupBy("_file", "_pid").agg(F.count("*").alias("n"), F.min("_mid").alias("first")).collect()
    pieces.sort(key=lambda r: (r["_file"], r["_pid"]))
    offsets, total = [], 0
    for r in pieces:
        offsets.append((r["_file"], r["_pid"], total - r["first"]))
        total += r["n"]
    spark = df.sparkSession
    table = spark.createDataFrame(offsets, "_file string, _pid int, _shift long")
    df = df.join(F.broadcast(table), ["_file", "_pid"]).withColumn("seq", F.col("_mid") + F.col("_shift"))
    return df.drop("_file", "_pid", "_mid", "_shift"), total


def _output_schema(checked: Checked) -> str:
    keys, measures = events.match_columns(checked)
    cols = ["seq long", "query int", f"{_ERROR} string"] + [f"`k_{k}` string" for k in keys] \
        + [f"`m_{m}` string" for m in measures]
    return ", ".join(cols)


def _matcher_task(checked: Checked, qi: int, path_text: str, kind: str):
    """The function each Spark partition runs: validate, check order, match, emit rows."""

    def run(batches):
        from ..nfa import reference

        q = checked.queries[qi]
        keys, measures = events.match_columns(checked)
        qm = reference.QueryMatcher(checked, qi)
        last_time: dict = {}  # partition key → (time, seq) of its latest tuple, across batches
        first_error = None  # (seq, message): rows come sorted by key, so keep the smallest seq

        def note(seq: int, message: str):
            nonlocal first_error
            if first_error is None or seq < first_error[0]:
                first_error = (seq, message)

        for raw in batches:
            if raw.empty:
                continue
            seqs = raw["seq"].to_numpy()
            try:
                frame = events.convert_frame(raw, checked.stream, Path(path_text), kind, seqs)
            except EventsError as e:
                note(e.row if e.row is not None else int(seqs[0]), str(e))
                continue
            pkeys = reference.partition_keys(frame, q.partition_by)
            if q.order_by:
                bad = _order_violation(frame, q, pkeys, seqs, last_time)
                if bad is not None:
                    i, prev_time, prev_seq = bad
                    part = ", ".join(f"{f}={frame[f].iloc[i]}" for f in q.partition_by)
                    place = events.where(Path(path_text), kind, int(seqs[i]))
                    note(int(seqs[i]), f"{place}: {q.order_by} {frame[q.order_by].iloc[i]} is earlier than "
                                       f"{prev_time} at seq {prev_seq} in {'partition ' + part if part else 'the stream'}; "
                                       f"query {q.name} needs non-decreasing {q.order_by} (cepc never reorders)")
            if first_error is not None:
                continue  # only looking for an earlier error now; the matches would be thrown away
            matches = qm.run(frame, pkeys, seqs)
            if not matches:
                continue
            rows = np.fromiter((mt.row for mt in matches), dtype=np.int64, count=len(matches))
            out = pd.DataFrame({"seq": seqs[rows].astype(np.int64), "query": np.full(len(rows), qi, dtype=np.int32),
                                _ERROR: None})
            for k in keys:
                out[f"k_{k}"] = frame[k].to_numpy()[rows].astype(str) if k in q.partition_by else None
            mine = [mm.alias for mm in q.measures]
            for name in measures:
                out[f"m_{name}"] = ([events.format_value(mt.measures[mine.index(name)]) for mt in matches]
                                    if name in mine else None)
            yield out
        if first_error is not None:
            yield _error_row(checked, *first_error)

    return run


def _order_violation(frame: pd.DataFrame, q: ast.Query, pkeys: list, seqs: np.ndarray, last_time: dict):
    """The first row (rows are sorted by key, then seq) whose time is below its key's previous one.

    Returns (row, previous time, previous seq) or None; updates ``last_time``.
    """
    times = frame[q.order_by].to_numpy()
    n = len(times)
    if n == 0:
        return None
    keys = np.empty(n, dtype=object)
    keys[:] = pkeys if q.partition_by else [0] * n
    same = np.zeros(n, dtype=bool)
    same[1:] = keys[1:] == keys[:-1]
    back = np.zeros(n, dtype=bool)
    back[1:] = same[1:] & (times[1:] < times[:-1])
    starts = np.flatnonzero(~same)  # first row of each key in this batch: compare with the last batch
    for i in starts:
        prev = last_time.get(keys[i])
        if prev is not None and times[i] < prev[0]:
            back[i] = True
    hits = np.flatnonzero(back)
    if len(hits):
        i = int(hits[np.argmin(seqs[hits])])
        if same[i]:
            return i, times[i - 1], int(seqs[i - 1])
        prev = last_time[keys[i]]
        return i, prev[0], prev[1]
    ends = np.append(starts[1:] - 1, n - 1)
    for i in ends:
        last_time[keys[i]] = (times[i], int(seqs[i]))
    return None


def _error_row(checked: Checked, seq: int, message: str) -> pd.DataFrame:
    keys, measures = events.match_columns(checked)
    row = {"seq": [seq], "query": [-1], _ERROR: [message]}
    row.update({f"k_{k}": [None] for k in keys})
    row.update({f"m_{m}": [None] for m in measures})
    return pd.DataFrame(row)


def golden(checked: Checked, events_path: str | Path, output: str | Path, master: str = "local[*]") -> GoldenStats:
    """Run every query of ``checked`` over the events on Spark and write the match file."""
    import time

    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    path = Path(events_path)
    spark = session(master)
    t0 = time.perf_counter()
    try:
        df = _read(spark, path, checked.stream)
        df, total = _number_rows(df)
        if len(checked.queries) > 1:  # several passes over the numbered input; one pass is cheaper uncached
            df = df.cache()
        schema = _output_schema(checked)
        results = []
        for qi, q in enumerate(checked.queries):
            keyed = df.repartition(*q.partition_by) if q.partition_by else df.repartition(1)
            keyed = keyed.sortWithinPartitions(*q.partition_by, "seq")
            task = _matcher_task(checked, qi, str(path), "parquet" if _is_parquet(path) else "csv")
            results.append(keyed.mapInPandas(task, schema))
        out = results[0]
        for r in results[1:]:
            out = out.unionByName(r)
        found = out.toPandas()
        if len(checked.queries) > 1:
            df.unpersist()
    except (Py4JJavaError, PySparkException) as e:
        text = str(e)
        raise ToolError("the Spark job failed", ["spark", master], text[-3000:]) from None
    errors = found[found[_ERROR].notna()]
    if len(errors):
        first = errors.sort_values("seq").iloc[0]
        raise EventsError(first[_ERROR])
    found = found.sort_values(["seq", "query"], kind="stable")
    keys, measures = events.match_columns(checked)
    rows = [[("" if pd.isna(v) else str(v)) for v in r] for r in
            zip(*(found[f"k_{k}"] for k in keys), found["seq"].astype(str),
                (checked.queries[int(i)].name for i in found["query"]),
                *(found[f"m_{m}"] for m in measures))]
    events.write_matches(output, checked, rows)
    return GoldenStats(total, len(rows), time.perf_counter() - t0)
