"""Rewrites of an inlined device function's lowered body (the mechanics behind ``lower/inline/inliner.py``).

Once a device function has been lowered for one call site, its statements are pasted into the
caller. Three rewrites make that exact:

- ``returns_to_tail``: every ``return`` is moved to the end of a path through the body, by
  moving the statements after an ``if`` that may return into the branches that do not always
  return. A ``return`` inside a loop cannot be moved that way and is refused by the caller.
- ``tail_returns_to_assign``: each (now final) ``return e`` becomes ``<result> = e``.
- ``Renamer`` / ``relocate``: the function's locals get names of their own (containing ``__``,
  so they cannot meet a user name), and every node takes the call's position, so that an error
  a later pass reports (a barrier under a unit-dependent condition) points at the call in the
  kernel's file rather than at a line number of another file.
"""

from __future__ import annotations

import ast
import copy
import operator

from numba_cube.backends.cpu.lower.hidden import LOCAL_MARKER


def _constant_test(test: ast.expr):
    """``(True, value)`` for a test made of constants only (what substituting compile-time
    arguments leaves: ``if False:``, ``if 1 == 2:``), else ``(False, None)``."""
    if isinstance(test, ast.Constant):
        return True, bool(test.value)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        known, value = _constant_test(test.operand)
        return known, (not value) if known else None
    if (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.left, ast.Constant) and isinstance(test.comparators[0],
                                                                   ast.Constant)):
        op = _COMPARE.get(type(test.ops[0]))
        if op is not None:
            try:
                return True, bool(op(test.left.value, test.comparators[0].value))
            except TypeError:
                return False, None
    return False, None


_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}


def prune_constant_branches(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """Replace each ``if`` whose test is constant by the branch it takes, as numba's dead-branch
    pruning does for literal arguments (the branch not taken may not even type, e.g. ``z[1]``
    under ``if len(z) == 2`` for a 1-tuple)."""
    out = []
    for s in stmts:
        if isinstance(s, ast.If):
            known, value = _constant_test(s.test)
            if known:
                out += prune_constant_branches(s.body if value else s.orelse)
                continue
        for name in ("body", "orelse"):
            if isinstance(getattr(s, name, None), list):
                setattr(s, name, prune_constant_branches(getattr(s, name)))
        if isinstance(getattr(s, "body", None), list) and not s.body:
            s.body = [ast.Pass()]
        out.append(s)
    return out


def may_return(stmts: list[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Return) for s in stmts for n in ast.walk(s))


def always_exits(stmts: list[ast.stmt]) -> bool:
    """Does every path through ``stmts`` end in ``return`` or ``raise``?"""
    for s in stmts:
        if isinstance(s, (ast.Return, ast.Raise)):
            return True
        if isinstance(s, ast.If) and always_exits(s.body) and always_exits(s.orelse):
            return True
    return False


def return_in_loop(stmts: list[ast.stmt]) -> ast.Return | None:
    """The first ``return`` nested in a ``for``/``while`` loop, if any."""
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, (ast.For, ast.While)):
                for m in ast.walk(n):
                    if isinstance(m, ast.Return):
                        return m
    return None


def returns_to_tail(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """Restructure ``stmts`` (no ``return`` inside loops) so that every ``return`` is the last
    statement of its path; statements that can no longer run are dropped."""
    out: list[ast.stmt] = []
    for i, s in enumerate(stmts):
        if isinstance(s, (ast.Return, ast.Raise)):
            out.append(s)
            return out
        if isinstance(s, ast.If) and may_return([s]):
            rest = stmts[i + 1:]
            takers = [b for b in ("body", "orelse") if not always_exits(getattr(s, b))]
            for k, branch in enumerate(takers):
                # the first taker gets the statements themselves, a second one a copy
                tail = rest if k == 0 else copy.deepcopy(rest)
                setattr(s, branch, getattr(s, branch) + tail)
            s.body = returns_to_tail(s.body) or [ast.Pass()]
            s.orelse = returns_to_tail(s.orelse)
            out.append(s)
            return out
        out.append(s)
    return out


class _TailReturns(ast.NodeTransformer):
    def __init__(self, result: str | None):
        self.result = result

    def visit_Return(self, node):
        value = node.value if node.value is not None else ast.Constant(None)
        if self.result is None:      # the caller discards the value: evaluate it only
            new = ast.Expr(value) if not isinstance(value, (ast.Constant, ast.Name)) \
                else ast.Pass()
        else:
            new = ast.Assign([ast.Name(self.result, ast.Store())], value)
        return ast.copy_location(new, node)


def tail_returns_to_assign(stmts: list[ast.stmt], result: str | None) -> list[ast.stmt]:
    """``return e`` -> ``result = e`` (``e`` alone when ``result`` is None); a path that falls
    off the end leaves ``None``, as the function would have returned."""
    tr = _TailReturns(result)
    new = [tr.visit(s) for s in stmts]
    if result is not None and not always_exits(stmts):
        new.insert(0, ast.Assign([ast.Name(result, ast.Store())], ast.Constant(None)))
    return new


class Renamer(ast.NodeTransformer):
    """Rename variables (``mapping``), local-array markers included."""

    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node):
        new = self.mapping.get(node.id)
        if new is not None:
            node.id = new
        return node

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id == LOCAL_MARKER and node.args \
                and isinstance(node.args[0], ast.Constant):
            name = node.args[0].value
            node.args[0] = ast.Constant(self.mapping.get(name, name))
        return self.generic_visit(node)


def relocate(stmts: list[ast.stmt], where: ast.AST) -> None:
    """Give every node of ``stmts`` the source position of ``where`` (the call)."""
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, (ast.stmt, ast.expr, ast.keyword)):
                for attr in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
                    setattr(n, attr, getattr(where, attr, None))
