"""Compile-time evaluation of the expressions numba-cuda accepts as constants.

numba-cuda needs the shape of ``cuda.shared.array`` / ``cuda.local.array`` as a compile-time
constant, and gets it from whatever its typing can prove constant: a literal, a module-level
constant, a closure value, a local name assigned once from a constant, a tuple or arithmetic of
those, or (after inlining) a device function's parameter bound to such a value at the call site.
``evaluate`` proves the same things from the source, in the scope of one ``SourceFunction``, and
raises ``NotConstant`` for anything else (the caller turns that into its usual refusal).

The same evaluation decides, at an inlined call site (``lower/inline/inliner.py``), which arguments are
compile-time values that may be substituted into the device function's body.
"""

from __future__ import annotations

import ast
import operator

import numpy as np

from numba_cube.backends.cpu.frontend import resolve as rs
from numba_cube.backends.cpu.frontend.source import SourceFunction, chain, resolve

#: operators folded on constants (the ones shape arithmetic uses; no true division, whose
#: float result is no shape anyway)
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitAnd: operator.and_,
           ast.BitOr: operator.or_, ast.BitXor: operator.xor}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}

#: Python values that are constants (numba types them as literals or plain scalars; a string
#: may name a dtype)
_SCALARS = (bool, int, float, complex, str, np.bool_, np.integer, np.floating,
            np.complexfloating)


class NotConstant(Exception):
    """The expression is not something the translator can prove constant."""


def is_constant_value(value) -> bool:
    """A scalar (or string), None, or a (nested) tuple of them."""
    if value is None or isinstance(value, _SCALARS):
        return True
    return isinstance(value, tuple) and all(is_constant_value(v) for v in value)


def evaluate(fn: SourceFunction, node: ast.expr, pristine: ast.FunctionDef | None = None,
             _seen: frozenset = frozenset()):
    """The constant value of ``node`` in ``fn``'s scope; raise ``NotConstant`` otherwise.

    ``pristine`` is the function's AST before lowering rewrote it (local names are looked up
    there); without it, local names are not constant.
    """
    if isinstance(node, ast.Constant):
        if is_constant_value(node.value):
            return node.value
        raise NotConstant
    if isinstance(node, ast.Tuple):          # lists are not shapes in numba-cuda either
        return tuple(evaluate(fn, e, pristine, _seen) for e in node.elts)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left = evaluate(fn, node.left, pristine, _seen)
        right = evaluate(fn, node.right, pristine, _seen)
        return _fold(_BINARY[type(node.op)], left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _fold(_UNARY[type(node.op)], evaluate(fn, node.operand, pristine, _seen))
    if isinstance(node, ast.Subscript):      # SHAPE[0] of a constant tuple
        base = evaluate(fn, node.value, pristine, _seen)
        index = evaluate(fn, node.slice, pristine, _seen)
        if isinstance(base, tuple) and isinstance(index, int):
            return _fold(operator.getitem, base, index)
        raise NotConstant
    if chain(node) is not None:
        return _name_value(fn, node, pristine, _seen)
    if isinstance(node, ast.Call) and not node.keywords and chain(node.func) is not None:
        return _scalar_cast(fn, node, pristine, _seen)
    raise NotConstant


def _scalar_cast(fn, node, pristine, seen):
    """``np.int32(5)``, ``int(N)``: a scalar type applied to constants."""
    resolved = resolve(fn, node.func)
    if resolved is None or resolved.cuda_path is not None or resolved.rest:
        raise NotConstant
    if not (resolved.obj in (int, float, bool) or rs.numpy_scalar_name(resolved.obj)):
        raise NotConstant
    args = [evaluate(fn, a, pristine, seen) for a in node.args]
    return _fold(resolved.obj, *args)


def _fold(op, *args):
    try:
        return op(*args)
    except Exception:        # e.g. a tuple times a float, a division by zero
        raise NotConstant from None


def _name_value(fn, node, pristine, seen):
    resolved = resolve(fn, node)               # may raise CompileError for an undefined name
    if resolved is None:                       # a local variable
        if not isinstance(node, ast.Name) or pristine is None or node.id in seen:
            raise NotConstant
        value = single_assignment(fn, pristine, node.id, getattr(node, "lineno", None))
        if value is None:
            raise NotConstant
        return evaluate(fn, value, pristine, seen | {node.id})
    if resolved.cuda_path == "warpsize":
        return 32
    if resolved.cuda_path is not None or resolved.rest:
        raise NotConstant
    if is_constant_value(resolved.obj):
        return resolved.obj
    raise NotConstant


def single_assignment(fn: SourceFunction, pristine: ast.FunctionDef, name: str,
                      used_at: int | None) -> ast.expr | None:
    """The value of ``name = <expr>`` when that is the only binding of ``name`` in the function,
    is a statement of the function's top level (so it runs before anything after it) and ends
    before line ``used_at``; None otherwise (parameters included)."""
    if name in fn.params or used_at is None:
        return None
    stores = [n for n in ast.walk(pristine)
              if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)]
    if len(stores) != 1:
        return None
    for stmt in pristine.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and stmt.targets[0] is stores[0]):
            end = getattr(stmt, "end_lineno", stmt.lineno)
            return stmt.value if end < used_at else None
    return None


def shape_value(fn: SourceFunction, node: ast.expr, pristine: ast.FunctionDef | None):
    """An array shape as an int or a tuple of ints. Raises ``NotConstant`` when ``node`` is not
    provably constant, ``TypeError`` when it is constant but not integers."""
    value = evaluate(fn, node, pristine)
    if isinstance(value, tuple):
        return tuple(operator.index(v) for v in value)
    if isinstance(value, (bool, np.bool_)):          # numba-cuda: not a shape
        raise TypeError("a boolean is not a shape")
    return operator.index(value)
