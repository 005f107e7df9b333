"""Diagnostics of the front end (SPEC §1–2), pinned by the fixture files of ``fixtures/errors``.

Each fixture is one small query file: a ``-- title:`` line, then ``-- expect: REGEX``
lines for errors and ``-- expect-warning: REGEX`` lines for warnings. Each regex
must match one head line (``FILE:LINE:COL: error: message``) of the diagnostics, and
every diagnostic must be expected. A fixture with no ``expect`` line must pass the
check and carry its expected warnings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from cepc.cli import main
from cepc.errors import QueryError
from cepc.lang.check import check
from cepc.lang.parse import parse, parse_file

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "errors"
HEAD = re.compile(r"^(?P<file>.*):(?P<line>\d+):(?P<col>\d+): (?P<severity>error|warning): ")


@dataclass
class Fixture:
    path: Path
    title: str
    errors: list[str]
    warnings: list[str]

    @classmethod
    def read(cls, path: Path) -> Fixture:
        text = path.read_text()
        title = re.search(r"^-- title: (.*)$", text, re.MULTILINE)
        assert title, f"{path.name} has no '-- title:' line"
        return cls(
            path=path,
            title=title.group(1),
            errors=re.findall(r"^-- expect: (.*)$", text, re.MULTILINE),
            warnings=re.findall(r"^-- expect-warning: (.*)$", text, re.MULTILINE),
        )


FIXTURE_FILES = sorted(FIXTURES.glob("*.sql"))
ERROR_FIXTURES = [p for p in FIXTURE_FILES if Fixture.read(p).errors]
WARNING_FIXTURES = [p for p in FIXTURE_FILES if not Fixture.read(p).errors]


def heads(formatted: str) -> list[str]:
    """The ``FILE:LINE:COL: severity: message`` lines; quoted source and caret lines are indented."""
    return [line for line in formatted.splitlines() if not line.startswith("  ")]


def assert_diagnostics_match(formatted: str, expected: list[str]) -> None:
    """Each expected regex matches a head line and each head line is matched by an expected regex."""
    lines = heads(formatted)
    for pattern in expected:
        assert any(re.search(pattern, line) for line in lines), f"no diagnostic matches {pattern!r}:\n{formatted}"
    for line in lines:
        assert any(re.search(pattern, line) for pattern in expected), f"unexpected diagnostic {line!r}"


def test_there_are_fixtures_of_both_kinds():
    assert len(ERROR_FIXTURES) >= 30
    assert len(WARNING_FIXTURES) >= 3


@pytest.mark.parametrize("path", ERROR_FIXTURES, ids=lambda p: p.stem)
def test_error_fixture(path: Path):
    fixture = Fixture.read(path)
    with pytest.raises(QueryError) as info:
        check(parse_file(path))
    assert_diagnostics_match(info.value.format(), fixture.errors + fixture.warnings)


@pytest.mark.parametrize("path", WARNING_FIXTURES, ids=lambda p: p.stem)
def test_warning_fixture(path: Path):
    fixture = Fixture.read(path)
    assert fixture.warnings, f"{path.name} expects neither an error nor a warning"
    checked = check(parse_file(path))
    assert_diagnostics_match("\n".join(w.format() for w in checked.warnings), fixture.warnings)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_caret_sits_under_the_reported_column(path: Path):
    try:
        checked = check(parse_file(path))
    except QueryError as e:
        diagnostics = e.diagnostics
    else:
        diagnostics = list(checked.warnings)
    source_lines = path.read_text().split("\n")
    for d in diagnostics:
        head, quoted, caret = d.format().split("\n")
        m = HEAD.match(head)
        line, col = int(m["line"]), int(m["col"])
        assert m["file"] == str(path)
        assert quoted == "  " + source_lines[line - 1]
        assert re.fullmatch(r" *\^~*", caret[2:]), caret
        assert caret.index("^") - 2 == col - 1
        # the underline stays within the quoted line, or marks the one column past its end
        assert len(caret) <= max(len(quoted), 2 + col)


@pytest.mark.parametrize("path", ERROR_FIXTURES, ids=lambda p: p.stem)
def test_cli_check_prints_the_diagnostic(path: Path, capsys):
    fixture = Fixture.read(path)
    assert main(["check", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "Traceback" not in captured.err
    assert_diagnostics_match(captured.err, fixture.errors + fixture.warnings)


@pytest.mark.parametrize("path", WARNING_FIXTURES, ids=lambda p: p.stem)
def test_cli_check_prints_warnings_and_succeeds(path: Path, capsys):
    fixture = Fixture.read(path)
    assert main(["check", str(path)]) == 0
    assert_diagnostics_match(capsys.readouterr().err, fixture.warnings)


def test_crlf_line_endings():
    text = "CREATE STREAM s (x UINT8);\r\nPATTERN ( A )\r\nDEFINE A AS y = 1;\r\n"
    with pytest.raises(QueryError) as info:
        check(parse(text, "crlf.sql"))
    assert info.value.format().split("\n") == [
        "crlf.sql:3:13: error: unknown field 'y' in stream s",
        "  DEFINE A AS y = 1;",
        "              ^",
    ]


@pytest.mark.parametrize("odd", ["\f\n", "\r", "-- \u2028\n"], ids=["form feed", "lone CR", "line separator"])
def test_quoted_line_is_the_reported_line(odd: str):
    # lark ends a line at \n only: DEFINE is on line 2 after a lone \r, else on line 3
    text = f"CREATE STREAM s (x UINT8); {odd}PATTERN ( A )\nDEFINE A AS y = 1;\n"
    line = 1 + text.count("\n", 0, text.index("DEFINE"))
    with pytest.raises(QueryError) as info:
        check(parse(text, "odd.sql"))
    head, quoted, _ = info.value.format().split("\n")
    assert head.startswith(f"odd.sql:{line}:13: error: unknown field 'y'")
    assert quoted == "  DEFINE A AS y = 1;"
