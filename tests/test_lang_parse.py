"""The parser (SPEC §1): both query forms, pattern and predicate syntax, types, lexical rules."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from cepc.errors import QueryError
from cepc.lang import ast
from cepc.lang.ast import (
    Agg,
    Alt,
    AnyTuple,
    Arith,
    Between,
    BoolLit,
    BoolOp,
    Compare,
    Empty,
    FieldRef,
    InList,
    IntLit,
    Neg,
    Not,
    Repeat,
    Seq,
    StrLit,
    Var,
)
from cepc.lang.check import check
from cepc.lang.parse import parse, parse_file

ROOT = Path(__file__).resolve().parent.parent
MARATHON = ROOT / "examples" / "marathon" / "marathon.sql"
MARATHON_SQL = ROOT / "examples" / "marathon" / "marathon_sql.sql"

TICKS = """CREATE STREAM ticks (
  t      TIMESTAMP,
  sym    UINT16,
  venue  ENUM('NYSE', 'NASDAQ', 'ARCA'),
  price  UINT32,
  volume UINT32
);
"""


# --- the two query forms -------------------------------------------------------------------

# (compact form, SQL:2016 form) of one query
SAME_QUERY = {
    "plain": (
        """PATTERN ( A B+ )
           DEFINE A AS price > 100, B AS volume < 10""",
        """SELECT * FROM ticks MATCH_RECOGNIZE (
             PATTERN ( A B+ )
             DEFINE A AS price > 100, B AS volume < 10
           )""",
    ),
    "every clause": (
        """NAME surge
           PARTITION BY sym, venue
           AFTER MATCH CONTINUE
           WITHIN 1000
           MEASURES FIRST(t) AS started, COUNT(*) AS n, MAX(price) AS top
           PATTERN ( A B+ C )
           DEFINE
             A AS price > 100,
             B AS price > LAST(price),
             C AS price < FIRST(price)""",
        """SELECT * FROM ticks MATCH_RECOGNIZE (
             PARTITION BY sym, venue
             ORDER BY t
             MEASURES FIRST(t) AS started, COUNT(*) AS n, MAX(price) AS top
             ONE ROW PER MATCH
             AFTER MATCH CONTINUE
             PATTERN ( A B+ C )
             WITHIN 1000
             DEFINE
               A AS price > 100,
               B AS price > LAST(price),
               C AS price < FIRST(price)
           ) AS surge""",
    ),
    "clauses in another order, alias without AS": (
        """MEASURES LAST(price) AS last_price
           WITHIN 50
           AFTER MATCH SKIP PAST LAST ROW
           PARTITION BY venue
           NAME quiet
           PATTERN ( A{2,4} . B? )
           DEFINE B AS volume = 0, A AS volume BETWEEN 1 AND 9""",
        """SELECT * FROM ticks MATCH_RECOGNIZE (
             DEFINE B AS volume = 0, A AS volume BETWEEN 1 AND 9
             PATTERN ( A{2,4} . B? )
             PARTITION BY venue
             WITHIN 50
             MEASURES LAST(price) AS last_price
           ) quiet""",
    ),
}


def test_marathon_forms_give_one_query():
    compact, sql = parse_file(MARATHON), parse_file(MARATHON_SQL)
    assert compact.stream == sql.stream
    # the SQL form spells out ORDER BY time, which the compact form leaves to the checker
    assert sql.queries[0].order_by == "time"
    assert [dataclasses.replace(q, order_by=None) for q in sql.queries] == list(compact.queries)
    assert check(compact).queries == check(sql).queries


@pytest.mark.parametrize("name", SAME_QUERY)
def test_both_forms_give_one_query(name: str):
    compact_text, sql_text = SAME_QUERY[name]
    compact, sql = parse(TICKS + compact_text), parse(TICKS + sql_text)
    assert [dataclasses.replace(q, order_by=None) for q in compact.queries] == \
           [dataclasses.replace(q, order_by=None) for q in sql.queries]
    assert check(compact).queries == check(sql).queries


def test_every_clause_lands_in_the_query():
    q = check(parse(TICKS + SAME_QUERY["every clause"][0])).query("surge")
    assert q.partition_by == ("sym", "venue")
    assert q.order_by == "t"  # the stream's first TIMESTAMP field
    assert q.after_match == ast.CONTINUE
    assert q.within == 1000
    assert [(m.alias, m.expr) for m in q.measures] == [
        ("started", Agg("FIRST", FieldRef("t"))),
        ("n", Agg("COUNT", None)),
        ("top", Agg("MAX", FieldRef("price"))),
    ]
    assert [d.name for d in q.defines] == ["A", "B", "C"]


def test_defaults_of_the_optional_clauses():
    q = parse(TICKS + "PATTERN ( A ) DEFINE A AS price > 1").queries[0]
    assert (q.name, q.partition_by, q.order_by, q.measures, q.within, q.after_match) == \
           ("q0", (), None, (), None, ast.SKIP_PAST_LAST_ROW)


def test_compact_form_accepts_order_by():
    q = check(parse(TICKS + "ORDER BY volume PATTERN ( A ) DEFINE A AS price > 1")).queries[0]
    assert q.order_by == "volume"


# --- patterns ------------------------------------------------------------------------------

A, B, C, D = Var("A"), Var("B"), Var("C"), Var("D")

PATTERNS = {
    "A": A,
    ".": AnyTuple(),
    "A B": Seq((A, B)),
    "A B C": Seq((A, B, C)),
    "A | B": Alt((A, B)),
    "A | B | C": Alt((A, B, C)),
    "A*": Repeat(A, 0, None),
    "A+": Repeat(A, 1, None),
    "A?": Repeat(A, 0, 1),
    "A{3}": Repeat(A, 3, 3),
    "A{2,}": Repeat(A, 2, None),
    "A{2,4}": Repeat(A, 2, 4),
    "A{,3}": Repeat(A, 0, 3),
    "A{0x10}": Repeat(A, 16, 16),
    "( A B )+": Repeat(Seq((A, B)), 1, None),
    "((A))": A,
    "(A*)?": Repeat(Repeat(A, 0, None), 0, 1),
    "A . B": Seq((A, AnyTuple(), B)),
    # quantifiers bind tighter than sequence, sequence tighter than |
    "A B+": Seq((A, Repeat(B, 1, None))),
    "A B* | C": Alt((Seq((A, Repeat(B, 0, None))), C)),
    "A | B C": Alt((A, Seq((B, C)))),
    "A B | C D": Alt((Seq((A, B)), Seq((C, D)))),
    "(A | B) C": Seq((Alt((A, B)), C)),
    "A (B | C)*": Seq((A, Repeat(Alt((B, C)), 0, None))),
    "()": Empty(),
    "( () )": Empty(),
    "A ()": Seq((A, Empty())),
}


def pattern_of(text: str) -> ast.Pattern:
    return parse(TICKS + f"PATTERN ( {text} ) DEFINE A AS price > 1").queries[0].pattern


@pytest.mark.parametrize("text", PATTERNS)
def test_pattern_operator(text: str):
    assert pattern_of(text) == PATTERNS[text]


@pytest.mark.parametrize("text", PATTERNS)
def test_formatted_pattern_parses_back(text: str):
    assert pattern_of(ast.format_pattern(PATTERNS[text])) == PATTERNS[text]


def test_empty_pattern_clause():
    assert parse(TICKS + "PATTERN ( )").queries[0].pattern == Empty()


# --- lexical rules ---------------------------------------------------------------------------

KEYWORD_QUERIES = """CREATE STREAM ticks (t TIMESTAMP, sym UINT16, side ENUM('buy', 'sell'), price UINT32);
NAME surge PARTITION BY sym AFTER MATCH CONTINUE WITHIN 10 MEASURES COUNT(*) AS n, LAST(price) AS p
PATTERN ( a b+ ) DEFINE a AS price > 100 AND NOT side IN ('buy'), b AS price > PREV(price) OR FALSE;
SELECT * FROM ticks MATCH_RECOGNIZE ( PARTITION BY sym ORDER BY t ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW PATTERN ( a{2,} ) DEFINE a AS price NOT BETWEEN 1 AND 2 ) AS dip
"""


@pytest.mark.parametrize("spell", [str.lower, str.capitalize], ids=["lower", "capitalized"])
def test_keywords_are_case_insensitive(spell):
    # every identifier is lower case, so this respells the keywords and type names only
    respelt = re.sub(r"\b[A-Z][A-Z0-9_]+\b", lambda m: spell(m[0]), KEYWORD_QUERIES)
    assert respelt != KEYWORD_QUERIES
    assert parse(respelt) == parse(KEYWORD_QUERIES)
    checked, want = check(parse(respelt)), check(parse(KEYWORD_QUERIES))
    assert (checked.stream, checked.queries) == (want.stream, want.queries)


def test_type_names_are_case_insensitive():
    s = parse("create stream s (a uint8, b Int(4), c bool, d char(2), e enum('x'), f timestamp);"
              "pattern (A) define A as a = 1").stream
    assert [f.type for f in s.fields] == [ast.UIntType(8), ast.IntType(4), ast.UIntType(1), ast.CharType(2),
                                          ast.EnumType(("x",)), ast.TimestampType()]


def test_identifiers_are_case_sensitive():
    text = """CREATE STREAM cars (Speed UINT8, speed UINT16);
              PATTERN ( A a ) DEFINE A AS Speed > 200, a AS speed > 300"""
    checked = check(parse(text))
    assert [f.name for f in checked.stream.fields] == ["Speed", "speed"]
    q = checked.queries[0]
    assert q.pattern == Seq((Var("A"), Var("a")))
    assert q.define("A").expr.left == FieldRef("Speed")
    assert q.define("a").expr.left == FieldRef("speed")
    with pytest.raises(QueryError, match="unknown field 'SPEED' in stream cars; did you mean 'Speed'\\?"):
        check(parse(text.replace("Speed > 200", "SPEED > 200")))


def test_keywords_serve_as_names_where_no_keyword_can_stand():
    text = """CREATE STREAM s (name UINT8, count UINT8, pattern UINT8, "from" UINT8);
              PATTERN ( A ) DEFINE A AS name = 1 AND count = 2 AND pattern = 3 AND "from" = 4"""
    checked = check(parse(text))
    assert [f.name for f in checked.stream.fields] == ["name", "count", "pattern", "from"]
    assert [c.left for c in checked.queries[0].defines[0].expr.operands] == \
           [FieldRef("name"), FieldRef("count"), FieldRef("pattern"), FieldRef("from")]


def test_comments():
    text = """-- a line comment
    CREATE STREAM s ( /* inline */ x UINT8 -- to end of line
    );
    /* a block
       comment over lines; with a ; inside */
    PATTERN ( A /* between */ B -- within the pattern
            )
    DEFINE A AS x = 1, -- after a comma
           B AS x /* mid-expression */ = 2; -- at the end"""
    qf = parse(text)
    assert qf.stream.fields == (ast.FieldDef("x", ast.UIntType(8)),)
    assert qf.queries[0].pattern == Seq((A, B))
    assert qf.queries[0].define("B").expr == Compare("=", FieldRef("x"), IntLit(2))


def test_several_queries_with_default_and_explicit_names():
    text = TICKS + """;
    PATTERN ( A ) DEFINE A AS price > 1;
    NAME big PATTERN ( A ) DEFINE A AS price > 1000;
    PATTERN ( A ) DEFINE A AS price > 2;
    SELECT * FROM ticks MATCH_RECOGNIZE ( PATTERN ( A ) DEFINE A AS price > 3 );
    SELECT * FROM ticks MATCH_RECOGNIZE ( PATTERN ( A ) DEFINE A AS price > 4 ) AS last_one;;
    """
    checked = check(parse(text))
    assert [q.name for q in checked.queries] == ["q0", "big", "q2", "q3", "last_one"]
    assert checked.query("q2").define("A").expr.right == IntLit(2)


def test_string_literal_with_doubled_quote():
    text = "CREATE STREAM s (c CHAR(4)); PATTERN ( A ) DEFINE A AS c = 'it''s'"
    assert check(parse(text)).queries[0].defines[0].expr.right == StrLit("it's")


# --- types -----------------------------------------------------------------------------------

TYPES = {
    "UINT(1)": (ast.UIntType(1), 1),
    "UINT(13)": (ast.UIntType(13), 13),
    "UINT(64)": (ast.UIntType(64), 64),
    "INT(2)": (ast.IntType(2), 2),
    "INT(64)": (ast.IntType(64), 64),
    "UINT8": (ast.UIntType(8), 8),
    "UINT16": (ast.UIntType(16), 16),
    "UINT32": (ast.UIntType(32), 32),
    "UINT64": (ast.UIntType(64), 64),
    "INT8": (ast.IntType(8), 8),
    "INT16": (ast.IntType(16), 16),
    "INT32": (ast.IntType(32), 32),
    "INT64": (ast.IntType(64), 64),
    "BOOL": (ast.UIntType(1), 1),
    "CHAR(1)": (ast.CharType(1), 8),
    "CHAR(12)": (ast.CharType(12), 96),
    "ENUM('a')": (ast.EnumType(("a",)), 1),
    "ENUM('a', 'b')": (ast.EnumType(("a", "b")), 1),
    "ENUM('a', 'b', 'c')": (ast.EnumType(("a", "b", "c")), 2),
    "ENUM('a', 'b', 'c', 'd')": (ast.EnumType(("a", "b", "c", "d")), 2),
    "ENUM('a', 'b', 'c', 'd', 'e')": (ast.EnumType(("a", "b", "c", "d", "e")), 3),
    "ENUM(" + ", ".join(f"'m{i}'" for i in range(9)) + ")": (ast.EnumType(tuple(f"m{i}" for i in range(9))), 4),
    "TIMESTAMP": (ast.TimestampType(), 64),
}


@pytest.mark.parametrize("text", TYPES)
def test_type(text: str):
    want, width = TYPES[text]
    stream = parse(f"CREATE STREAM s (f {text}); PATTERN ( A ) DEFINE A AS TRUE").stream
    assert stream.fields[0].type == want
    assert stream.fields[0].type.width == width
    assert stream.width == width


def test_bool_is_a_one_bit_unsigned_condition():
    t = parse("CREATE STREAM s (f BOOL); PATTERN ( A ) DEFINE A AS f").stream.fields[0].type
    assert t.is_bool and str(t) == "BOOL"


def test_stream_width_sums_the_fields():
    assert parse_file(MARATHON).stream.width == 64 + 3 + 16 + 16
    fields = ", ".join(f"f{i} {text}" for i, text in enumerate(TYPES))
    stream = parse(f"CREATE STREAM s ({fields},); PATTERN ( A ) DEFINE A AS TRUE").stream
    assert [f.name for f in stream.fields] == [f"f{i}" for i in range(len(TYPES))]
    assert stream.width == sum(width for _, width in TYPES.values())


# --- predicates ------------------------------------------------------------------------------

PREDICATE_STREAM = "CREATE STREAM s (x UINT8, y INT16, z UINT8, flag BOOL, code CHAR(4));\n"
x, y, z, flag = FieldRef("x"), FieldRef("y"), FieldRef("z"), FieldRef("flag")


def eq(left: ast.Expr, right: int) -> Compare:
    return Compare("=", left, IntLit(right))


PREDICATES = {
    "x = 1": eq(x, 1),
    "x != 1": Compare("!=", x, IntLit(1)),
    "x <> 1": Compare("!=", x, IntLit(1)),
    "x < 1": Compare("<", x, IntLit(1)),
    "x <= 1": Compare("<=", x, IntLit(1)),
    "x > 1": Compare(">", x, IntLit(1)),
    "x >= 1": Compare(">=", x, IntLit(1)),
    "1 < x": Compare("<", IntLit(1), x),
    "x = z": Compare("=", x, z),
    "x = 1 AND z = 2": BoolOp("AND", (eq(x, 1), eq(z, 2))),
    "x = 1 AND z = 2 AND y = 3": BoolOp("AND", (eq(x, 1), eq(z, 2), eq(y, 3))),
    "x = 1 OR z = 2": BoolOp("OR", (eq(x, 1), eq(z, 2))),
    # AND binds tighter than OR, NOT tighter than AND
    "x = 1 OR z = 2 AND y = 3": BoolOp("OR", (eq(x, 1), BoolOp("AND", (eq(z, 2), eq(y, 3))))),
    "(x = 1 OR z = 2) AND y = 3": BoolOp("AND", (BoolOp("OR", (eq(x, 1), eq(z, 2))), eq(y, 3))),
    "NOT x = 1": Not(eq(x, 1)),
    "NOT x = 1 AND z = 2": BoolOp("AND", (Not(eq(x, 1)), eq(z, 2))),
    "NOT (x = 1 AND z = 2)": Not(BoolOp("AND", (eq(x, 1), eq(z, 2)))),
    "NOT NOT flag": Not(Not(flag)),
    "x + 1 > y - 2": Compare(">", Arith("+", x, IntLit(1)), Arith("-", y, IntLit(2))),
    "x - 1 - 2 = y": Compare("=", Arith("-", Arith("-", x, IntLit(1)), IntLit(2)), y),
    "2 * x > y": Compare(">", Arith("*", IntLit(2), x), y),
    "x * 3 > y": Compare(">", Arith("*", x, IntLit(3)), y),
    # * binds tighter than + and -
    "y + x * 2 = 7": Compare("=", Arith("+", y, Arith("*", x, IntLit(2))), IntLit(7)),
    "(y + x) * 2 = 7": Compare("=", Arith("*", Arith("+", y, x), IntLit(2)), IntLit(7)),
    "x BETWEEN 1 AND 5": Between(x, IntLit(1), IntLit(5)),
    "x NOT BETWEEN 1 AND 5": Between(x, IntLit(1), IntLit(5), negated=True),
    "x BETWEEN 1 AND 5 AND z = 2": BoolOp("AND", (Between(x, IntLit(1), IntLit(5)), eq(z, 2))),
    "x IN (1, 2, 3)": InList(x, (IntLit(1), IntLit(2), IntLit(3))),
    "x NOT IN (1)": InList(x, (IntLit(1),), negated=True),
    "code IN ('ab', 'abcd')": InList(FieldRef("code"), (StrLit("ab"), StrLit("abcd"))),
    "x = 0x2a": eq(x, 42),
    "x = 0XFF": eq(x, 255),
    "y = -7": eq(y, -7),
    "y = - 7": eq(y, -7),
    "y > -0x10": Compare(">", y, IntLit(-16)),
    "-y > 3": Compare(">", Neg(y), IntLit(3)),
    "flag = TRUE": Compare("=", flag, BoolLit(True)),
    "flag != false": Compare("!=", flag, BoolLit(False)),
    "flag": flag,
    "TRUE": BoolLit(True),
    "code = 'ab'": Compare("=", FieldRef("code"), StrLit("ab")),
    "x > LAST(x)": Compare(">", x, Agg("LAST", x)),
    "x > PREV(x)": Compare(">", x, Agg("LAST", x)),
    "x + y < SUM(y) AND COUNT(*) < 4": BoolOp("AND", (
        Compare("<", Arith("+", x, y), Agg("SUM", y)), Compare("<", Agg("COUNT", None), IntLit(4)))),
    "x BETWEEN MIN(x) AND max(x)": Between(x, Agg("MIN", x), Agg("MAX", x)),
    "y <= FIRST(y)": Compare("<=", y, Agg("FIRST", y)),
}


def define_of(text: str) -> ast.Expr:
    # B comes first so that A's aggregates have a partial match to look at
    qf = parse(PREDICATE_STREAM + f"PATTERN ( B A ) DEFINE B AS TRUE, A AS {text}")
    return check(qf).queries[0].define("A").expr


@pytest.mark.parametrize("text", PREDICATES)
def test_predicate(text: str):
    assert define_of(text) == PREDICATES[text]



def test_running_and_final_measures_are_the_last_row_value():
    base = "CREATE STREAM s (t TIMESTAMP, x UINT8); MEASURES {m} PATTERN (A B) DEFINE A AS x = 1, B AS x = 2;"
    plain = check(parse(base.format(m="LAST(x) AS lx, COUNT(*) AS n"))).queries
    moded = check(parse(base.format(m="FINAL LAST(x) AS lx, RUNNING COUNT(*) AS n"))).queries
    assert plain == moded
