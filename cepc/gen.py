"""Synthetic events for a query file's stream (``cepc gen``).

Two models:

* ``pattern``: values are drawn so the file's patterns actually match: every
  partition key walks its own path through each query's position automaton,
  and each tuple is picked from a pool of random candidate tuples that satisfy
  the predicate of the position it steps to. Candidates mix uniform values with
  the literals the predicates mention (and their neighbours), so narrow
  predicates are hit too. A share of the tuples (``noise``) is drawn without
  regard to any pattern.
* ``series``: tuples are drawn as a market would produce them, without regard
  to the patterns, for queries whose predicates read the partial match (which
  no walk can steer): every integer field whose history a DEFINE compares
  (the argument of FIRST, LAST, MIN or MAX) is a random walk per partition key,
  like a price; every other integer field a DEFINE compares with literals is
  heavy-tailed (log-normal) with its largest literal at the 90th percentile,
  like trade sizes with occasional large trades; other fields as in the pool.
  How often a pattern matches then follows from its thresholds, as on real data.
* ``auto`` (the default): ``series`` when every query has an aggregate in
  DEFINE, else ``pattern``.

Each query's time field increases by 1–10 ticks per tuple; partition keys are drawn
uniformly or, with ``skew`` > 0, from a Zipf-like law.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .errors import UsageError
from .lang import ast
from .lang.check import Checked, time_field
from .nfa import evaluate, reference

_POOL = 8192
MODELS = ("auto", "pattern", "series")
# series: a walk stays put with this probability, else moves by |N(0, 1)| × SIGMA × its base level
# (at least one unit) up or down; trade prices move like this, a few basis points per trade
STAY = 0.35
SIGMA = 0.0005
TREND = 0.6  # a move goes the way of the key's previous move with this probability


def _literals(checked: Checked) -> dict[str, set]:
    """Literal values compared with each field anywhere in the file's DEFINEs."""
    out: dict[str, set] = {}
    for q in checked.queries:
        for d in q.defines:
            for node in ast.walk(d.expr):
                pairs = []
                if isinstance(node, ast.Compare):
                    pairs = [(node.left, node.right), (node.right, node.left)]
                elif isinstance(node, ast.Between):
                    pairs = [(node.operand, node.low), (node.operand, node.high)]
                elif isinstance(node, ast.InList):
                    pairs = [(node.operand, i) for i in node.items]
                for f, lit in pairs:
                    if isinstance(f, ast.FieldRef) and isinstance(lit, (ast.IntLit, ast.StrLit)):
                        out.setdefault(f.name, set()).add(lit.value)
    return out


def _column(rng: np.random.Generator, f: ast.FieldDef, n: int, literals: set) -> np.ndarray:
    t = f.type
    if isinstance(t, ast.EnumType):
        return np.array(t.members, dtype=object)[rng.integers(0, len(t.members), n)]
    if isinstance(t, ast.CharType):
        alphabet = sorted({c for lit in literals for c in str(lit)} | set("abcxyz"))
        words = ["".join(rng.choice(alphabet, rng.integers(0, t.length + 1))) for _ in range(64)]
        words += [lit for lit in literals if len(str(lit).encode()) <= t.length]
        return np.array(words, dtype=object)[rng.integers(0, len(words), n)]
    lo, hi = t.range
    # keep generated numbers small enough to be readable unless a literal says otherwise
    span_hi = min(hi, max(lo + 1000, *(int(v) + 2 for v in literals if isinstance(v, int)), lo))
    values = rng.integers(lo, span_hi + 1, n, dtype=np.int64 if span_hi < (1 << 62) else np.uint64)
    ints = sorted(int(v) + d for v in literals if isinstance(v, int) for d in (-1, 0, 1) if lo <= int(v) + d <= hi)
    if ints:
        pick = rng.random(n) < 0.5
        values = values.astype(object) if values.dtype == np.uint64 else values
        values[pick] = np.array(ints, dtype=values.dtype)[rng.integers(0, len(ints), int(pick.sum()))]
    return values


def history_fields(checked: Checked) -> set[str]:
    """Fields whose history some DEFINE reads through FIRST, LAST, MIN or MAX."""
    return {a.arg.name for q in checked.queries for d in q.defines for a in ast.aggregates(d.expr)
            if a.func in ("FIRST", "LAST", "MIN", "MAX")}


def choose_model(checked: Checked, model: str = "auto") -> str:
    if model not in MODELS:
        raise UsageError(f"--model must be one of {', '.join(MODELS)}, not {model!r}")
    if model != "auto":
        return model
    reads = all(any(ast.aggregates(d.expr) for d in q.defines) for q in checked.queries)
    return "series" if checked.queries and reads else "pattern"


def generate(checked: Checked, n: int, keys: int, seed: int, skew: float = 0.0, noise: float = 0.1,
             model: str = "auto") -> pd.DataFrame:
    if n < 0:
        raise UsageError(f"the number of events must not be negative, not {n}")
    if keys < 1:
        raise UsageError(f"--keys must be at least 1, not {keys}")
    model = choose_model(checked, model)
    rng = np.random.default_rng(seed)
    stream = checked.stream
    literals = _literals(checked)
    pool = pd.DataFrame({f.name: _column(rng, f, _POOL, literals.get(f.name, set())) for f in stream.fields})
    key_ids, key_fields, key_values = _keys(checked, rng, n, keys, skew)
    if model == "series":
        out = _series_model(checked, rng, n, pool, key_ids, literals)
    else:
        out = _pattern_model(checked, rng, n, pool, key_ids, noise)
    for f in key_fields:  # a key field with fewer values than --keys cycles through them
        values = key_values[f.name]
        out[f.name] = values[key_ids % len(values)]
    # every query's time field increases (queries may order by different fields)
    for tf in dict.fromkeys(time_field(stream, q) for q in checked.queries if time_field(stream, q)):
        lo, hi = stream.field(tf).type.range
        ticks = np.cumsum(rng.integers(1, 11, n), dtype=np.int64) + max(lo, 0)
        out[tf] = np.minimum(ticks, hi) if hi < (1 << 63) else ticks
    return out[[f.name for f in stream.fields]]


def _keys(checked: Checked, rng, n: int, keys: int, skew: float):
    """Each tuple's key number, the key fields, and each key field's values."""
    stream = checked.stream
    key_fields = [stream.field(k) for q in checked.queries for k in q.partition_by]
    key_fields = list({f.name: f for f in key_fields}.values())
    if skew > 0:
        weights = 1.0 / np.arange(1, keys + 1) ** skew
        key_ids = rng.choice(keys, n, p=weights / weights.sum())
    else:
        key_ids = rng.integers(0, keys, n)
    key_values = {f.name: _key_values(f, keys) for f in key_fields}
    if key_fields and all(len(v) < keys for v in key_values.values()):
        widest = max(key_fields, key=lambda f: len(key_values[f.name]))
        raise UsageError(f"--keys {keys} is more than {widest.type} key {widest.name} can hold")
    return key_ids, key_fields, key_values


def _series_model(checked: Checked, rng, n: int, pool: pd.DataFrame, key_ids: np.ndarray,
                  literals: dict) -> pd.DataFrame:
    """Tuples drawn independently of the patterns: walks for fields whose history DEFINE reads,
    heavy tails for fields DEFINE compares with literals, the pool's values otherwise."""
    stream = checked.stream
    walks = history_fields(checked)
    out = {}
    for f in stream.fields:
        t = f.type
        ints = sorted(int(v) for v in literals.get(f.name, ()) if isinstance(v, int))
        if not isinstance(t, ast.INTEGER_TYPES) or (isinstance(t, ast.UIntType) and t.is_bool):
            out[f.name] = pool[f.name].to_numpy()[rng.integers(0, _POOL, n)]
        elif f.name in walks:
            out[f.name] = _walk(rng, t.range, ints, key_ids, n)
        elif ints and ints[-1] > 0:
            # log-normal, sigma 1, 90th percentile at the largest literal
            median = ints[-1] / np.exp(1.2816)
            values = np.rint(median * np.exp(rng.standard_normal(n)))
            lo, hi = t.range
            out[f.name] = np.clip(values, max(lo, 1), min(hi, 1 << 62)).astype(np.int64)
        else:
            out[f.name] = pool[f.name].to_numpy()[rng.integers(0, _POOL, n)]
    return pd.DataFrame(out)


def _walk(rng, bounds: tuple[int, int], literals: list[int], key_ids: np.ndarray, n: int) -> np.ndarray:
    """A random walk per key: a base level (around the literals, else 1000 … 10000, or the middle
    of a narrower type), then steps of a few basis points of it, at least one unit."""
    lo, hi = bounds
    if literals:
        a, b = min(literals) // 2, max(literals) * 2
    elif hi - lo >= 20000:
        a, b = max(lo, 1000), 10000
    else:  # a narrow type: the middle half of its range
        a, b = lo + (hi - lo) // 4, lo + 3 * (hi - lo) // 4
    a, b = max(lo, min(a, hi)), max(lo, min(b, hi))
    if a > b:
        a, b = b, a
    keys = int(key_ids.max()) + 1 if n else 0
    base = rng.integers(a, b + 1, keys, dtype=np.int64) if b - a < (1 << 62) else np.full(keys, a)
    size = np.maximum(1, np.rint(np.abs(rng.standard_normal(n)) * SIGMA * base[key_ids])).astype(np.int64)
    stay = rng.random(n) < STAY
    flip = (rng.random(n) >= TREND) & ~stay  # a move turns against the previous move
    first = rng.random(keys) < 0.5
    turns = pd.Series(flip.astype(np.int64)).groupby(key_ids).cumsum().to_numpy()
    up = first[key_ids] ^ (turns % 2 == 1)
    step = np.where(stay, 0, np.where(up, size, -size))
    values = base[key_ids] + pd.Series(step).groupby(key_ids).cumsum().to_numpy()
    return np.clip(values, lo, min(hi, (1 << 63) - 1))


def _pattern_model(checked: Checked, rng, n: int, pool: pd.DataFrame, key_ids: np.ndarray,
                   noise: float) -> pd.DataFrame:
    stream = checked.stream

    # which pool rows satisfy each position of each query (aggregate predicates: any row)
    walkers = []
    cols = {f.name: pool[f.name].to_numpy() for f in stream.fields}
    for q in checked.queries:
        pos = reference.positions(q.pattern)
        sat = {}
        for d in q.defines:
            if ast.aggregates(d.expr):
                sat[d.name] = np.arange(_POOL)
            else:
                rows = np.flatnonzero(evaluate.vector(d.expr, stream)(cols))
                sat[d.name] = rows if len(rows) else np.arange(_POOL)
        per_pos = [sat[p] if p is not None else np.arange(_POOL) for p in pos.preds]
        walkers.append((pos, per_pos))

    # walk: per key, a current position bit set per query; each tuple follows one query's path
    choice = np.empty(n, dtype=np.int64)
    states: dict[int, list[int]] = {}
    is_noise = rng.random(n) < noise
    which_query = rng.integers(0, max(len(walkers), 1), n)
    restart = rng.random(n)
    pick = rng.random(n)
    for i in range(n):
        if is_noise[i] or not walkers:
            choice[i] = int(pick[i] * _POOL)
            continue
        k = int(key_ids[i])
        st = states.setdefault(k, [0] * len(walkers))
        qi = int(which_query[i])
        pos, per_pos = walkers[qi]
        cur = st[qi]
        allowed = pos.first
        if cur and restart[i] > 0.05:
            allowed = 0
            for p in reference._bits(cur):
                allowed |= pos.follow[p]
            if not allowed:
                allowed = pos.first
        options = list(reference._bits(allowed))
        if not options:
            choice[i] = int(pick[i] * _POOL)
            continue
        p = options[int(pick[i] * len(options)) % len(options)]
        rows = per_pos[p]
        choice[i] = rows[int(pick[i] * 7919) % len(rows)]
        st[qi] = 0 if (pos.last >> p & 1 and not pos.follow[p]) else (1 << p)
    return pool.iloc[choice].reset_index(drop=True)


def _key_values(f: ast.FieldDef, keys: int) -> np.ndarray:
    """Up to ``keys`` distinct values of a key field."""
    t = f.type
    if isinstance(t, ast.EnumType):
        return np.array(t.members[:keys], dtype=object)
    if isinstance(t, ast.CharType):
        n = min(keys, 10 ** t.length)
        return np.array([str(i) for i in range(n)], dtype=object)
    lo, hi = t.range
    n = min(keys, hi - lo + 1)
    return np.arange(n, dtype=np.int64) + max(lo, 0) if hi < (1 << 62) else np.arange(n, dtype=np.uint64)


def write_events(frame: pd.DataFrame, path: str | Path) -> None:
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        frame.to_parquet(path, index=False)
    elif suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        raise UsageError(f"events file must end in .csv or .parquet, not {path.name!r}")
