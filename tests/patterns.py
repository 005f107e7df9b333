"""Random patterns over a one-field alphabet, and oracles built on Python's ``re``.

Shared by the NFA and reference-matcher tests. Each pattern variable ``P<i>``
is a character class over the letters of the field ``c``; a stream is a string
of letters; Python's ``re.fullmatch`` decides whether a run of it is a word of
the pattern, which gives SPEC §3.2–3.3 directly.
"""

from __future__ import annotations

import re

from hypothesis import strategies as st

from cepc.lang import ast

LETTERS = "abcd"
N_VARS = 4

# each variable's character class; fixed so that classes overlap (a tuple may satisfy several)
CLASSES = {"P0": "a", "P1": "ab", "P2": "bc", "P3": "cd"}


def schema(extra: str = "") -> str:
    return ("CREATE STREAM s (t TIMESTAMP, k UINT8, c ENUM(" + ", ".join(f"'{x}'" for x in LETTERS) + ")"
            + extra + ");\n")


def defines() -> str:
    return ",\n  ".join(
        f"{v} AS c IN ({', '.join(repr(x) for x in cls)})" for v, cls in CLASSES.items()
    )


def query_text(p: ast.Pattern, after: str = "SKIP PAST LAST ROW", partition: bool = False,
               measures: str = "", within: int | None = None) -> str:
    clauses = []
    if partition:
        clauses.append("PARTITION BY k")
    clauses.append(f"AFTER MATCH {after}")
    if within is not None:
        clauses.append(f"WITHIN {within}")
    if measures:
        clauses.append(f"MEASURES {measures}")
    return (schema() + "\n".join(clauses) + f"\nPATTERN ( {ast.format_pattern(p)} )\nDEFINE\n  " + defines() + ";\n")


def to_regex(p: ast.Pattern) -> str:
    if isinstance(p, ast.Var):
        return f"[{CLASSES[p.name]}]"
    if isinstance(p, ast.AnyTuple):
        return f"[{LETTERS}]"
    if isinstance(p, ast.Empty):
        return "(?:)"
    if isinstance(p, ast.Seq):
        return "(?:" + "".join(to_regex(i) for i in p.items) + ")"
    if isinstance(p, ast.Alt):
        return "(?:" + "|".join(to_regex(i) for i in p.items) + ")"
    hi = "" if p.max is None else str(p.max)
    return f"(?:{to_regex(p.child)}){{{p.min},{hi}}}"


def leaves() -> st.SearchStrategy:
    return st.one_of(st.sampled_from([ast.Var(v) for v in CLASSES]), st.just(ast.AnyTuple()))


QUANTIFIERS = [(0, None), (1, None), (0, 1), (2, 2), (0, 2), (1, 3), (2, None), (0, 0)]


def patterns(max_leaves: int = 12) -> st.SearchStrategy:
    def extend(children):
        return st.one_of(
            st.lists(children, min_size=2, max_size=3).map(lambda xs: ast.Seq(tuple(xs))),
            st.lists(children, min_size=2, max_size=3).map(lambda xs: ast.Alt(tuple(xs))),
            st.tuples(children, st.sampled_from(QUANTIFIERS)).map(lambda t: ast.Repeat(t[0], *t[1])),
        )

    return st.recursive(leaves(), extend, max_leaves=max_leaves)


def streams(max_size: int = 24) -> st.SearchStrategy:
    return st.text(alphabet=LETTERS, max_size=max_size)


def oracle(p: ast.Pattern, s: str, skip: bool, times: list[int] | None = None,
           within: int | None = None) -> list[tuple[int, int]]:
    """Reports as (seq of the last tuple, start of the longest qualifying match) per SPEC §3.2–3.5."""
    rx = re.compile(to_regex(p))
    out = []
    last_end = -1
    for j in range(len(s)):
        lo = last_end + 1 if skip else 0
        starts = [i for i in range(lo, j + 1) if rx.fullmatch(s[i:j + 1])
                  and (within is None or times[j] - times[i] <= within)]
        if starts:
            out.append((j, min(starts)))
            last_end = j
    return out


def random_pattern(rng, max_leaves: int = 8, variables=tuple(CLASSES)) -> ast.Pattern:
    """A pattern over ``variables`` drawn from ``rng`` (a ``random.Random``), for seeded corpora
    outside hypothesis."""
    budget = [rng.randint(2, max_leaves)]

    def draw(depth: int) -> ast.Pattern:
        if budget[0] <= 1 or depth > 3 or rng.random() < 0.3:
            budget[0] -= 1
            return ast.Var(rng.choice(list(variables))) if rng.random() < 0.85 else ast.AnyTuple()
        kind = rng.choice(["seq", "seq", "alt", "repeat"])
        if kind == "repeat":
            lo, hi = rng.choice([q for q in QUANTIFIERS if q != (0, 0)])
            return ast.Repeat(draw(depth + 1), lo, hi)
        items = tuple(draw(depth + 1) for _ in range(rng.randint(2, 3)))
        return ast.Seq(items) if kind == "seq" else ast.Alt(items)

    return draw(0)
