"""The user's file and line on each generated statement, so Numba's errors can point there.

Numba types the *generated* module (kept in the cache directory), so its ``TypingError`` names a
line of that module. The translator writes each statement it takes from the user's function
with a trailing comment naming the line it came from (``  # kernel.py:8``; ``annotate``), which
also makes the generated module readable on its own. When Numba's compile fails,
``point_to_user`` rewrites the message's references to the generated module into the user's
file and line, read back from those comments.

Statements the translator made up (parsed from its own snippets) carry line numbers of the
snippet, not of the user's function; a statement whose line is not inside its enclosing user
statement takes that statement's line, and a top-level one at or before the ``def`` line gets no
comment: a missing pointer is better than a wrong one.
"""

from __future__ import annotations

import ast
import os
import re

__all__ = ["annotate", "user_location", "point_to_user"]

_MARK = "  # "
# The comment ``annotate`` writes at the end of a line: `  # <file>:<line>`.
_MARKED = re.compile(r"  # (?P<file>.+):(?P<line>\d+)$")


def annotate(text: str, stmts: list[ast.stmt], fn) -> list[str]:
    """The lines of ``text`` (``ast.unparse`` of ``stmts``, statements of ``fn``, a
    ``source.SourceFunction``), each statement's first line ending in a comment naming the
    user's file and line."""
    lines = text.splitlines()
    try:
        reparsed = ast.parse(text).body
    except SyntaxError:         # (unparse output always parses; no comment rather than a crash)
        return lines
    def_line = getattr(fn.node, "lineno", 0)
    marks: dict[int, int] = {}

    def pair(originals, copies, enclosing: int | None, enclosing_end: int | None) -> None:
        if len(originals) != len(copies):
            return
        for original, copy in zip(originals, copies):
            if type(original) is not type(copy):
                continue
            line, end = getattr(original, "lineno", None), getattr(original, "end_lineno", None)
            if enclosing is not None and (line is None or not enclosing <= line <= enclosing_end):
                line, end = enclosing, enclosing_end    # made up inside a user statement
            if line is not None and end is None:
                end = line
            if line is not None and line > def_line and _one_line_header(copy):
                marks.setdefault(copy.lineno - 1, line)
            for field in ("body", "orelse", "finalbody"):
                pair(getattr(original, field, []), getattr(copy, field, []), line, end)

    pair(stmts, reparsed, None, None)
    for index, line in marks.items():
        lines[index] += f"{_MARK}{fn.filename}:{line + fn.line_offset}"
    return lines


def _one_line_header(node: ast.stmt) -> bool:
    """Whether the statement's first line ends outside any string literal, so that a comment can
    be appended to it: a simple statement on one line, or a compound one whose header is."""
    body = getattr(node, "body", None)
    if isinstance(body, list) and body:
        return body[0].lineno == node.lineno + 1
    return node.lineno == node.end_lineno


def user_location(source: str, generated_line: int) -> tuple[str, int] | None:
    """``(file, line)`` of the user's statement at line ``generated_line`` (1-based) of the
    generated module ``source``, or ``None`` where the translator wrote that line itself."""
    lines = source.splitlines()
    if not 1 <= generated_line <= len(lines):
        return None
    found = _MARKED.search(lines[generated_line - 1])
    return None if found is None else (found.group("file"), int(found.group("line")))


def point_to_user(message: str, generated_path: str, source: str) -> tuple[str, tuple[str, int] | None]:
    """``message`` with each reference to a line of the generated module (Numba's ``File "...",
    line N:`` and ``at ... (N)``) replaced by the user's file and line where known; and the
    first such location (the innermost error Numba reports comes first)."""
    generated = os.path.basename(generated_path)
    first: list[tuple[str, int]] = []

    def replace(match: re.Match, template: str) -> str:
        if os.path.basename(match.group("path")) != generated:
            return match.group(0)
        where = user_location(source, int(match.group("line")))
        if where is None:
            return match.group(0)
        first.append(where)
        return template.format(file=where[0], line=where[1])

    message = re.sub(r'File "(?P<path>[^"]+)", line (?P<line>\d+)',
                     lambda m: replace(m, 'File "{file}", line {line}'), message)
    message = re.sub(r"at (?P<path>\S+) \((?P<line>\d+)\)",
                     lambda m: replace(m, "at {file} ({line})"), message)
    return message, (first[0] if first else None)
