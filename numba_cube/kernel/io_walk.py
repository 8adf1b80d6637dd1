"""The IR walk of the IO analysis: aliases of array parameters, then their reads and writes.

Input: the untyped Numba IR of one function (``run_frontend``) and, per parameter, the ndim of
the array passed there, ``ANY_NDIM`` for an array of unknown ndim, ``INDEX`` for an integer
(known only where a caller passes one to a device function: a kernel's scalar parameter could
also be a tuple, which matters when it indexes a 2-D array), or None for any other value.

Two passes over the statements, both flow-insensitive:

1. **Aliases.** A fixpoint computes, for every variable that may hold (a view of) a parameter,
   a ``Ref``: which parameters, and what the variable is (an array view with its ndim, a tuple
   holding such arrays, an iterator over one, or a bound array method). Since the IR names a
   variable once for all its definitions, a variable assigned in two branches gets the union,
   which is what a join needs. The ndim is what makes ``row = m[i]`` (a view: a later
   ``row[j] = 1`` writes ``m``) differ from ``t = m[i, j]`` (an element: ``t += 1`` writes
   nothing).
2. **Effects.** Each statement's uses of tracked variables are classified as read, write, both,
   or nothing (metadata, making a view). Every use a handler does not claim is an *escape*: the
   parameters behind it become unknown. That default is the point of the design: a construct
   nobody thought of ends as "unknown", never as a silently missed write.
"""

from __future__ import annotations

import numpy as np
from numba.core import ir

from .io_calls import CallsMixin
from .io_ir import ANY_NDIM, INDEX, TUPLE, Defs, Ref, Summarise, Summary
from .io_rules import META_ATTRS, METHOD_RULES, VIEW_ATTRS

__all__ = ["walk"]

_MAX_PASSES = 64       # the alias lattice is finite; this only guards against a bug


def walk(fir: ir.FunctionIR, ndims: tuple, summarise: Summarise) -> Summary:
    """The summary of one function: ``ndims`` per parameter (see the module docstring);
    ``summarise`` analyses a device function it calls (``io_analysis`` passes its cache)."""
    return _Walker(fir, ndims, summarise).run()


class _Walker(CallsMixin):
    """One analysis of one function. The ``expr_<op>`` methods evaluate an IR expression to
    the ``Ref`` of its value and claim, through ``use``, the tracked variables it touches; the
    same code serves both passes (``recording`` is off during the alias fixpoint)."""

    def __init__(self, fir: ir.FunctionIR, ndims: tuple, summarise: Summarise):
        self.ndims = ndims
        self.summarise = summarise
        self.defs = Defs(fir, ndims)
        self.refs: dict[str, Ref] = {}
        self.read: set[int] = set()
        self.write: set[int] = set()
        self.unknown: set[int] = set()
        self.returned: Ref | None = None
        self.returned_elems: set[int] = set()   # parameters an element of which is returned
        self.recording = False          # False in the alias pass: effects are only collected
        self.handled: set[str] = set()  # tracked names claimed by the current statement

    # -- driver ---------------------------------------------------------------------------

    def run(self) -> Summary:
        assigns = [st for st in self.defs.stmts if isinstance(st, ir.Assign)]
        for _ in range(_MAX_PASSES):
            changed = False
            for st in assigns:
                ref = self.eval(st.value)
                if ref is None:
                    continue
                old = self.refs.get(st.target.name)
                new = ref if old is None else old.merge(ref)
                if new != old:
                    self.refs[st.target.name] = new
                    changed = True
            if not changed:
                break
        else:
            raise RuntimeError("alias fixpoint did not converge")

        self.recording = True
        for st in self.defs.stmts:
            self.handled = set()
            self.statement(st)
            target = st.target.name if isinstance(st, ir.Assign) else None
            for var in st.list_vars():
                ref = self.refs.get(var.name)
                if ref is None or ref.kind == "elem" or var.name in self.handled \
                        or var.name == target:
                    continue
                self.unknown |= ref.params                  # an unclaimed use escapes

        effects = tuple(None if k in self.unknown
                        else ("r" if k in self.read else "") + ("w" if k in self.write else "")
                        for k in range(len(self.ndims)))
        ret = self.returned
        return Summary(effects, ret.params if ret else frozenset(), ret.ndim if ret else None,
                       frozenset(self.returned_elems))

    def use(self, var: ir.Var | None, ref: Ref | None, effect: str) -> None:
        """Claim a use of ``var`` (holding ``ref``) with effect "", "r", "w", "rw" or "?"."""
        if var is not None:
            self.handled.add(var.name)
        if ref is None or not self.recording or effect == "":
            return
        if effect == "?" or ref.kind not in ("array", "tuple", "elem") or (
                ref.kind == "tuple" and "w" in effect):
            self.unknown |= ref.params        # only arrays can be written; a tuple may be read
            return
        if "r" in effect:
            self.read |= ref.params
        if "w" in effect:
            self.write |= ref.params

    def ref(self, var: ir.Var | None) -> Ref | None:
        return None if var is None else self.refs.get(var.name)

    # -- statements -----------------------------------------------------------------------

    def statement(self, st: ir.Stmt) -> None:
        if isinstance(st, ir.Assign):
            self.eval(st.value)
        elif isinstance(st, (ir.SetItem, ir.StaticSetItem)):
            target = self.ref(st.target)
            if target is not None and target.kind in ("array", "elem"):
                self.use(st.target, target, "w")   # elem: a record's array field
            index = st.index if isinstance(st, ir.SetItem) else st.index_var
            self.use_index(index)
            value = self.ref(st.value)
            if value is not None and value.kind == "array":
                self.use(st.value, value, "r")          # out[:] = a copies a
        elif isinstance(st, ir.SetAttr):
            # a[i].x = v: a field of a record. An "array" here is an a[i] of unknown rank.
            target = self.ref(st.target)
            if target is not None and target.kind in ("array", "elem"):
                self.use(st.target, target, "w")
            value = self.ref(st.value)
            if value is not None and value.kind == "array":
                self.use(st.value, value, "r")          # r.arr = a copies a
        elif isinstance(st, ir.Return):
            value = self.ref(st.value)
            if value is not None and value.kind == "array":
                self.use(st.value, value, "")
                self.returned = value if self.returned is None else self.returned.merge(value)
            elif value is not None and value.kind == "elem":
                # An element may be a record: the caller's r.x = 1 on it writes the array.
                self.returned_elems |= value.params
        elif isinstance(st, ir.Branch):
            self.use(st.cond, self.ref(st.cond), "r")
        elif isinstance(st, ir.Print):
            for var in st.args:
                self.use(var, self.ref(var), "r")

    # -- expressions: return the Ref of the value (or None), claiming the uses they make ----

    def eval(self, value) -> Ref | None:
        if isinstance(value, ir.Arg):
            nd = self.ndims[value.index] if value.index < len(self.ndims) else None
            if nd is None or nd == INDEX:
                return Ref(frozenset({value.index}), "elem")   # a scalar, or a record
            if nd == TUPLE:
                # t[k] is then an array of unknown rank (or a nested tuple, which the same
                # rules treat as one): t[0][i] = v writes it, any other use escapes.
                return Ref(frozenset({value.index}), "tuple", None)
            return Ref(frozenset({value.index}), "array", None if nd == ANY_NDIM else nd)
        if isinstance(value, ir.Var):
            ref = self.ref(value)
            self.use(value, ref, "")
            return ref
        if isinstance(value, ir.Expr):
            handler = getattr(self, "expr_" + value.op, None)
            return handler(value) if handler is not None else None
        return None

    def expr_cast(self, e: ir.Expr) -> Ref | None:
        return self.eval(e.value)

    def expr_getitem(self, e: ir.Expr) -> Ref | None:
        base = self.ref(e.value)
        index_var = e.index if e.op == "getitem" else e.index_var
        fancy = self.use_index(index_var)
        if base is None:
            return None
        if base.kind == "elem":
            self.use(e.value, base, "")             # a field of a record, still its array's
            return base
        if base.kind == "tuple":
            self.use(e.value, base, "")
            static = e.index if e.op == "static_getitem" else None
            return base if isinstance(static, slice) else Ref(base.params, "array", base.ndim)
        if base.kind != "array":
            return None
        if fancy:                                   # a[idx_array]: a copy of the selection
            self.use(e.value, base, "r")
            return None
        shape = (Defs.const_index_shape(e.index) if e.op == "static_getitem"
                 else self.defs.index_shape(e.index))
        if base.ndim is None or shape is None:
            self.use(e.value, base, "r")            # element or view: count both
            return Ref(base.params, "array", None)
        n_int, n_slice = shape
        if n_slice or n_int < base.ndim:
            self.use(e.value, base, "")             # making a view reads nothing
            return Ref(base.params, "array", base.ndim - n_int)
        self.use(e.value, base, "r")
        return Ref(base.params, "elem")

    expr_static_getitem = expr_getitem

    def use_index(self, index: ir.Var | None) -> bool:
        """Claim an index variable; an array (or tuple of arrays) used as an index is read."""
        ref = self.ref(index)
        if ref is None or ref.kind == "elem":       # m[idx[i]]: a scalar index
            self.use(index, ref, "")
            return False
        self.use(index, ref, "r")
        # What comes out of a tuple parameter may be ints as well as arrays: m[t] or m[t[0]] may
        # be a view (a row), not a copy, so it is not fancy indexing; the caller then treats
        # the index as one of unknown shape (element or view: both counted).
        return not any(self.ndims[p] == TUPLE for p in ref.params if p < len(self.ndims))

    def expr_getattr(self, e: ir.Expr) -> Ref | None:
        base = self.ref(e.value)
        if base is not None and base.kind == "elem":
            self.use(e.value, base, "")
            return base                              # rec.x: a field, maybe an array field
        if base is None or base.kind != "array":
            return None
        if e.attr in META_ATTRS:
            self.use(e.value, base, "")
            return None
        if e.attr in VIEW_ATTRS:
            self.use(e.value, base, "")
            return Ref(base.params, "array", 1 if VIEW_ATTRS[e.attr] == "one" else base.ndim)
        if e.attr in METHOD_RULES:
            self.use(e.value, base, "")
            return Ref(base.params, "method", base.ndim, e.attr)
        if not hasattr(np.ndarray, e.attr):
            # Not an ndarray attribute, so a field of a record array: a view of the same data.
            self.use(e.value, base, "")
            return Ref(base.params, "array", None)
        return None                                  # ctypes, base, byteswap...: escapes

    def expr_binop(self, e: ir.Expr) -> Ref | None:
        for var in (e.lhs, e.rhs):                   # an array expression reads its operands
            ref = self.ref(var)
            if ref is not None and ref.kind == "array":
                self.use(var, ref, "r")
        return None

    def expr_unary(self, e: ir.Expr) -> Ref | None:
        ref = self.ref(e.value)
        if ref is not None and ref.kind == "array":
            self.use(e.value, ref, "r")
        return None

    def expr_inplace_binop(self, e: ir.Expr) -> Ref | None:
        rhs = self.ref(e.rhs)
        if rhs is not None and rhs.kind == "array":
            self.use(e.rhs, rhs, "r")
        lhs = self.ref(e.lhs)
        if lhs is None or lhs.kind != "array":
            return None
        self.use(e.lhs, lhs, "rw")                   # a += 1 on an array updates it in place
        return lhs

    def expr_build_tuple(self, e: ir.Expr) -> Ref | None:
        refs = [(var, self.ref(var)) for var in e.items]
        # Elements in a tuple are values (indices, mostly): not followed.
        tracked = [(var, ref) for var, ref in refs if ref is not None and ref.kind != "elem"]
        if not tracked:
            return None
        for var, ref in tracked:
            self.use(var, ref, "")
        merged = tracked[0][1]
        for _, ref in tracked[1:]:
            merged = merged.merge(ref)
        kind = "tuple" if merged.kind == "array" else "mixed"
        return Ref(merged.params, kind, merged.ndim)

    expr_build_list = expr_build_set = expr_build_tuple

    def expr_exhaust_iter(self, e: ir.Expr) -> Ref | None:
        ref = self.ref(e.value)
        if ref is None:
            return None
        if ref.kind == "tuple":
            self.use(e.value, ref, "")
            return ref
        return self._elements(e.value, ref, "tuple")  # x, y = a: unpacks a's rows

    def expr_getiter(self, e: ir.Expr) -> Ref | None:
        ref = self.ref(e.value)
        if ref is None:
            return None
        if ref.kind == "tuple":
            self.use(e.value, ref, "")
            return Ref(ref.params, "iter", ref.ndim)
        return self._elements(e.value, ref, "iter")

    def _elements(self, var: ir.Var, ref: Ref, kind: str) -> Ref | None:
        """Iterating or unpacking an array: its elements are scalars (a read) for 1-D, row
        views (no read) for more dimensions."""
        if ref.kind != "array":
            return None
        if ref.ndim is not None and ref.ndim <= 1:
            self.use(var, ref, "r")
            return None
        self.use(var, ref, "r" if ref.ndim is None else "")
        return Ref(ref.params, kind, None if ref.ndim is None else ref.ndim - 1)

    def expr_iternext(self, e: ir.Expr) -> Ref | None:
        ref = self.ref(e.value)
        if ref is None or ref.kind != "iter":
            return None
        self.use(e.value, ref, "")
        return ref

    def expr_pair_first(self, e: ir.Expr) -> Ref | None:
        ref = self.ref(e.value)
        if ref is None or ref.kind != "iter":
            return None
        self.use(e.value, ref, "")
        return Ref(ref.params, "array", ref.ndim)

    def expr_pair_second(self, e: ir.Expr) -> Ref | None:
        ref = self.ref(e.value)
        if ref is not None and ref.kind == "iter":
            self.use(e.value, ref, "")
        return None

