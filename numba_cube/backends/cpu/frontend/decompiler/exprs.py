"""Tables and small helpers for spelling Numba IR values as Python expressions.

``frontend/decompiler/block.py`` renders the untyped IR of a kernel without source back into Python; this
module holds what that needs and does not depend on the block being rendered: the operator
tables (IR operators are the ``operator`` module's functions), constants as AST nodes,
``slice(...)`` calls turned back into ``a:b`` syntax, and global-name lookup.
"""

from __future__ import annotations

import ast
import builtins
import math
import operator

BINOPS = {operator.add: ast.Add, operator.sub: ast.Sub, operator.mul: ast.Mult,
           operator.truediv: ast.Div, operator.floordiv: ast.FloorDiv, operator.mod: ast.Mod,
           operator.pow: ast.Pow, operator.lshift: ast.LShift, operator.rshift: ast.RShift,
           operator.and_: ast.BitAnd, operator.or_: ast.BitOr, operator.xor: ast.BitXor,
           operator.matmul: ast.MatMult}
INPLACE = {operator.iadd: ast.Add, operator.isub: ast.Sub, operator.imul: ast.Mult,
            operator.itruediv: ast.Div, operator.ifloordiv: ast.FloorDiv, operator.imod: ast.Mod,
            operator.ipow: ast.Pow, operator.ilshift: ast.LShift, operator.irshift: ast.RShift,
            operator.iand: ast.BitAnd, operator.ior: ast.BitOr, operator.ixor: ast.BitXor,
            operator.imatmul: ast.MatMult}
COMPARE = {operator.lt: ast.Lt, operator.le: ast.LtE, operator.gt: ast.Gt, operator.ge: ast.GtE,
            operator.eq: ast.Eq, operator.ne: ast.NotEq, operator.is_: ast.Is,
            operator.is_not: ast.IsNot}
UNARY = {operator.neg: ast.USub, operator.pos: ast.UAdd, operator.invert: ast.Invert,
          operator.not_: ast.Not}
#: IR expression kinds with no kernel meaning, and the construct they come from
REFUSED_EXPRS = {"make_function": "nested function definition or lambda",
                  "build_set": "set display", "build_map": "dict display",
                  "typed_getitem": "typed getitem", "phi": "phi node", "undef": "undefined value",
                  "null": "null value", "dummy": "dummy value"}


def constant_node(value) -> ast.expr | None:
    """A bytecode constant as an expression; None for a constant with no literal spelling."""
    if isinstance(value, float) and not math.isfinite(value):
        big = ast.Constant(1e999)                    # parses as inf
        if math.isnan(value):
            return ast.BinOp(big, ast.Mult(), ast.Constant(0))
        return big if value > 0 else ast.UnaryOp(ast.USub(), big)
    if isinstance(value, tuple):
        parts = [constant_node(v) for v in value]
        return None if any(p is None for p in parts) else ast.Tuple(parts, ast.Load())
    if isinstance(value, slice):
        parts = [None if p is None else constant_node(p)
                 for p in (value.start, value.stop, value.step)]
        return ast.Slice(*parts)
    if isinstance(value, (bool, int, float, complex, str, bytes)) or value is None \
            or value is Ellipsis:
        return ast.Constant(value)
    return None


def as_slices(node: ast.expr) -> ast.expr:
    """A subscript with ``slice(a, b)`` calls (the IR's spelling of ``a:b``) as slices."""
    if _is_slice_call(node):
        parts = list(node.args) + [None] * (3 - len(node.args))
        if len(node.args) == 1:                       # slice(stop)
            parts = [None, node.args[0], None]
        return ast.Slice(*[None if _is_none(p) else p for p in parts])
    if isinstance(node, ast.Tuple):
        node.elts = [as_slices(e) for e in node.elts]
    return node


def _is_slice_call(node) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "slice" and not node.keywords and 1 <= len(node.args) <= 3
            and not any(isinstance(a, ast.Starred) for a in node.args))


def _is_none(node) -> bool:
    return node is None or (isinstance(node, ast.Constant) and node.value is None)


def builtin_or_global(py_func, name: str):
    """What ``name`` denotes for ``py_func`` as a global: (found, object)."""
    g = py_func.__globals__
    if name in g:
        return True, g[name]
    if hasattr(builtins, name):
        return True, getattr(builtins, name)
    return False, None
