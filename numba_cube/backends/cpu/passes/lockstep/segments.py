"""Segments for ``passes/lockstep/schedule.py``: the statements between split points, cut into steps.

A *segment* is what becomes one region (or a run of regions under the same control) once the
kernel is split: the statements between two split points. A *step* is one statement of it, or
the test of a compound statement, in program order, with what the pass needs to judge it: the
statement list that holds it (where lockstep points go), whether a loop of the segment repeats it,
the names an enclosing ``if x < n`` bounds, and the arms of enclosing ``if`` s that every unit takes
the same way.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from numba_cube.backends.cpu.lower.hidden import LOCKSTEP, is_split
from numba_cube.backends.cpu.passes.lockstep.index import lower_bounded

__all__ = ["Step", "Segments", "exclusive", "container_of", "load_of", "lockstep_point",
           "stored_names"]


@dataclass
class Step:
    """One statement (or the test of a compound statement) of a segment."""

    node: ast.AST
    container: list                  # the statement list that holds it (None for tests)
    stmt: ast.stmt
    in_loop: bool
    bounds: frozenset
    accesses: list = field(default_factory=list)
    #: the test of a ``while`` around split points, evaluated again at the end of its body
    trailing: bool = False
    #: ``(id(if), arm)`` of the enclosing ifs whose test is the same for every unit
    branches: frozenset = frozenset()


class Segments:
    """Cuts a body into segments: the statements between split points, with their steps."""

    def __init__(self, uniform_test):
        self.segments: list[list[Step]] = []
        self.uniform_test = uniform_test

    def walk(self, stmts: list[ast.stmt], trailing: ast.expr | None = None,
             trailing_stmt: ast.stmt | None = None) -> None:
        current: list[Step] = []
        for s in stmts:
            if is_split(s):
                self._close(current)
                current = []
            elif _contains_split(s):
                if isinstance(s, (ast.If, ast.While)):       # its test runs per unit, here
                    current.append(Step(s.test, None, s, False, frozenset()))
                self._close(current)
                current = []
                if isinstance(s, ast.While):                 # and again at the body's end
                    self.walk(s.body, s.test, s)
                else:
                    self.walk(s.body)
                self.walk(s.orelse)
            else:
                self._steps(s, stmts, current, False, frozenset())
        if trailing is not None:
            current.append(Step(trailing, None, trailing_stmt, False, frozenset(),
                                 trailing=True))
        self._close(current)

    def _close(self, steps: list[Step]) -> None:
        if steps:
            self.segments.append(steps)

    def _steps(self, s: ast.stmt, container: list, out: list[Step], in_loop: bool,
               bounds: frozenset, branches: frozenset = frozenset()) -> None:
        if isinstance(s, ast.If):
            out.append(Step(s.test, None, s, in_loop, bounds, branches=branches))
            inner = bounds | lower_bounded(s.test)
            uniform = self.uniform_test(s.test)
            for arm, stmts in ((0, s.body), (1, s.orelse)):
                arms = branches | {(id(s), arm)} if uniform else branches
                for t in stmts:
                    self._steps(t, stmts, out, in_loop, inner if arm == 0 else bounds, arms)
        elif isinstance(s, (ast.For, ast.While)):
            head = s.iter if isinstance(s, ast.For) else s.test
            out.append(Step(head, None, s, True, bounds, branches=branches))
            for stmts in (s.body, s.orelse):
                for t in stmts:
                    self._steps(t, stmts, out, True, bounds, branches)
        else:
            out.append(Step(s, container, s, in_loop, bounds, branches=branches))


def _contains_split(s: ast.stmt) -> bool:
    return any(isinstance(n, ast.stmt) and is_split(n) for n in ast.walk(s))


def exclusive(a: frozenset, b: frozenset) -> bool:
    """Do two accesses sit in different arms of one ``if`` with a uniform test?"""
    arms = dict(a)
    return any(k in arms and arms[k] != arm for k, arm in b)


def load_of(target: ast.Subscript) -> ast.Subscript:
    return ast.Subscript(target.value, target.slice, ast.Load())


def stored_names(s: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def lockstep_point(at: ast.AST) -> ast.stmt:
    stmt = ast.Expr(ast.Call(ast.Name(LOCKSTEP, ast.Load()), [], []))
    return ast.fix_missing_locations(ast.copy_location(stmt, at))


def container_of(body: list[ast.stmt], target: ast.stmt) -> list | None:
    """The statement list that holds ``target`` (by identity)."""
    if any(s is target for s in body):
        return body
    for s in body:
        for field_name in ("body", "orelse"):
            inner = getattr(s, field_name, None)
            if isinstance(inner, list):
                found = container_of(inner, target)
                if found is not None:
                    return found
    return None
