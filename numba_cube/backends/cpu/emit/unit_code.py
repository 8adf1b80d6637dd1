"""The writer of generated code, shared by both kernel shapes (``emit/cube_kernel.py``,
``emit/flat_kernel.py``): indented lines, statements unparsed with the user's line numbers.
The rewrites a unit's code needs before it is pasted into a unit loop (``return``, local arrays)
are ``lower/unit_statements.py``'s.
"""

from __future__ import annotations

import ast
from contextlib import contextmanager

from numba_cube.backends.cpu.emit import linemarks


class Writer:
    """Accumulates indented source lines."""

    def __init__(self):
        self.lines: list[str] = []
        self.depth = 0

    def line(self, text: str = "") -> None:
        self.lines.append(("    " * self.depth + text) if text else "")

    def code(self, stmts: list[ast.stmt], origin=None) -> None:
        """Unparse statements at the current indentation (``pass`` for an empty list); with
        ``origin``, the ``SourceFunction`` they come from, each ends in a comment naming the
        user's line (``linemarks``: what Numba's errors are pointed back to)."""
        if not stmts:
            self.line("pass")
            return
        text = ast.unparse(ast.Module(body=stmts, type_ignores=[]))
        lines = text.splitlines() if origin is None else linemarks.annotate(text, stmts, origin)
        for line in lines:
            self.line(line)

    @contextmanager
    def indent(self, header: str | None = None):
        if header is not None:
            self.line(header)
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def parse_stmts(src: str) -> list[ast.stmt]:
    return ast.parse(src).body
