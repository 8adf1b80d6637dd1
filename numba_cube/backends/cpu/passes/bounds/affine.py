"""Affine forms of index expressions in a loop variable, for the bounds checks (``passes/bounds/checks.py``).

``affine_coefficient(node, var, assigned)`` says how an index moves with a loop's variable: the
coefficient of ``var`` (an int, or an expression of names the loop does not change) when the
index is affine in it, None otherwise. ``passes/bounds/checks.py`` checks such an index once, at the loop's
two ends, instead of at every iteration. The rest builds and combines coefficients as AST.
"""

from __future__ import annotations

import ast
import copy

from numba_cube.backends.cpu.lower.hidden import NONNEG

__all__ = ["affine_coefficient", "as_expr", "negate", "combine", "scale", "substitute",
           "assign", "parse_statement", "parse_expression", "SHAPE_ATTRIBUTES"]

#: attributes of an array whose items do not change in a kernel
SHAPE_ATTRIBUTES = ("shape", "strides")


def affine_coefficient(node: ast.expr, var: str, assigned: set[str]):
    """The coefficient of ``var`` in ``node`` when ``node`` is affine in it with coefficients
    the loop does not change: an int, or an expression of such names; None otherwise. Built of
    ``var``, names the loop does not assign, integer literals, ``x.shape[k]`` and ``x.size`` of
    such names, ``+``, ``-`` and ``*`` (one side free of ``var``) and ``__nn(...)``."""
    if isinstance(node, ast.Name):
        if node.id == var:
            return 1
        return 0 if node.id not in assigned else None
    if isinstance(node, ast.Constant):
        return 0 if type(node.value) is int else None
    if isinstance(node, ast.Attribute):
        return 0 if (node.attr in ("size", "ndim") and isinstance(node.value, ast.Name)
                     and node.value.id not in assigned) else None
    if isinstance(node, ast.Subscript):
        value = node.value
        return 0 if (isinstance(value, ast.Attribute) and value.attr in SHAPE_ATTRIBUTES
                     and isinstance(value.value, ast.Name) and value.value.id not in assigned
                     and isinstance(node.slice, ast.Constant)
                     and type(node.slice.value) is int) else None
    if isinstance(node, ast.Call):
        if (isinstance(node.func, ast.Name) and node.func.id == NONNEG and len(node.args) == 1
                and not node.keywords):
            return affine_coefficient(node.args[0], var, assigned)
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        c = affine_coefficient(node.operand, var, assigned)
        return c if c is None or isinstance(node.op, ast.UAdd) else negate(c)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        left, right = affine_coefficient(node.left, var, assigned), affine_coefficient(node.right, var, assigned)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Add):
            return combine(left, right, ast.Add())
        if isinstance(node.op, ast.Sub):
            return combine(left, right, ast.Sub())
        if left == 0:                       # v-free * affine
            return scale(node.left, right)
        if right == 0:
            return scale(node.right, left)
        return None                         # v * v: not affine
    return None


def as_expr(c) -> ast.expr:
    return ast.Constant(c) if isinstance(c, int) else c


def negate(c):
    return -c if isinstance(c, int) else ast.UnaryOp(ast.USub(), c)


def combine(a, b, op):
    if isinstance(a, int) and isinstance(b, int):
        return a + b if isinstance(op, ast.Add) else a - b
    if b == 0:
        return a
    if a == 0:
        return b if isinstance(op, ast.Add) else negate(b)
    return ast.BinOp(as_expr(a), op, as_expr(b))


def scale(factor: ast.expr, c):
    """``factor * c`` for a ``var``-free expression ``factor`` and a coefficient ``c``."""
    if c == 0:
        return 0
    if isinstance(factor, ast.Constant) and isinstance(c, int):
        return factor.value * c
    return ast.BinOp(copy.deepcopy(factor), ast.Mult(), as_expr(c))


def substitute(node: ast.expr, var: str, name: str) -> ast.expr:
    class Sub(ast.NodeTransformer):
        def visit_Name(self, n):
            return ast.Name(name, ast.Load()) if n.id == var else n
    return Sub().visit(node)


def assign(name: str, value: ast.expr) -> ast.stmt:
    return ast.Assign([ast.Name(name, ast.Store())], value)


def parse_statement(text: str) -> ast.stmt:
    return ast.parse(text).body[0]


def parse_expression(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body
