"""Synthetic events for a query file's stream (``cepc gen``).

Values are drawn so the file's patterns actually match: every partition key
walks its own path through each query's position automaton, and each tuple is
picked from a pool of random candidate tuples that satisfy the predicate of the
position it steps to. Candidates mix uniform values with the literals the
predicates mention (and their neighbours), so narrow predicates are hit too.
A share of the tuples (``noise``) is drawn without regard to any pattern.
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


def generate(checked: Checked, n: int, keys: int, seed: int, skew: float = 0.0, noise: float = 0.1) -> pd.DataFrame:
    if n < 0:
        raise UsageError(f"the number of events must not be negative, not {n}")
    if keys < 1:
        raise UsageError(f"--keys must be at least 1, not {keys}")
    rng = np.random.default_rng(seed)
    stream = checked.stream
    literals = _literals(checked)
    pool = pd.DataFrame({f.name: _column(rng, f, _POOL, literals.get(f.name, set())) for f in stream.fields})

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

    # partition keys
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
    out = pool.iloc[choice].reset_index(drop=True)
    for f in key_fields:  # a key field with fewer values than --keys cycles through them
        values = key_values[f.name]
        out[f.name] = values[key_ids % len(values)]
    # every query's time field increases (queries may order by different fields)
    for tf in dict.fromkeys(time_field(stream, q) for q in checked.queries if time_field(stream, q)):
        lo, hi = stream.field(tf).type.range
        ticks = np.cumsum(rng.integers(1, 11, n), dtype=np.int64) + max(lo, 0)
        out[tf] = np.minimum(ticks, hi) if hi < (1 << 63) else ticks
    return out[[f.name for f in stream.fields]]


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
