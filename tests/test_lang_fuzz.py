"""Robustness of the front end (SPEC §2): whatever the input, parse + check either succeed or
raise a :class:`QueryError` whose diagnostics format and point into the file; never anything else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cepc.errors import QueryError
from cepc.lang.ast import Compare, FieldRef, IntLit, Var
from cepc.lang.check import check
from cepc.lang.parse import parse

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = [p.read_text() for p in sorted((ROOT / "examples").glob("*/*.sql"))]

STREAM = "CREATE STREAM s (t TIMESTAMP, k UINT8, c ENUM('a', 'b'), v INT16, f BOOL, name CHAR(3));\n"

# a query exercising most of the grammar, as a second seed for mutations
RICH = STREAM + """
NAME q PARTITION BY k, c AFTER MATCH CONTINUE WITHIN 10
MEASURES FIRST(t) AS t0, COUNT(*) AS n, SUM(v) AS total
PATTERN ( A (B | C)* . D{2,4} E? )
DEFINE
  A AS c = 'a' AND v BETWEEN -3 AND 0x7f,
  B AS v > LAST(v) OR NOT f,
  C AS name IN ('ab', 'abc') AND v * 2 - k < MAX(v),
  D AS k NOT IN (1, 2) AND f = TRUE,
  E AS t <> FIRST(t);
SELECT * FROM s MATCH_RECOGNIZE (
  PARTITION BY k ORDER BY t ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN ( A+ ) DEFINE A AS k >= 3
) AS sql_form;
"""
SEEDS = EXAMPLES + [RICH]

KEYWORDS = """CREATE STREAM SELECT FROM MATCH_RECOGNIZE NAME PARTITION ORDER BY ASC DESC AFTER MATCH SKIP
PAST LAST ROW ROWS CONTINUE TO NEXT FIRST ONE ALL PER WITHIN MEASURES PATTERN DEFINE SUBSET PERMUTE AS AND OR
NOT BETWEEN IN TRUE FALSE COUNT PREV MIN MAX SUM ABS UINT INT UINT8 INT64 BOOL CHAR ENUM TIMESTAMP""".split()
PUNCTUATION = "( ) ( ) , ; ; . * + ? | { } {- -} ^ $ = != <> < <= > >= - / % 0x \" '".split()
NAMES = "s A B C D E t k c v f name x A1 _".split()
LITERALS = ["0", "1", "7", "-1", "0x2a", "70000", "99999999999999999999999", "'a'", "'b'", "'abcd'", "''", "'it''s'"]
TOKENS = KEYWORDS + PUNCTUATION + NAMES + LITERALS
PREFIXES = ["", STREAM, STREAM + "PATTERN (", STREAM + "PATTERN ( A B ) DEFINE A AS ",
            STREAM + "SELECT * FROM s MATCH_RECOGNIZE ("]


def front_end(text: str) -> None:
    """Parse and check ``text``: success, or a QueryError with well-formed diagnostics."""
    try:
        check(parse(text, "fuzz.sql"))
    except QueryError as e:
        assert e.diagnostics
        n_lines = text.count("\n") + 1
        for d in e.diagnostics:
            if d.span is not None:
                assert 1 <= d.span.line <= n_lines and d.span.col >= 1, d
        assert e.format().startswith("fuzz.sql:")


# --- (a) arbitrary text --------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text(text: str):
    front_end(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(sorted(set("".join(SEEDS)) | set("{}^$%/\"\t\r\f"))), max_size=300))
def test_arbitrary_text_over_the_query_alphabet(text: str):
    front_end(text)


# --- (b) mutations of valid files ------------------------------------------------------------

TOKEN = re.compile(r"\s+|--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|\w+|<=|>=|<>|!=|\{-|-\}|.", re.DOTALL)


@st.composite
def character_mutations(draw) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 5))):
        pos = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["delete", "insert", "replace"]))
        char = draw(st.characters(codec="utf-8") | st.sampled_from(list("(){},;'\"*+?|-.=<>0x\n")))
        if kind == "delete":
            text = text[:pos] + text[pos + 1:]
        elif kind == "insert":
            text = text[:pos] + char + text[pos:]
        else:
            text = text[:pos] + char + text[pos + 1:]
    return text


@st.composite
def token_mutations(draw) -> str:
    tokens = TOKEN.findall(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 5))):
        pos = draw(st.integers(0, len(tokens) - 1))
        kind = draw(st.sampled_from(["delete", "insert", "replace", "duplicate", "swap"]))
        if kind == "delete":
            del tokens[pos]
        elif kind == "insert":
            tokens.insert(pos, " " + draw(st.sampled_from(TOKENS)) + " ")
        elif kind == "replace":
            tokens[pos] = " " + draw(st.sampled_from(TOKENS)) + " "
        elif kind == "duplicate":
            tokens.insert(pos, tokens[pos])
        else:
            other = draw(st.integers(0, len(tokens) - 1))
            tokens[pos], tokens[other] = tokens[other], tokens[pos]
    return "".join(tokens)


def test_seeds_are_valid():
    for text in SEEDS:
        check(parse(text))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(character_mutations())
def test_character_mutations_of_valid_files(text: str):
    front_end(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(token_mutations())
def test_token_mutations_of_valid_files(text: str):
    front_end(text)


# --- (c) token soup -------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PREFIXES), st.lists(st.sampled_from(TOKENS), max_size=40))
def test_random_token_sequences(prefix: str, tokens: list[str]):
    front_end(prefix + " ".join(tokens))


# --- deep nesting: bounded, reported, never a RecursionError -----------------------------------

DEEP = {
    "NOT": lambda n: "DEFINE A AS " + "NOT " * n + "k = 1 PATTERN ( A )",
    "unary minus": lambda n: "DEFINE A AS v = " + "- " * n + "1 PATTERN ( A )",
    "arithmetic chain": lambda n: "DEFINE A AS k " + "+ 1 " * n + "> 1 PATTERN ( A )",
    "quantified groups": lambda n: "DEFINE A AS k = 1 PATTERN ( " + "(" * n + "A" + ")*" * n + " )",
}


@pytest.mark.parametrize("kind", DEEP)
def test_deep_nesting_is_a_query_error(kind: str):
    with pytest.raises(QueryError, match=r"the query nests more than \d+ levels deep"):
        check(parse(STREAM + DEEP[kind](5000)))


@pytest.mark.parametrize("kind", DEEP)
def test_moderate_nesting_is_fine(kind: str):
    check(parse(STREAM + DEEP[kind](40)))


def test_redundant_parentheses_do_not_nest():
    n = 5000
    q = check(parse(STREAM + "PATTERN ( " + "(" * n + "A" + ")" * n + " ) DEFINE A AS "
                    + "(" * n + "k = 1" + ")" * n)).queries[0]
    assert q.pattern == Var("A")
    assert q.define("A").expr == Compare("=", FieldRef("k"), IntLit(1))
