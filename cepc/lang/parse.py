"""Query text → AST. The only module of cepc that imports lark.

Both query forms (the compact form of Woods et al. and SQL:2016
``MATCH_RECOGNIZE``) lower to the same :class:`~cepc.lang.ast.Query`.
Every failure, lark's included, becomes a :class:`~cepc.errors.QueryError`
naming file, line and column.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from ..errors import Diagnostic, QueryError, Source, Span
from . import ast

_TYPE_ALIASES = {
    "UINT8": ast.UIntType(8), "UINT16": ast.UIntType(16), "UINT32": ast.UIntType(32), "UINT64": ast.UIntType(64),
    "INT8": ast.IntType(8), "INT16": ast.IntType(16), "INT32": ast.IntType(32), "INT64": ast.IntType(64),
    "BOOL": ast.UIntType(1, is_bool=True), "TIMESTAMP": ast.TimestampType(),
}
_AGGREGATES = {"COUNT", "FIRST", "LAST", "PREV", "MIN", "MAX", "SUM"}
_MAX_WIDTH = 64
_MAX_CHAR = 64
# Nesting bound: the builder and every later stage walk the AST recursively.
_MAX_DEPTH = 100

# Readable names of terminals for "expected …" messages.
_TERMINAL_NAMES = {
    "IDENT": "a name", "INT": "an integer", "STRING": "a string literal", "LPAR": "'('", "RPAR": "')'",
    "COMMA": "','", "_SEMI": "';'", "$END": "end of file", "COMP_OP": "a comparison", "ADD_OP": "'+' or '-'",
    "MUL_OP": "'*'", "STAR": "'*'", "PLUS": "'+'", "QMARK": "'?'", "DOT": "'.'", "VBAR": "'|'",
    "LBRACE": "'{'", "RBRACE": "'}'", "EQUAL": "'='",
}


@functools.cache
def _parser() -> Lark:
    grammar = resources.files("cepc.lang").joinpath("grammar.lark").read_text()
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=False)


def parse_file(path: str | Path) -> ast.QueryFile:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise QueryError(Diagnostic("error", f"cannot read query file: {e.strerror}", None, Source(str(path), ""))) from None
    except UnicodeDecodeError:
        raise QueryError(Diagnostic("error", "query file is not UTF-8 text", None, Source(str(path), ""))) from None
    return parse(text, str(path))


def parse(text: str, filename: str = "<query>") -> ast.QueryFile:
    """Parse a whole query file. Raises :class:`QueryError` with every diagnostic found."""
    source = Source(filename, text)
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as e:
        raise QueryError(_syntax_diagnostic(e, source)) from None
    deep = _too_deep(tree)
    if deep is not None:
        raise QueryError(Diagnostic("error", f"the query nests more than {_MAX_DEPTH} levels deep",
                                    _meta_span(deep.meta), source))
    builder = _Builder(source)
    try:
        result = builder.transform(tree)
    except VisitError as e:  # a bug in the builder, never the user's fault
        raise e.orig_exc from None
    if builder.errors:
        raise QueryError(builder.errors)
    return result


def _too_deep(tree: Tree) -> Tree | None:
    """The first subtree nested deeper than ``_MAX_DEPTH``, else None.

    Each operator of a ``+``/``-``/``*`` chain counts as a level: the builder nests them.
    """
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        depth += len(node.children) // 2 if node.data in ("sum", "product") else 1
        if depth > _MAX_DEPTH:
            return node
        stack.extend((child, depth) for child in node.children if isinstance(child, Tree))
    return None


def _describe_expected(expected: set[str]) -> str:
    names = []
    parser = _parser()
    for name in sorted(expected):
        if name in _TERMINAL_NAMES:
            names.append(_TERMINAL_NAMES[name])
            continue
        try:
            pattern = parser.get_terminal(name).pattern
        except KeyError:
            names.append(name)
            continue
        if pattern.type == "str":
            names.append(repr(pattern.value.upper()))
        else:
            names.append(name.lower())
    names = sorted(set(names))
    if len(names) > 8:
        names = names[:8] + ["…"]
    return ", ".join(names)


def _syntax_diagnostic(e: UnexpectedInput, source: Source) -> Diagnostic:
    line = getattr(e, "line", None) or 1
    col = getattr(e, "column", None) or 1
    if line < 1:  # lark reports -1 at end of input
        lines = source.text.splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
    if isinstance(e, UnexpectedCharacters):
        ch = source.text[e.pos_in_stream] if e.pos_in_stream < len(source.text) else ""
        msg = "unterminated string literal" if ch == "'" else f"unexpected character {ch!r}"
        width = 1
    elif isinstance(e, UnexpectedToken):
        tok = e.token
        if tok.type == "$END":
            # lark places the end token on the last token: point just past that one
            msg = "unexpected end of file"
            width = 1
            if tok.end_line is not None:
                line, col = tok.end_line, tok.end_column
        else:
            msg = f"unexpected {str(tok)!r}"
            width = max(1, len(str(tok)))
        if e.expected:
            msg += f"; expected {_describe_expected(set(e.expected))}"
    elif isinstance(e, UnexpectedEOF):
        msg = "unexpected end of file"
        width = 1
    else:  # pragma: no cover - lark has no other kinds
        msg = "syntax error"
        width = 1
    return Diagnostic("error", msg, Span(line, col, line, col + width), source)


def _tok_span(tok: Token) -> Span:
    return Span(tok.line, tok.column, tok.end_line, tok.end_column)


def _meta_span(meta) -> Span | None:
    if getattr(meta, "empty", True):
        return None
    return Span(meta.line, meta.column, meta.end_line, meta.end_column)


def _ident(tok: Token) -> str:
    text = str(tok)
    return text[1:-1] if text.startswith('"') else text


def _int(tok: Token) -> int:
    text = str(tok)
    return int(text, 16) if text[:2].lower() == "0x" else int(text)


def _string(tok: Token) -> str:
    return str(tok)[1:-1].replace("''", "'")


@v_args(meta=True)
class _Builder(Transformer):
    """Builds AST nodes bottom-up, collecting diagnostics instead of stopping at the first."""

    def __init__(self, source: Source):
        super().__init__()
        self.source = source
        self.errors: list[Diagnostic] = []
        self._query_index = 0

    def _error(self, message: str, span: Span | None) -> None:
        self.errors.append(Diagnostic("error", message, span, self.source))

    # --- file -----------------------------------------------------------------

    def start(self, meta, items):
        streams = [i for i in items if isinstance(i, ast.Stream)]
        queries = [i for i in items if isinstance(i, ast.Query)]
        if len(streams) > 1:
            self._error("a query file holds one CREATE STREAM; this is a second one", streams[1].span)
        for i, item in enumerate(items):
            if isinstance(item, ast.Stream) and i > 0 and not isinstance(items[0], ast.Stream):
                self._error("CREATE STREAM must come before the queries", item.span)
                break
        if not streams:
            self._error("the file has no CREATE STREAM declaring the input stream",
                        queries[0].span if queries else Span(1, 1, 1, 2))
        if not queries:
            self._error("the file has no query", streams[0].span if streams else Span(1, 1, 1, 2))
        return ast.QueryFile(self.source, streams[0] if streams else None, tuple(queries))

    # --- CREATE STREAM --------------------------------------------------------

    def create_stream(self, meta, items):
        name, *fields = items
        return ast.Stream(_ident(name), tuple(fields), _meta_span(meta))

    def field_def(self, meta, items):
        name, type_ = items
        return ast.FieldDef(_ident(name), type_, _tok_span(name))

    def signed_int(self, meta, items):
        return Token("INT", "-" + str(items[0]), line=items[0].line, column=items[0].column - 1,
                     end_line=items[0].end_line, end_column=items[0].end_column)

    def type_spec(self, meta, items):
        name_tok, *args = items
        name = str(name_tok).upper()
        span = _meta_span(meta)
        fallback = ast.UIntType(8)
        if name in _TYPE_ALIASES:
            if args:
                self._error(f"type {name} takes no arguments", span)
            return _TYPE_ALIASES[name]
        if name in ("UINT", "INT", "CHAR"):
            if len(args) != 1 or args[0].type != "INT" or str(args[0]).startswith("-"):
                self._error(f"type {name} takes one integer argument, as in {name}(8)", span)
                return fallback
            n = _int(args[0])
            if name == "CHAR":
                if not 1 <= n <= _MAX_CHAR:
                    self._error(f"CHAR length must be between 1 and {_MAX_CHAR}, not {n}", _tok_span(args[0]))
                    return fallback
                return ast.CharType(n)
            if not 1 <= n <= _MAX_WIDTH:
                self._error(f"{name} width must be between 1 and {_MAX_WIDTH}, not {n}", _tok_span(args[0]))
                return fallback
            return ast.UIntType(n) if name == "UINT" else ast.IntType(n)
        if name == "ENUM":
            if not args or any(a.type != "STRING" for a in args):
                self._error("ENUM takes one or more string members, as in ENUM('a', 'b')", span)
                return fallback
            members = [_string(a) for a in args]
            seen = set()
            for a, m in zip(args, members):
                if m in seen:
                    self._error(f"ENUM member {m!r} is listed twice", _tok_span(a))
                seen.add(m)
            return ast.EnumType(tuple(members))
        known = "UINT(n), INT(n), UINT8/16/32/64, INT8/16/32/64, BOOL, CHAR(n), ENUM(...), TIMESTAMP"
        self._error(f"unknown type {str(name_tok)!r}; the types are {known}", _tok_span(name_tok))
        return fallback

    # --- clauses (shared by both query forms) ---------------------------------

    def name_clause(self, meta, items):
        return ("name", _ident(items[0]), _meta_span(meta))

    def partition_clause(self, meta, items):
        return ("partition", tuple((_ident(t), _tok_span(t)) for t in items), _meta_span(meta))

    def order_item(self, meta, items):
        if len(items) > 1 and str(items[1]).upper() == "DESC":
            self._error("ORDER BY … DESC is not supported: cepc takes tuples in arrival order", _tok_span(items[1]))
        return (_ident(items[0]), _tok_span(items[0]))

    def order_clause(self, meta, items):
        if len(items) > 1:
            self._error("ORDER BY takes one field: the stream's time order", items[1][1])
        return ("order", items[0], _meta_span(meta))

    def after_clause(self, meta, items):
        return ("after", items[0], _meta_span(meta))

    def skip_past_last_row(self, meta, items):
        return ast.SKIP_PAST_LAST_ROW

    def continue_(self, meta, items):
        return ast.CONTINUE

    def skip_to_next_row(self, meta, items):
        self._error("AFTER MATCH SKIP TO NEXT ROW is not supported; use SKIP PAST LAST ROW or CONTINUE",
                    _meta_span(meta))
        return ast.SKIP_PAST_LAST_ROW

    def skip_to_var(self, meta, items):
        words = " ".join(str(t).upper() for t in items[:-1])
        what = f"SKIP TO {words} {items[-1]}".replace("  ", " ")
        self._error(f"AFTER MATCH {what} is not supported; use SKIP PAST LAST ROW or CONTINUE", _meta_span(meta))
        return ast.SKIP_PAST_LAST_ROW

    def within_clause(self, meta, items):
        return ("within", _int(items[0]), _meta_span(meta))

    def measures_clause(self, meta, items):
        return ("measures", tuple(items), _meta_span(meta))

    def measure(self, meta, items):
        # RUNNING and FINAL agree at a match's last row, where ONE ROW PER MATCH evaluates measures
        expr, alias = items[-2], items[-1]
        return ast.Measure(expr, _ident(alias), _tok_span(alias))

    def measure_mode(self, meta, items):
        return None

    def within_interval(self, meta, items):
        self._error("WITHIN INTERVAL is not supported; WITHIN takes a number of ticks of the time field, "
                    "as in WITHIN 500", _meta_span(meta))
        return ("within", 0, _meta_span(meta))

    def pattern_clause(self, meta, items):
        pattern = items[0] if items else ast.Empty(_meta_span(meta))
        return ("pattern", pattern, _meta_span(meta))

    def define_clause(self, meta, items):
        return ("define", tuple(items), _meta_span(meta))

    def define(self, meta, items):
        name, expr = items
        return ast.Define(_ident(name), expr, _tok_span(name))

    def one_row(self, meta, items):
        return ("rows", None, _meta_span(meta))

    def all_rows(self, meta, items):
        self._error("ALL ROWS PER MATCH is not supported; cepc reports ONE ROW PER MATCH", _meta_span(meta))
        return ("rows", None, _meta_span(meta))

    def rows_option(self, meta, items):
        return None

    def subset_clause(self, meta, items):
        self._error("SUBSET is not supported", _meta_span(meta))
        return ("subset", None, _meta_span(meta))

    def sql_alias(self, meta, items):
        return ("alias", _ident(items[0]), _meta_span(meta))

    # --- queries ----------------------------------------------------------------

    def compact_query(self, meta, clauses):
        return self._query(meta, clauses, form="compact", stream_ref=None)

    def sql_query(self, meta, items):
        stream_tok, *clauses = items
        return self._query(meta, clauses, form="sql", stream_ref=(_ident(stream_tok), _tok_span(stream_tok)))

    def _query(self, meta, clauses, form, stream_ref):
        span = _meta_span(meta)
        index = self._query_index
        self._query_index += 1
        seen: dict[str, Span | None] = {}
        values: dict = {}
        for kind, value, cspan in clauses:
            if kind in ("rows", "subset"):
                continue
            if kind == "alias":
                kind = "name"
            if kind in seen:
                label = {"name": "NAME", "partition": "PARTITION BY", "order": "ORDER BY", "after": "AFTER MATCH",
                         "within": "WITHIN", "measures": "MEASURES", "pattern": "PATTERN", "define": "DEFINE"}[kind]
                self._error(f"{label} is given twice in one query", cspan)
                continue
            seen[kind] = cspan
            values[kind] = value
        if form == "compact" and "order" in seen:
            pass  # accepted in the compact form too: it names the time field
        if "pattern" not in values:
            self._error("the query has no PATTERN clause", span)
        if "define" not in values:
            if "pattern" in values and any(True for _ in ast.pattern_vars(values["pattern"])):
                self._error("the query has no DEFINE clause", span)
            values["define"] = ()
        order = values.get("order")
        clause_spans = dict(seen)
        if stream_ref:
            clause_spans["from"] = stream_ref
        if order:
            clause_spans["order_field"] = order[1]
        if "partition" in values:
            clause_spans["partition_fields"] = [s for _, s in values["partition"]]
        return ast.Query(
            name=values.get("name", f"q{index}"),
            pattern=values.get("pattern", ast.Empty()),
            defines=values["define"],
            partition_by=tuple(n for n, _ in values.get("partition", ())),
            order_by=order[0] if order else None,
            measures=values.get("measures", ()),
            within=values.get("within"),
            after_match=values.get("after", ast.SKIP_PAST_LAST_ROW),
            span=span,
            clause_spans=clause_spans,
        )

    # --- patterns -----------------------------------------------------------------

    def alternation(self, meta, items):
        return ast.Alt(tuple(items), _meta_span(meta))

    def sequence(self, meta, items):
        return ast.Seq(tuple(items), _meta_span(meta))

    def var(self, meta, items):
        return ast.Var(_ident(items[0]), _tok_span(items[0]))

    def any_tuple(self, meta, items):
        return ast.AnyTuple(_tok_span(items[0]))

    def empty(self, meta, items):
        return ast.Empty(_meta_span(meta))

    def exclusion(self, meta, items):
        self._error("pattern exclusion {- … -} is not supported", _meta_span(meta))
        return items[0]

    def permute(self, meta, items):
        self._error("PERMUTE is not supported; spell the orders out with '|'", _meta_span(meta))
        return ast.Alt(tuple(items), _meta_span(meta))

    def anchor(self, meta, items):
        where = "start" if str(items[0]) == "^" else "end"
        self._error(f"the anchor {str(items[0])!r} is not supported: a match may {where} at any tuple",
                    _tok_span(items[0]))
        return ast.Empty(_tok_span(items[0]))

    def q_star(self, meta, items):
        return (0, None)

    def q_plus(self, meta, items):
        return (1, None)

    def q_opt(self, meta, items):
        return (0, 1)

    def q_exact(self, meta, items):
        n = _int(items[0])
        return (n, n)

    def q_at_least(self, meta, items):
        return (_int(items[0]), None)

    def q_between(self, meta, items):
        lo, hi = _int(items[0]), _int(items[1])
        if lo > hi:
            self._error(f"quantifier {{{lo},{hi}}} has its minimum above its maximum", _meta_span(meta))
            return (hi, hi)
        return (lo, hi)

    def q_at_most(self, meta, items):
        return (0, _int(items[0]))

    def reluctant(self, meta, items):
        self._error("reluctant quantifiers are not supported: cepc reports every match as soon as it ends, "
                    "so drop the trailing '?'", _tok_span(items[0]))
        return None

    def possessive(self, meta, items):
        self._error("possessive quantifiers are not supported", _tok_span(items[0]))
        return None

    def quantified(self, meta, items):
        child, (lo, hi) = items[0], items[1]
        return ast.Repeat(child, lo, hi, _meta_span(meta))

    # --- expressions ----------------------------------------------------------------

    def or_expr(self, meta, items):
        return ast.BoolOp("OR", tuple(items), _meta_span(meta))

    def and_expr(self, meta, items):
        return ast.BoolOp("AND", tuple(items), _meta_span(meta))

    def not_(self, meta, items):
        return ast.Not(items[0], _meta_span(meta))

    def compare(self, meta, items):
        left, op, right = items
        op = "!=" if str(op) == "<>" else str(op)
        return ast.Compare(op, left, right, _meta_span(meta))

    def between(self, meta, items):
        return ast.Between(items[0], items[1], items[2], False, _meta_span(meta))

    def not_between(self, meta, items):
        return ast.Between(items[0], items[1], items[2], True, _meta_span(meta))

    def in_list(self, meta, items):
        return ast.InList(items[0], tuple(items[1:]), False, _meta_span(meta))

    def not_in_list(self, meta, items):
        return ast.InList(items[0], tuple(items[1:]), True, _meta_span(meta))

    def _binary_chain(self, meta, items):
        left = items[0]
        for op, right in zip(items[1::2], items[2::2]):
            if str(op) in ("/", "%"):
                self._error(f"'{op}' is not supported: arithmetic is '+', '-' and multiplication by a constant",
                            _tok_span(op))
            span = Span(left.span.line, left.span.col, right.span.end_line, right.span.end_col) \
                if left.span and right.span else _meta_span(meta)
            left = ast.Arith(str(op), left, right, span)
        return left

    sum = _binary_chain
    product = _binary_chain

    def neg(self, meta, items):
        operand = items[0]
        if isinstance(operand, ast.IntLit):
            return ast.IntLit(-operand.value, _meta_span(meta))
        return ast.Neg(operand, _meta_span(meta))

    def int_lit(self, meta, items):
        return ast.IntLit(_int(items[0]), _tok_span(items[0]))

    def str_lit(self, meta, items):
        return ast.StrLit(_string(items[0]), _tok_span(items[0]))

    def true_lit(self, meta, items):
        return ast.BoolLit(True, _tok_span(items[0]))

    def false_lit(self, meta, items):
        return ast.BoolLit(False, _tok_span(items[0]))

    def field_ref(self, meta, items):
        return ast.FieldRef(_ident(items[0]), _tok_span(items[0]))

    def qualified_ref(self, meta, items):
        self._error(f"pattern-variable references such as {items[0]}.{items[1]} are not supported; "
                    f"use the field ({items[1]}) or an aggregate such as LAST({items[1]})", _meta_span(meta))
        return ast.FieldRef(_ident(items[1]), _tok_span(items[1]))

    def call_args(self, meta, items):
        return list(items)

    def call(self, meta, items):
        name_tok = items[0]
        args = items[1] if len(items) > 1 else []
        func = str(name_tok).upper()
        span = _meta_span(meta)
        if func not in _AGGREGATES:
            self._error(f"unknown function {str(name_tok)!r}; the aggregates are "
                        "COUNT(*), FIRST, LAST, PREV, MIN, MAX and SUM of a field", _tok_span(name_tok))
            return ast.IntLit(0, span)
        if func == "COUNT":
            if len(args) == 1 and isinstance(args[0], Token) and args[0].type == "STAR":
                return ast.Agg("COUNT", None, span)
            self._error("COUNT takes '*': COUNT(*) counts the tuples of the match", span)
            return ast.Agg("COUNT", None, span)
        if len(args) != 1 or not isinstance(args[0], ast.FieldRef):
            if len(args) == 2 and func in ("PREV", "LAST", "FIRST") and isinstance(args[0], ast.FieldRef):
                self._error(f"{func} with an offset is not supported; {func}(field) only", span)
            else:
                self._error(f"{func} takes one field, as in {func}(price)", span)
            arg = args[0] if args and isinstance(args[0], ast.FieldRef) else ast.FieldRef("?", span)
            return ast.Agg("LAST" if func == "PREV" else func, arg, span)
        return ast.Agg("LAST" if func == "PREV" else func, args[0], span)

