"""The grid-uniform prologue of a barrier-free kernel: computed once per chunk, not per unit.

A kernel's first statements often compute values that are the same for every unit of the grid:
stumpy's ``gpu_stump`` kernel picks its ping-pong buffers from the row index, a parameter::

    j = idx
    if j % 2 == 0:
        QT_out = QT_even
        QT_in = QT_odd
    else:
        QT_out = QT_odd
        QT_in = QT_even

Left in the unit loop (``flat_kernel.FlatKernel``), every unit re-runs it, and an array assigned under
a branch costs Numba a reference-count increment and decrement per array per unit: measured on
that kernel, a hand-written loop with the selection inside ran 1.7x slower than with it outside.
This pass moves such statements to the chunk function's start, before the unit loop.

What moves: a top-level statement of the body that is

- ``name = <expr>`` with ``name`` assigned nowhere else, or an ``if <expr>:`` whose two branches
  hold only such assignments (each target assigned in that ``if`` alone);
- where every ``<expr>`` is *safe*: it reads only parameters, the grid's dimensions, names moved
  already and names that still hold a parameter's value (``p = p__arg``, the re-binding of a
  parameter the body reassigns later, ``lower/lowering.py``); it calls only ``min``, ``max``, ``abs``
  and ``__nn``; it reads no memory (no subscript) and cannot raise (a division only by a
  non-zero constant).

Such a statement gives every unit the same values wherever it runs, and running it before an
early ``return`` of some units changes nothing (it has no effect but its names, which those units
no longer read). Statements after it that are not moved keep their order.
"""

from __future__ import annotations

import ast
import copy

from numba_cube.backends.cpu.passes import enabled
from numba_cube.backends.cpu.analyze.dataflow import loads, store_counts, stores
from numba_cube.backends.cpu.lower.hidden import GRID_UNIFORM_IDS, NONNEG

__all__ = ["split_prologue"]

_SAFE_CALLS = frozenset({"min", "max", "abs", NONNEG})
_SAFE_ATTRIBUTES = frozenset({"size", "ndim"})
_DIVISIONS = (ast.Div, ast.FloorDiv, ast.Mod)
_SAFE_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor) + _DIVISIONS


def split_prologue(body: list[ast.stmt], params) -> tuple[list[ast.stmt], list[ast.stmt], set]:
    """``(prologue, rest, names)``: the statements to run once per chunk (rewritten to read
    parameters where they read a re-bound parameter's name), the body without them, and the
    names the prologue defines."""
    if not enabled("uniform_prologue"):
        return [], list(body), set()
    counts = store_counts(body)
    valid = set(params) | GRID_UNIFORM_IDS
    aliases: dict[str, str] = {}          # name -> the parameter whose value it holds here
    prologue: list[ast.stmt] = []
    rest: list[ast.stmt] = []
    defined: set[str] = set()
    for stmt in body:
        moved = _movable(stmt, counts, valid, aliases)
        if moved is not None:
            prologue.append(moved)
            names = stores(moved)
            defined |= names
            valid |= names
            continue
        rest.append(stmt)
        for name in stores(stmt):
            aliases.pop(name, None)
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Name)
                and stmt.value.id in params):
            aliases[stmt.targets[0].id] = stmt.value.id
    return prologue, rest, defined


def _movable(stmt, counts, valid, aliases) -> ast.stmt | None:
    """The statement as it runs in the prologue, or None if it must stay in the unit loop."""
    if _single_assignment(stmt):
        if counts[stmt.targets[0].id] != 1:
            return None
        value = _safe(stmt.value, valid, aliases)
        if value is None:
            return None
        return ast.copy_location(ast.Assign([copy.deepcopy(stmt.targets[0])], value), stmt)
    if isinstance(stmt, ast.If) and stmt.body and stmt.orelse:
        branches = stmt.body + stmt.orelse
        if not all(_single_assignment(s) for s in branches):
            return None
        here: dict[str, int] = {}
        for s in branches:
            here[s.targets[0].id] = here.get(s.targets[0].id, 0) + 1
        if any(counts[name] != n for name, n in here.items()):
            return None
        test = _safe(stmt.test, valid, aliases)
        if test is None:
            return None
        new_body, new_orelse = [], []
        for src, out in ((stmt.body, new_body), (stmt.orelse, new_orelse)):
            for s in src:
                value = _safe(s.value, valid, aliases)
                if value is None:
                    return None
                out.append(ast.copy_location(
                    ast.Assign([copy.deepcopy(s.targets[0])], value), s))
        return ast.copy_location(ast.If(test, new_body, new_orelse), stmt)
    return None


def _single_assignment(stmt) -> bool:
    return (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name))


def _safe(expr: ast.expr, valid: set, aliases: dict) -> ast.expr | None:
    """``expr`` with aliased names replaced by their parameters, if it is safe (module
    docstring), else None."""
    for node in ast.walk(expr):
        if isinstance(node, (ast.Name, ast.Constant, ast.Load, ast.operator, ast.unaryop,
                             ast.cmpop, ast.boolop, ast.UnaryOp, ast.Compare, ast.BoolOp,
                             ast.IfExp, ast.keyword)):
            continue
        if isinstance(node, ast.BinOp):
            if not isinstance(node.op, _SAFE_BINOPS):
                return None
            if isinstance(node.op, _DIVISIONS) and not (
                    isinstance(node.right, ast.Constant)
                    and isinstance(node.right.value, (int, float))
                    and not isinstance(node.right.value, bool) and node.right.value != 0):
                return None
            continue
        if isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in _SAFE_CALLS
                    and not node.keywords):
                return None
            continue
        if isinstance(node, ast.Attribute):
            if not (node.attr in _SAFE_ATTRIBUTES and isinstance(node.value, ast.Name)):
                return None
            continue
        return None                       # a subscript, a lambda, a comprehension, ...
    called = {n.func.id for n in ast.walk(expr) if isinstance(n, ast.Call)}
    read = loads(expr) - called
    if not all(name in valid or name in aliases for name in read):
        return None

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node):
            if isinstance(node.ctx, ast.Load) and node.id in aliases and node.id not in valid:
                return ast.copy_location(ast.Name(aliases[node.id], ast.Load()), node)
            return node

    return ast.fix_missing_locations(Rename().visit(copy.deepcopy(expr)))
