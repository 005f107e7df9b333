"""The one error hierarchy of cepc.

Every failure a user can cause is a :class:`CepcError`; the CLI prints it and
exits 1. Anything else escaping to the user is a bug.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Source:
    """A query file's text, kept so diagnostics can quote the offending line."""

    name: str
    text: str

    def line(self, number: int) -> str:
        # lines as lark counts them: split at '\n' only (not at form feeds or U+2028), CRLF tolerated
        lines = self.text.split("\n")
        return lines[number - 1].removesuffix("\r") if 0 < number <= len(lines) else ""


@dataclass(frozen=True)
class Span:
    """A region of a source file; lines and columns are 1-based, ``end_col`` exclusive."""

    line: int
    col: int
    end_line: int
    end_col: int


@dataclass(frozen=True)
class Diagnostic:
    severity: str  # "error" | "warning"
    message: str
    span: Span | None = None
    source: Source | None = None

    def format(self) -> str:
        where = self.source.name if self.source else "<query>"
        if self.span is None:
            return f"{where}: {self.severity}: {self.message}"
        head = f"{where}:{self.span.line}:{self.span.col}: {self.severity}: {self.message}"
        if self.source is None:
            return head
        text = self.source.line(self.span.line)
        if not text:
            return head
        width = (self.span.end_col - self.span.col) if self.span.end_line == self.span.line else len(text) - self.span.col + 1
        width = max(1, min(width, len(text) - self.span.col + 1))
        caret = " " * (self.span.col - 1) + "^" + "~" * (width - 1)
        return f"{head}\n  {text}\n  {caret}"


class CepcError(Exception):
    """Base of every error cepc reports to a user."""

    def format(self) -> str:
        return f"error: {self}"


class QueryError(CepcError):
    """One or more diagnostics in a query file, each with its file, line and column."""

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = list(diagnostics)
        super().__init__(self.diagnostics[0].message if self.diagnostics else "query error")

    def format(self) -> str:
        return "\n".join(d.format() for d in self.diagnostics)


class EventsError(CepcError):
    """A malformed events file: names the file, row and column.

    ``row`` is the 0-based arrival index of the offending row, when there is one.
    """

    def __init__(self, message: str, row: int | None = None):
        super().__init__(message)
        self.row = row


class UsageError(CepcError):
    """A bad command-line value."""


@dataclass
class ToolError(CepcError):
    """An external tool failed: carries its command line and the tail of its log."""

    message: str
    command: list[str] = field(default_factory=list)
    log_tail: str = ""

    def __str__(self) -> str:
        return self.message

    def format(self) -> str:
        text = f"error: {self.message}"
        if self.command:
            text += "\n  command: " + " ".join(self.command)
        if self.log_tail:
            text += "\n" + "\n".join("  | " + line for line in self.log_tail.splitlines())
        return text


class FitError(CepcError):
    """The design needs more of some resource than the device has: ``bel``, the resource nextpnr found
    too little of (None when not known), and ``detail``, how much it needs against what there is."""

    def __init__(self, message: str, *, bel: str | None = None, detail: str = ""):
        super().__init__(message)
        self.bel, self.detail = bel, detail


class TimingError(CepcError):
    """Place and route finished, but a clock misses its target frequency."""
