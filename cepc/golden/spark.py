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
3. Shrink what the shuffle carries, since the JVM's cost is per row and column
   (Parquet): ENUM member codes, integers the footers prove in range as offsets
   from their minimum, and ``seq``, bit-packed into a few 63-bit words; only
   values that must still be validated row by row travel as their own columns.
4. One shuffle per distinct PARTITION BY (queries that share it share the
   pass): hash-repartition by the key, then ``mapInArrow`` hands each Spark
   partition's Arrow batches to Python, which unpacks them, orders them by
   ``seq``, validates the values, checks the time order, and matches every
   query of the pass — with the lock-step DFA of :mod:`cepc.nfa.dfa` where the
   query allows it (no aggregates, measures or WITHIN), else with the lock-step
   partial-match engine of :mod:`cepc.nfa.lockstep`; the reference matcher only
   where those give up (a DFA that explodes, a partition too long for the
   lock-step encoding).
5. A task returns its reports as a few rows, each an Arrow IPC stream, not a
   row per report; a bad value or an out-of-order time field comes back the
   same way, so the driver reports the first bad row in arrival order, exactly
   as ``cepc match``.
6. The driver sorts the reports by ``seq`` then query and writes the match
   file with Arrow's CSV writer.

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
from ..nfa import dfa, lockstep, reference


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
    return None if lo is None else (int(lo), int(hi))


WORD_BITS = 63  # a packed word is a non-negative Spark long


@dataclass(frozen=True)
class Slot:
    """One value packed into a word: ``base + (word >> shift & (2**bits - 1))``; an ENUM packs its
    1-based member code (0: not a member)."""

    name: str  # a stream field, or "seq"
    word: int
    shift: int
    bits: int
    base: int = 0
    members: tuple[str, ...] | None = None

    def extract(self, word):
        """The raw slot value from a Spark column or a numpy array of words."""
        mask = (1 << self.bits) - 1
        if isinstance(word, np.ndarray):
            return (word >> self.shift) & mask
        from pyspark.sql import functions as F

        return F.shiftright(word, self.shift).bitwiseAND(F.lit(mask))


@dataclass(frozen=True)
class Packing:
    """How the Parquet road carries rows through the shuffle: the slots of the packed words and
    the columns that travel as they are (values the footers cannot prove valid, text)."""

    slots: tuple[Slot, ...]
    words: int
    loose: tuple[str, ...]

    def slot(self, name: str) -> Slot | None:
        return next((s for s in self.slots if s.name == name), None)

    def unpack(self, table) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Arrow table of one task → (column name → numpy values, ENUM codes 0 = bad row mask)."""
        words = [table.column(f"_w{i}").to_numpy() for i in range(self.words)]
        cols, bad = {}, np.zeros(table.num_rows, dtype=bool)
        for s in self.slots:
            raw = s.extract(words[s.word])
            if s.members is not None:
                bad |= raw == 0
                cols[s.name] = raw
            elif s.base + (1 << s.bits) - 1 >= 1 << 63:
                cols[s.name] = raw.astype(np.uint64) + np.uint64(s.base)
            else:
                cols[s.name] = raw + s.base
        for name in self.loose:
            cols[name] = table.column(name).to_pandas()
        return cols, bad


def _pack_parquet(df, files: list[Path], stream: ast.Stream, needed: set[str], total: int):
    """Pack what the shuffle carries into few 63-bit words (most of the JVM's cost is per column),
    checking on the way what packing could hide.

    * ENUM fields pack their member code; code 0 marks a value that is not a member.
    * Integer fields the footers prove in range pack as an offset from their minimum; a proven
      field no query reads is dropped.
    * Anything else travels as its own column, to be validated and reported row by row.
    * ``seq`` packs in as many bits as the row count needs.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, ByteType, IntegerType, LongType, ShortType

    integral = (BooleanType, ByteType, ShortType, IntegerType, LongType)
    wanted, loose = [], []  # (name, bits, base, members, Spark value)
    wanted.append(("seq", max(1, (total - 1).bit_length()), 0, None, F.col("seq")))
    for f in stream.fields:
        t = f.type
        if isinstance(t, ast.EnumType):
            code = None
            for i, m in enumerate(t.members):
                code = F.when(F.col(f.name) == m, i + 1) if code is None else code.when(F.col(f.name) == m, i + 1)
            wanted.append((f.name, len(t.members).bit_length(), 0, tuple(t.members), code.otherwise(0)))
            continue
        proven = None
        if isinstance(t, ast.INTEGER_TYPES) and isinstance(df.schema[f.name].dataType, integral):
            proven = _proven_range(files, f.name)
        if proven is None or not (t.range[0] <= proven[0] and proven[1] <= t.range[1]):
            loose.append(f.name)
        elif f.name in needed:
            lo, hi = proven
            bits = max(1, (hi - lo).bit_length())
            if bits > WORD_BITS:
                loose.append(f.name)
            else:
                wanted.append((f.name, bits, lo, None, F.col(f.name).cast("long") - F.lit(lo)))
    if len(wanted) == 1 and not loose:  # no query reads a field (DEFINE A AS TRUE): one gives the row count
        loose.append(stream.fields[0].name)
    # first fit, widest first, into words of WORD_BITS
    fill: list[int] = []
    slots, parts = [], []
    for name, bits, base, members, value in sorted(wanted, key=lambda w: -w[1]):
        word = next((i for i, used in enumerate(fill) if used + bits <= WORD_BITS), None)
        if word is None:
            word = len(fill)
            fill.append(0)
            parts.append([])
        slots.append(Slot(name, word, fill[word], bits, base, members))
        parts[word].append(F.shiftleft(value.cast("long"), fill[word]) if fill[word] else value.cast("long"))
        fill[word] += bits
    words = []
    for i, terms in enumerate(parts):
        w = terms[0]
        for t in terms[1:]:
            w = w.bitwiseOR(t)
        words.append(w.alias(f"_w{i}"))
    packing = Packing(tuple(slots), len(words), tuple(loose))
    return df.select(*words, *loose), packing


def _partitioning(packing: Packing | None, keys: tuple[str, ...]):
    """Spark expressions to hash-partition by the query's key fields."""
    from pyspark.sql import functions as F

    out = []
    for k in keys:
        s = packing.slot(k) if packing is not None else None
        out.append(s.extract(F.col(f"_w{s.word}")) if s is not None else F.col(k))
    return out


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
    """Keys travel as Arrow int64 when every value fits, else as text."""
    t = stream.field(name).type
    return isinstance(t, ast.INTEGER_TYPES) and t.range[1] < (1 << 63)


# What a task returns: a few rows, each an Arrow IPC stream of reports (or of the task's first
# error) — not one row per report, which would cross the JVM twice, row by row.
_OUTPUT_SCHEMA = "kind string, blob binary"


def _blob(kind: str, batch) -> pa.RecordBatch:  # noqa: F821 - pyarrow is imported lazily
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    data = sink.getvalue()
    offsets = pa.py_buffer(np.array([0, data.size], dtype=np.int32))
    blob = pa.Array.from_buffers(pa.binary(), 1, [None, offsets, data])  # no copy of the stream
    return pa.RecordBatch.from_pydict({"kind": pa.array([kind]), "blob": blob})


def _reports(checked: Checked, qi: int, frame: pd.DataFrame, seqs: np.ndarray, rows: np.ndarray,
             measures: list[tuple] | None):
    """The report rows of query ``qi`` at ``rows`` of ``frame``, as an Arrow batch: seq, query,
    one column per key field of the file (null where this query lacks it), one per measure."""
    import pyarrow as pa

    q = checked.queries[qi]
    keys, names = events.match_columns(checked)
    n = len(rows)
    cols = {"seq": pa.array(seqs[rows].astype(np.int64)), "query": pa.array(np.full(n, qi, dtype=np.int32))}
    for k in keys:
        long = _key_is_long(checked.stream, k)
        if k not in q.partition_by:
            cols[k] = pa.nulls(n, pa.int64() if long else pa.string())
        elif long:
            cols[k] = pa.array(np.asarray(frame[k].to_numpy()[rows]).astype(np.int64))
        else:
            cols[k] = pa.array([events.format_value(v) for v in frame[k].to_numpy()[rows].tolist()], pa.string())
    mine = [m.alias for m in q.measures]
    for name in names:
        cols[name] = (pa.array([events.format_value(m[mine.index(name)]) for m in measures], pa.string())
                      if measures is not None and name in mine else pa.nulls(n, pa.string()))
    return pa.RecordBatch.from_pydict(cols)


def _error(seq: int, message: str | None, enum_field: str | None = None):
    """A task's first bad row: the message, or (Parquet ENUM codes) the field whose text the
    driver looks up, since only the code crossed the shuffle."""
    import pyarrow as pa

    return _blob("error", pa.RecordBatch.from_pydict({
        "seq": pa.array([seq], pa.int64()), "message": pa.array([message], pa.string()),
        "field": pa.array([enum_field], pa.string())}))


def _task_frame(table, checked: Checked, packing: Packing | None, path: Path, kind: str):
    """One task's rows as (frame in arrival order, seqs); raises EventsError (row = seq) or returns
    an (seq, field) pair for a Parquet ENUM value that is not a member."""
    stream = checked.stream
    if packing is None:
        raw = table.to_pandas()
        seqs = raw["seq"].to_numpy()
        if len(seqs) > 1 and (np.diff(seqs) < 0).any():  # shuffle blocks come as sorted runs
            raw = raw.iloc[np.argsort(seqs, kind="stable")].reset_index(drop=True)
            seqs = raw["seq"].to_numpy()
        return events.convert_frame(raw, stream, path, kind, seqs), seqs, None
    cols, bad = packing.unpack(table)
    seqs = cols.pop("seq")
    if len(seqs) > 1 and (np.diff(seqs) < 0).any():
        order = np.argsort(seqs, kind="stable")
        seqs, bad = seqs[order], bad[order]
        cols = {k: (v.iloc[order].reset_index(drop=True) if isinstance(v, pd.Series) else v[order])
                for k, v in cols.items()}
    errors = []  # (seq, schema position, EventsError or the ENUM field to look up)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        field = next(s.name for s in packing.slots if s.members is not None and cols[s.name][i] == 0)
        errors.append((int(seqs[i]), stream.fields.index(stream.field(field)), field))
    out = {}
    for pos, f in enumerate(stream.fields):
        if f.name not in cols:
            continue
        s = packing.slot(f.name)
        if s is None:
            try:
                out[f.name] = events.convert_column(cols[f.name], f, path, kind, seqs)
            except EventsError as e:
                errors.append((e.row, pos, e))
        elif s.members is not None:  # categorical: predicates compare codes, not strings
            out[f.name] = pd.Categorical.from_codes(cols[f.name] - 1, categories=list(s.members))
        else:
            out[f.name] = cols[f.name]
    if errors:
        seq, _, what = min(errors, key=lambda e: e[:2])
        if isinstance(what, EventsError):
            raise what
        return None, seqs, (seq, what)
    return pd.DataFrame(out), seqs, None


def _matcher_task(checked: Checked, queries: list[int], path_text: str, kind: str, packing: Packing | None):
    """The function each Spark partition runs over its Arrow batches: every row of a key is here."""

    def run(batches):
        import pyarrow as pa

        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        path = Path(path_text)
        try:
            frame, seqs, bad_enum = _task_frame(pa.Table.from_batches(batches), checked, packing, path, kind)
        except EventsError as e:
            yield _error(e.row, str(e))
            return
        if bad_enum is not None:
            yield _error(bad_enum[0], None, bad_enum[1])
            return
        mine = [checked.queries[i] for i in queries]
        groups = {}  # the pass's PARTITION BY: codes and grouped order, shared by the order check and the DFA
        for q in mine:
            if q.partition_by not in groups:
                codes = events.group_codes(frame, q.partition_by)
                groups[q.partition_by] = (codes, events.grouped_order(codes))
        error = events.first_order_error(frame, mine, path_text, kind, seqs, groups)
        if error is not None:
            yield _error(error.row, str(error))
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
                try:
                    rows, measures = lockstep.LockstepMatcher(qm).match(frame, *groups[qm.query.partition_by])
                except lockstep.Unsupported:  # beyond the 64-bit encoding: the reference engine is exact
                    rows, measures = _reference(qm, frame, seqs)
            for lo in range(0, len(rows), BLOB_ROWS):
                part = slice(lo, lo + BLOB_ROWS)
                yield _blob("reports", _reports(checked, qi, frame, seqs, rows[part],
                                                measures[part] if measures is not None else None))

    return run


BLOB_ROWS = 1 << 20  # reports per returned row (Spark's binary values stay far below 2 GiB)


def _reference(qm: reference.QueryMatcher, frame: pd.DataFrame, seqs: np.ndarray):
    found = qm.run(frame, reference.partition_keys(frame, qm.query.partition_by), seqs)
    rows = np.fromiter((m.row for m in found), dtype=np.int64, count=len(found))
    return rows, ([m.measures for m in found] if qm.query.measures else None)


def _first_error(checked: Checked, errors: list, numbered, path: Path) -> EventsError:
    """The EventsError of the earliest bad row over every task."""
    from pyspark.sql import functions as F

    first = min(errors, key=lambda e: e["seq"][0].as_py())
    seq, message, field = (first[c][0].as_py() for c in ("seq", "message", "field"))
    if message is not None:
        return EventsError(message, seq)
    value = numbered.where(F.col("seq") == seq).select(field).first()[0]
    return EventsError(f"{events.where(path, 'parquet', seq)}: column {field}: {value!r} "
                       f"is not a member of {checked.stream.field(field).type}", seq)


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
    try:
        df = _read(spark, path, checked.stream)
        packing = None
        if kind == "parquet":
            numbered, total = _number_parquet(df, _data_files(path))
            needed = {n for qi in range(len(checked.queries)) for n in reference.QueryMatcher(checked, qi).fields}
            df, packing = _pack_parquet(numbered, _data_files(path), checked.stream, needed, total)
        else:
            df, total = _number_rows(df)
            numbered = df
        t1 = time.perf_counter()
        passes: dict[tuple, list[int]] = {}  # one shuffle per distinct PARTITION BY
        for qi, q in enumerate(checked.queries):
            passes.setdefault(q.partition_by, []).append(qi)
        if len(passes) > 1 and kind == "csv":  # several passes over the numbered input
            df = df.cache()
        results = []
        for keys, queries in passes.items():
            # an explicit count: adaptive execution would otherwise merge small inputs into one task
            keyed = df.repartition(_tasks(spark), *_partitioning(packing, keys)) if keys else df.coalesce(1)
            task = _matcher_task(checked, queries, str(path), kind, packing)
            results.append(keyed.mapInArrow(task, _OUTPUT_SCHEMA))
        out = results[0]
        for r in results[1:]:
            out = out.unionByName(r)
        blobs = out.toArrow()
        tables = {"reports": [], "error": []}
        for k, b in zip(blobs.column("kind").to_pylist(), blobs.column("blob").to_pylist()):
            tables[k].append(pa.ipc.open_stream(pa.py_buffer(b)).read_all())
        if tables["error"]:
            raise _first_error(checked, tables["error"], numbered, path)
        if len(passes) > 1 and kind == "csv":
            df.unpersist()
        t2 = time.perf_counter()
    except (Py4JJavaError, PySparkException) as e:
        text = str(e)
        raise ToolError("the Spark job failed", ["spark", master], text[-3000:]) from None
    matches = _write(checked, tables["reports"], output)
    t3 = time.perf_counter()
    return GoldenStats(total, matches, t3 - t0, {"numbering": t1 - t0, "matching": t2 - t1, "writing": t3 - t2})


def _write(checked: Checked, tables: list, output: str | Path) -> int:
    """Sort the reports by seq, then query (SPEC §5), and write the match file; returns the count."""
    import pyarrow as pa

    keys, measures = events.match_columns(checked)
    names = pa.array([q.name for q in checked.queries], pa.string())
    if tables:
        found = pa.concat_tables(tables)
    else:
        found = _reports(checked, 0, pd.DataFrame({k: [] for k in keys}), np.zeros(0, np.int64),
                         np.zeros(0, np.int64), None)
        found = pa.Table.from_batches([found])
    seq = found.column("seq").to_numpy()
    query = found.column("query").to_numpy()
    order = np.lexsort((query, seq))
    found = found.take(pa.array(order))
    table = pa.table({**{k: found.column(k) for k in keys}, "seq": found.column("seq"),
                      "query": names.take(found.column("query")), **{m: found.column(m) for m in measures}})
    events.write_match_table(output, table)
    return found.num_rows
