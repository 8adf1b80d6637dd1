"""Shared pieces of the IO analysis that only read the IR: the ``Ref`` and ``Summary`` records,
and ``Defs``: every variable's definitions, call-target resolution and index shapes.

Nothing here knows about aliases; ``io_walk`` builds those on top.
"""

from __future__ import annotations

import types as pytypes
from dataclasses import dataclass
from typing import Callable

from numba.core import ir

from .io_cuda import cuda_path, namespace_prefix

__all__ = ["ANY_NDIM", "INDEX", "TUPLE", "Ref", "Summary", "Summarise", "CudaPath", "UNRESOLVED", "Defs"]

# Entries of the per-parameter ``ndims`` besides an array's ndim (>= 0) and None (a value of
# no known kind). Negative, so that they can never be mistaken for a public ndim.
ANY_NDIM = -1          # an array whose ndim is not known (a view of unknown rank)
INDEX = -2             # not an array: an integer, usable as one index
# A tuple (maybe nested, maybe a namedtuple) that may hold arrays: a kernel's tuple parameter.
# Its items are not told apart: the answer for the parameter is the answer for each array in it.
TUPLE = -3


@dataclass(frozen=True)
class Ref:
    """What a variable may hold of the parameters. ``kind``: "array", "tuple" (of arrays),
    "iter" (over arrays), "method" (a bound method of an array, named by ``method``), "elem"
    (an element of an array, or a scalar parameter) or "mixed" (conflicting definitions:
    every use escapes). ``ndim`` is the array's ndim, or the ndim of the arrays inside a tuple
    or iterator; None when unknown.

    Elements are tracked only for one thing: an element may be a *record*, a reference into
    its array, so ``a[i].x = 1`` (or a device function doing ``r.x = 1`` on it) writes ``a``,
    and ``a[i]`` handed to a call the analysis does not model makes ``a`` unknown. Every other
    use of an element is a use of a value and is ignored.
    """

    params: frozenset[int]
    kind: str = "array"
    ndim: int | None = None
    method: str | None = None

    def merge(self, other: Ref) -> Ref:
        kind = self.kind if (self.kind, self.method) == (other.kind, other.method) else "mixed"
        ndim = self.ndim if self.ndim == other.ndim else None
        return Ref(self.params | other.params, kind, ndim, self.method if kind != "mixed" else None)


@dataclass(frozen=True)
class Summary:
    """Per parameter "r" / "w" / "rw" / "" / None (unknown), plus the parameters whose view the
    function may return and those whose element it may return (so that a caller can track the
    call's result as an alias, or as a record of its array). Entries of scalar parameters are
    kept too ("w": a record written through its fields); the public answer blanks them."""

    effects: tuple[str | None, ...]
    returns: frozenset[int] = frozenset()
    ret_ndim: int | None = None
    ret_elems: frozenset[int] = frozenset()


# summarise(py_func, ndims) -> Summary, or None when the callee cannot be analysed here
# (recursion, depth): passed in so that this module does not import the cache that calls it.
Summarise = Callable[[pytypes.FunctionType, tuple], "Summary | None"]


class CudaPath(str):
    """A numba.cuda attribute path that could not be resolved to an object: the simulator
    installs ``cuda.atomic`` only while a kernel runs, and has ``None`` for what it does not
    implement (``cuda.stcg``). Still a builtin, with the rule of its path."""


UNRESOLVED = object()


class Defs:
    """The definitions of every variable of one function's IR, and what can be read off them."""

    def __init__(self, fir: ir.FunctionIR, ndims: tuple):
        self.ndims = ndims
        self.stmts = [st for blk in fir.blocks.values() for st in blk.body]
        self.defs: dict[str, list] = {}
        for st in self.stmts:
            if isinstance(st, ir.Assign):
                self.defs.setdefault(st.target.name, []).append(st.value)

    def resolve(self, var: ir.Var, depth: int = 0):
        """The Python object a call target names (globals, closure cells, attribute chains),
        or ``UNRESOLVED``."""
        defs = self.defs.get(var.name)
        if not defs or len(defs) != 1 or depth > 8:
            return UNRESOLVED
        d = defs[0]
        if isinstance(d, (ir.Global, ir.FreeVar)):
            return d.value
        if isinstance(d, ir.Var):
            return self.resolve(d, depth + 1)
        if not (isinstance(d, ir.Expr) and d.op == "getattr"):
            return UNRESOLVED
        base = self.resolve(d.value, depth + 1)
        if isinstance(base, CudaPath):
            return CudaPath(base + "." + d.attr)
        if base is UNRESOLVED:
            return UNRESOLVED
        # The real numba.cuda (by identity, not a module that is only named like it): the
        # simulator installs some of its attributes only while a kernel runs, and has None
        # for the ones it does not implement.
        prefix = namespace_prefix(base)
        try:
            value = getattr(base, d.attr)
        except Exception:
            return UNRESOLVED if prefix is None else CudaPath(prefix + d.attr)
        return CudaPath(prefix + d.attr) if value is None and prefix is not None else value

    # -- index shapes: how many integer and slice indices an index variable holds -----------

    def index_shape(self, var: ir.Var, depth: int = 0) -> tuple[int, int] | None:
        """(n_int, n_slice) of an index, or None when it cannot be told (e.g. a parameter,
        which could be a tuple or a slice, or an ``a.shape``)."""
        defs = self.defs.get(var.name)
        if not defs or depth > 8:
            return None
        shapes = {self._def_shape(d, depth) for d in defs}
        return shapes.pop() if len(shapes) == 1 else None

    def _def_shape(self, d, depth: int) -> tuple[int, int] | None:
        if isinstance(d, (ir.Const, ir.Global, ir.FreeVar)):
            return self.const_index_shape(d.value)
        if isinstance(d, ir.Var):
            return self.index_shape(d, depth + 1)
        if isinstance(d, ir.Arg):                       # a tuple, a slice, or an integer
            return (1, 0) if self.ndims[d.index] == INDEX else None
        if not isinstance(d, ir.Expr):
            return None
        if d.op == "build_tuple":
            total = [0, 0]
            for item in d.items:
                shape = self.index_shape(item, depth + 1)
                if shape is None or shape[0] + shape[1] != 1:
                    return None
                total[0] += shape[0]
                total[1] += shape[1]
            return total[0], total[1]
        if d.op == "call":
            return self._call_shape(d)
        if d.op == "getattr":
            return None if d.attr in ("shape", "strides") else (1, 0)
        if d.op in ("binop", "unary", "inplace_binop", "static_getitem", "getitem",
                    "pair_first"):
            return (1, 0)                               # arithmetic, an unpacked or loop scalar
        return None

    def _call_shape(self, d: ir.Expr) -> tuple[int, int] | None:
        target = self.resolve(d.func)
        if target is slice:
            return (0, 1)
        # Identity tests only: a global used as a callee may have an odd __eq__ (an array).
        if any(target is f for f in (int, len, min, max, abs, round)) or \
                getattr(target, "__module__", None) == "math":
            return (1, 0)
        name = target if isinstance(target, CudaPath) else cuda_path(target)
        if name in ("grid", "gridsize") and len(d.args) == 1:
            consts = {df.value for df in self.defs.get(d.args[0].name, ())
                      if isinstance(df, ir.Const)}
            if len(consts) == 1 and (n := consts.pop()) in (1, 2, 3):
                return (n, 0)                           # cuda.grid(2) is an (x, y) tuple
        return None

    @staticmethod
    def const_index_shape(value) -> tuple[int, int] | None:
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return (1, 0)
        if isinstance(value, slice):
            return (0, 1)
        if isinstance(value, tuple):
            shapes = [Defs.const_index_shape(v) for v in value]
            if any(s is None or s[0] + s[1] != 1 for s in shapes):
                return None
            return sum(s[0] for s in shapes), sum(s[1] for s in shapes)
        return None
