"""Errors of the CEL compiler, each carrying a line, a column and a caret excerpt.

>>> err = CelSyntaxError("unexpected '}'", (1, 13), expected=("a term",))
>>> print(err.with_source("FILTER{Price>}Stock"))
line 1, column 13: unexpected '}'; expected a term
  FILTER{Price>}Stock
              ^
"""

from __future__ import annotations

from cesar.automata.terms import Pos

EXCERPT_WINDOW = 60
"""Characters of the offending line quoted on each side of the column."""


class CelError(ValueError):
    """A query that cannot be compiled, located at ``line`` and ``column`` (1-based)."""

    def __init__(self, message: str, pos: Pos, source: str | None = None) -> None:
        self.message = message
        self.line, self.column = pos if pos is not None else (1, 1)
        self.source = source
        super().__init__(self._render())

    @property
    def detail(self) -> str:
        """The message without location."""
        return self.message

    @property
    def excerpt(self) -> str:
        """The offending source line and a caret under the column, or '' without source."""
        if self.source is None:
            return ""
        lines = self.source.splitlines() or [""]
        text = lines[min(self.line, len(lines)) - 1]
        start = max(0, self.column - 1 - EXCERPT_WINDOW)
        end = self.column - 1 + EXCERPT_WINDOW
        before = "…" if start else ""
        after = "…" if end < len(text) else ""
        caret = " " * (len(before) + self.column - 1 - start)
        return f"  {before}{text[start:end]}{after}\n  {caret}^"

    def _render(self) -> str:
        head = f"line {self.line}, column {self.column}: {self.detail}"
        return f"{head}\n{self.excerpt}" if self.source is not None else head

    def with_source(self, source: str) -> CelError:
        """This error with the query text attached, so that it renders an excerpt."""
        self.source = source
        self.args = (self._render(),)
        return self

    def __str__(self) -> str:
        return self._render()


class CelSyntaxError(CelError):
    """Text that does not follow the CEL grammar; ``expected`` lists what could come next."""

    def __init__(
        self, message: str, pos: Pos, expected: tuple[str, ...] = (), source: str | None = None
    ) -> None:
        self.expected = expected
        super().__init__(message, pos, source)

    @property
    def detail(self) -> str:
        if not self.expected:
            return self.message
        return f"{self.message}; expected {' or '.join(self.expected)}"


class CelSemanticError(CelError):
    """A well-formed query that names unknown streams or attributes, or mistypes a term."""
