"""The golden model: the reference matcher at scale on Spark (``cepc golden``).

pyspark is imported inside functions: ``cepc check`` must not start a JVM.

Plan of the job, per query file:

1. Read the events (CSV with a header, or Parquet; a file or a directory of
   files, taken in file-name order) as they are, every column a string for CSV.
2. Number the rows in arrival order without a global sort. Parquet: the
   driver reads each file's row count from its footer, and ``seq`` = the
   file's offset + Spark's ``_metadata.row_index``. CSV: one aggregation
   counts the rows of each (file, Spark partition) piece, the driver turns the
   counts into offsets, and ``seq`` = offset + position within the piece.
3. One shuffle per distinct PARTITION BY (queries that share it share the
   pass): hash-repartition by the key, then ``mapInArrow`` hands each Spark
   partition's Arrow batches to Python, which orders them by ``seq``,
   validates the values, checks the time order, and matches every query of
   the pass — with the lock-step DFA of :mod:`cepc.nfa.dfa` where the query
   allows it (no aggregates, measures or WITHIN), else the reference
   matcher's partial-match engine.
4. Bad values and out-of-order time fields come back as error rows, so the
   driver reports the first bad row in arrival order, exactly as ``cepc match``.
5. Collect the reports (Arrow), sort by ``seq`` then query, write the match file.

Why ``mapInArrow`` over ``applyInPandas``: ``applyInPandas`` calls Python once
per key — with thousands of keys that overhead dominates — and converts every
group to pandas; a partition-wide call over Arrow batches pays both once, and
having the whole Spark partition in hand lets the DFA step all its keys at once
(no Spark-side sort either: numpy orders the partition by ``seq``).
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
from ..nfa import dfa, reference

_ERROR = "__cepc_error__"


@dataclass
class GoldenStats:
    events: int
    matches: int
    seconds: float  # wall time of the Spark job, session start excluded
    phases: dict[str, float] | None = None  # seconds: numbering, matching (the Spark job), writing


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
    local = _local_dir(master)
    if local:
        builder = builder.config("spark.local.dir", local)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _local_dir(master: str) -> str | None:
    """Where an embedded Spark keeps its shuffle files: ``CEPC_SPARK_LOCAL_DIR``, else a directory
    in RAM (/dev/shm) when it has room, since shuffle files on a slow disk dominate the job."""
    chosen = os.environ.get("CEPC_SPARK_LOCAL_DIR")
    if chosen or not master.startswith("local"):
        return chosen
    shm = Path("/dev/shm")
    try:
        st = os.statvfs(shm)
    except OSError:
        return None
    if st.f_bavail * st.f_frsize < 4 << 30 or not os.access(shm, os.W_OK):
        return None
    path = shm / f"cepc-spark-{os.getuid()}"
    path.mkdir(exist_ok=True)
    return str(path)


def _tasks(spark) -> int:
    """Spark partitions per shuffle: two per core, so both stay busy while one task finishes."""
    return max(2, 2 * spark.sparkContext.defaultParallelism)


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


def _number_parquet(df, files: list[Path]):
    """Add ``seq`` from each file's offset (footer row counts) and Spark's row index in the file."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    offsets, total = [], 0
    for f in files:
        offsets += [F.lit(f.name), F.lit(total)]
        total += pq.read_metadata(f).num_rows
    if len({f.name for f in files}) != len(files):
        raise EventsError(f"{files[0].parent}: events file names must be unique")
    seq = F.create_map(*offsets)[F.col("_metadata.file_name")] + F.col("_metadata.row_index")
    return df.withColumn("seq", seq.cast("long")), total


def _proven_range(files: list[Path], name: str) -> tuple[int, int] | None:
    """(min, max) of an integer column from the Parquet footers, if every row group has statistics
    and no nulls; else None (the values must then be checked row by row)."""
    import pyarrow.parquet as pq

    lo = hi = None
    for f in files:
        meta = pq.read_metadata(f)
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            col = next((rg.column(i) for i in range(rg.num_columns) if rg.column(i).path_in_schema == name), None)
            st = col.statistics if col is not None else None
            if st is None or not st.has_min_max or st.null_count != 0 or not isinstance(st.min, int):
                return None
            lo = st.min if lo is None else min(lo, st.min)
            hi = st.max if hi is None else max(hi, st.max)
    return None if lo is None else (lo, hi)


_SPARK_INTS = (("byte", 8), ("short", 16), ("int", 32), ("long", 64))


def _narrow_type(lo: int, hi: int) -> str | None:
    """The narrowest Spark integer type holding [lo, hi]."""
    for name, bits in _SPARK_INTS:
        if -(1 << (bits - 1)) <= lo and hi < (1 << (bits - 1)):
            return name
    return None


def _slim_parquet(df, files: list[Path], stream: ast.Stream, needed: set[str]):
    """Shrink what the shuffle carries, checking on the way what the dropped parts could hide.

    * A field no query reads is dropped when the footers prove every value valid (integers in
      range, no nulls); otherwise it stays, to be checked and reported row by row.
    * Integer fields proven in range travel in the narrowest Spark type their type allows.
    * ENUM fields travel as their 1-based member code (0: not a member), with the original
      text beside them only on rows where it is bad.

    Returns the new frame and the fields whose ENUM codes the task decodes.
    """
    from pyspark.sql import functions as F

    cols, enums = [], []
    for f in stream.fields:
        t = f.type
        if isinstance(t, ast.EnumType):
            code = F.array_position(F.array(*(F.lit(m) for m in t.members)), F.col(f.name))
            code = F.coalesce(code, F.lit(0)).cast(_narrow_type(0, len(t.members)))
            cols += [code.alias(f.name), F.when(code == 0, F.col(f.name)).alias(f"_bad_{f.name}")]
            enums.append(f.name)
            continue
        proven = _proven_range(files, f.name) if isinstance(t, ast.INTEGER_TYPES) else None
        valid = proven is not None and t.range[0] <= proven[0] and proven[1] <= t.range[1]
        if not valid:
            cols.append(F.col(f.name))
        elif f.name in needed:
            narrow = _narrow_type(*t.range)
            cols.append(F.col(f.name).cast(narrow).alias(f.name) if narrow else F.col(f.name))
    if not cols:  # no query reads a field (DEFINE A AS TRUE): keep one, which carries the row count
        cols.append(F.col(stream.fields[0].name))
    return df.select(*cols, "seq"), enums


def _decode_enums(raw: pd.DataFrame, stream: ast.Stream, enums: list[str], path: Path, seqs: np.ndarray):
    """ENUM codes back to member strings; an EventsError for the earliest row that is not a member."""
    bad_rows = []
    for name in enums:
        codes = raw[name].to_numpy()
        bad = codes == 0
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            value = raw[f"_bad_{name}"].iloc[i]
            bad_rows.append(EventsError(f"{events.where(path, 'parquet', int(seqs[i]))}: column {name}: {value!r} "
                                        f"is not a member of {stream.field(name).type}", int(seqs[i])))
            continue
        members = np.array((None,) + stream.field(name).type.members, dtype=object)
        raw[name] = members[codes]
    if bad_rows:
        raise min(bad_rows, key=lambda e: e.row)
    return raw.drop(columns=[f"_bad_{n}" for n in enums])


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


def _key_is_long(stream: ast.Stream, name: str) -> bool:
    """Keys travel as Spark longs when every value fits (written by pandas), else as text."""
    t = stream.field(name).type
    return isinstance(t, ast.INTEGER_TYPES) and t.range[1] < (1 << 63)


def _output_schema(checked: Checked) -> str:
    keys, measures = events.match_columns(checked)
    cols = ["seq long", "query int", f"{_ERROR} string"] \
        + [f"`k_{k}` {'long' if _key_is_long(checked.stream, k) else 'string'}" for k in keys] \
        + [f"`m_{m}` string" for m in measures]
    return ", ".join(cols)


def _reports(checked: Checked, qi: int, frame: pd.DataFrame, seqs: np.ndarray, rows: np.ndarray,
             measures: list[tuple] | None):
    """The report rows of query ``qi`` at ``rows`` of ``frame``, as an Arrow batch in the output schema."""
    import pyarrow as pa

    q = checked.queries[qi]
    keys, names = events.match_columns(checked)
    n = len(rows)
    cols = {"seq": pa.array(seqs[rows].astype(np.int64)), "query": pa.array(np.full(n, qi, dtype=np.int32)),
            _ERROR: pa.nulls(n, pa.string())}
    for k in keys:
        long = _key_is_long(checked.stream, k)
        if k not in q.partition_by:
            cols[f"k_{k}"] = pa.nulls(n, pa.int64() if long else pa.string())
        elif long:
            cols[f"k_{k}"] = pa.array(frame[k].to_numpy()[rows].astype(np.int64))
        else:
            cols[f"k_{k}"] = pa.array([events.format_value(v) for v in frame[k].to_numpy()[rows].tolist()],
                                      pa.string())
    mine = [m.alias for m in q.measures]
    for name in names:
        cols[f"m_{name}"] = (pa.array([events.format_value(m[mine.index(name)]) for m in measures], pa.string())
                             if measures is not None and name in mine else pa.nulls(n, pa.string()))
    return pa.RecordBatch.from_pydict(cols)


def _matcher_task(checked: Checked, queries: list[int], path_text: str, kind: str, enums: list[str]):
    """The function each Spark partition runs over its Arrow batches: every row of a key is here."""

    def run(batches):
        import pyarrow as pa

        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        raw = pa.Table.from_batches(batches).to_pandas()
        seqs = raw["seq"].to_numpy()
        if len(seqs) > 1 and (np.diff(seqs) < 0).any():  # arrival order (shuffle blocks come as sorted runs)
            raw = raw.iloc[np.argsort(seqs, kind="stable")].reset_index(drop=True)
            seqs = raw["seq"].to_numpy()
        # the fields that came through (the Parquet path drops the proven-valid ones no query reads)
        stream = ast.Stream(checked.stream.name, tuple(f for f in checked.stream.fields if f.name in raw.columns))
        try:
            raw = _decode_enums(raw, stream, enums, Path(path_text), seqs)
            frame = events.convert_frame(raw, stream, Path(path_text), kind, seqs)
        except EventsError as e:
            yield _error_batch(checked, e.row if e.row is not None else int(seqs[0]), str(e))
            return
        mine = [checked.queries[i] for i in queries]
        groups = {}  # the pass's PARTITION BY: codes and grouped order, shared by the order check and the DFA
        for q in mine:
            if q.partition_by not in groups:
                codes = events.group_codes(frame, q.partition_by)
                groups[q.partition_by] = (codes, events.grouped_order(codes))
        error = events.first_order_error(frame, mine, path_text, kind, seqs, groups)
        if error is not None:
            yield _error_batch(checked, error.row, str(error))
            return
        for qi in queries:
            qm = reference.QueryMatcher(checked, qi)
            if qm.simple:
                try:
                    rows = dfa.FastMatcher(qm).match(frame, *groups[qm.query.partition_by])
                    measures = None
                except dfa.DfaTooLarge:  # the subset construction exploded: the reference engine is exact
                    rows, measures = _reference(qm, frame, seqs)
            else:
                rows, measures = _reference(qm, frame, seqs)
            if len(rows):
                yield _reports(checked, qi, frame, seqs, rows, measures)

    return run


def _reference(qm: reference.QueryMatcher, frame: pd.DataFrame, seqs: np.ndarray):
    found = qm.run(frame, reference.partition_keys(frame, qm.query.partition_by), seqs)
    rows = np.fromiter((m.row for m in found), dtype=np.int64, count=len(found))
    return rows, ([m.measures for m in found] if qm.query.measures else None)


def _error_batch(checked: Checked, seq: int, message: str):
    """One row carrying an error message (query -1) in the output schema."""
    import pyarrow as pa

    keys, measures = events.match_columns(checked)
    cols = {"seq": pa.array([seq], pa.int64()), "query": pa.array([-1], pa.int32()), _ERROR: pa.array([message])}
    for k in keys:
        cols[f"k_{k}"] = pa.nulls(1, pa.int64() if _key_is_long(checked.stream, k) else pa.string())
    for m in measures:
        cols[f"m_{m}"] = pa.nulls(1, pa.string())
    return pa.RecordBatch.from_pydict(cols)


def golden(checked: Checked, events_path: str | Path, output: str | Path, master: str = "local[*]") -> GoldenStats:
    """Run every query of ``checked`` over the events on Spark and write the match file."""
    import time

    import pyarrow as pa
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    path = Path(events_path)
    spark = session(master)
    t0 = time.perf_counter()
    kind = "parquet" if _is_parquet(path) else "csv"
    schema = _output_schema(checked)
    try:
        df = _read(spark, path, checked.stream)
        enums: list[str] = []
        if kind == "parquet":
            df, total = _number_parquet(df, _data_files(path))
            needed = {n for qi in range(len(checked.queries)) for n in reference.QueryMatcher(checked, qi).fields}
            df, enums = _slim_parquet(df, _data_files(path), checked.stream, needed)
        else:
            df, total = _number_rows(df)
        t1 = time.perf_counter()
        passes: dict[tuple, list[int]] = {}  # one shuffle per distinct PARTITION BY
        for qi, q in enumerate(checked.queries):
            passes.setdefault(q.partition_by, []).append(qi)
        if len(passes) > 1 and kind == "csv":  # several passes over the numbered input
            df = df.cache()
        results = []
        for keys, queries in passes.items():
            # an explicit count: adaptive execution would otherwise merge small inputs into one task
            keyed = df.repartition(_tasks(spark), *keys) if keys else df.coalesce(1)
            task = _matcher_task(checked, queries, str(path), kind, enums)
            results.append(keyed.mapInArrow(task, schema))
        out = results[0]
        for r in results[1:]:
            out = out.unionByName(r)
        # nullable Int64 keeps integer keys exact (a plain int64 column with gaps would become float)
        found = out.toArrow().to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
        if len(passes) > 1 and kind == "csv":
            df.unpersist()
        t2 = time.perf_counter()
    except (Py4JJavaError, PySparkException) as e:
        text = str(e)
        raise ToolError("the Spark job failed", ["spark", master], text[-3000:]) from None
    errors = found[found[_ERROR].notna()]
    if len(errors):
        first = errors.sort_values("seq").iloc[0]
        raise EventsError(first[_ERROR])
    found = found.sort_values(["seq", "query"], kind="stable", ignore_index=True)  # SPEC §5
    keys, measures = events.match_columns(checked)
    names = np.array([q.name for q in checked.queries], dtype=object)
    table = pd.DataFrame({**{k: found[f"k_{k}"] for k in keys}, "seq": found["seq"],
                          "query": names[found["query"].to_numpy()], **{m: found[f"m_{m}"] for m in measures}})
    events.write_match_frame(output, table)
    t3 = time.perf_counter()
    return GoldenStats(total, len(found), t3 - t0, {"numbering": t1 - t0, "matching": t2 - t1, "writing": t3 - t2})
