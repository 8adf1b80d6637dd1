"""Calls, for the IO walk: what a call does to the arrays passed to it, and its result's alias.

The callee is a bound method of a tracked array (``a.reshape``), a numba.cuda builtin, a device
function (``cuda.jit(device=True)`` or ``njit``: analysed recursively, its summary mapped back
onto the caller's arguments), or another object looked up in ``io_rules``. An unknown callee
(an ``@intrinsic``, an ``@overload``-ed or ``register_jitable`` Python function, a foreign
function, ``cuda.declare_device``, a callee that cannot be resolved) claims no array, so the
walker's catch-all reports every array passed to it as unknown; ``escape`` does the same for the
elements passed to it, since an element of a record array is a reference into the array.
"""

from __future__ import annotations

import types as pytypes

from numba.core import ir

from .io_ir import ANY_NDIM, INDEX, TUPLE, UNRESOLVED, CudaPath, Ref
from .io_cuda import is_cuda_object
from .io_rules import METHOD_RULES, Rule, rule_for_cuda_path, rule_for_object

__all__ = ["CallsMixin"]

_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08


class CallsMixin:
    """The ``call`` expression handler of ``io_walk._Walker`` (uses its ``ref``, ``use``,
    ``defs`` and ``summarise``)."""

    def expr_call(self, e: ir.Expr) -> Ref | None:
        func = self.ref(e.func)
        if func is not None:
            if func.kind != "method":
                # x[i].conjugate() is a method of a number; a[i].field.fill(0) may write an
                # array field of a record: the record's array escapes.
                d = self.defs.defs.get(e.func.name, ())
                if func.kind != "elem" or any(not (isinstance(v, ir.Expr) and v.op == "getattr")
                                              or self._is_field(v.value) for v in d):
                    self.use(e.func, func, "?")
                return self.escape(e)
            self.use(e.func, func, "")
            base = Ref(func.params, "array", func.ndim)
            return self.apply(METHOD_RULES[func.method], [(None, base)] + self._refs(e.args), e)
        target = self.defs.resolve(e.func)
        if isinstance(target, CudaPath):
            return self.apply(rule_for_cuda_path(target), self._refs(e.args), e)
        if target is UNRESOLVED:
            return self.escape(e)
        if not is_cuda_object(target):
            py_func = getattr(target, "py_func", None)
            if isinstance(py_func, pytypes.FunctionType):
                return self.device_call(py_func, e)
        rule = rule_for_object(target)
        return self.escape(e) if rule is None else self.apply(rule, self._refs(e.args), e)

    def _refs(self, vars_) -> list:
        return [(var, self.ref(var)) for var in vars_]

    def escape(self, e: ir.Expr) -> None:
        """A call the analysis does not model: the elements passed to it escape (a record is a
        reference into its array); the arrays and tuples are left unclaimed, so that the
        walker's catch-all makes them unknown."""
        stack = list(e.args) + [var for _, var in e.kws] + [e.vararg] * (e.vararg is not None)
        seen: set[str] = set()
        while stack:
            var = stack.pop()
            if var.name in seen:
                continue
            seen.add(var.name)
            ref = self.ref(var)
            if ref is not None and ref.kind == "elem":
                self.use(var, ref, "?")
            # f((a[i], b)): elements in a tuple are not tracked (io_walk), so look inside it.
            for d in self.defs.defs.get(var.name, ()):
                if isinstance(d, ir.Var):
                    stack.append(d)
                elif isinstance(d, ir.Expr) and d.op == "build_tuple":
                    stack.extend(d.items)
        return None

    def apply(self, rule: Rule, positional: list, e: ir.Expr) -> Ref | None:
        for pos, (var, ref) in enumerate(positional):
            if ref is not None:
                self.use(var, ref, self._effect(var, ref, rule.effect(pos)))
        for name, var in e.kws:
            ref = self.ref(var)
            if ref is not None:
                self.use(var, ref, "w" if name == "out" else self._effect(var, ref, rule.default))
        first = positional[0][1] if positional else None
        if rule.view is None or first is None or first.kind != "array":
            return None
        if rule.view == "same":
            ndim = first.ndim
        elif rule.view == "one":
            ndim = 1
        elif rule.view == "reshape":
            ndim = self.reshape_ndim([var for var, _ in positional[1:]], e)
        else:
            ndim = None
        return Ref(first.params, "array", ndim)

    def _effect(self, var: ir.Var | None, ref: Ref, effect: str) -> str:
        # "?" is a position where the callee takes a value: an element there is that value,
        # unless it is a field of a record, which may be an array.
        if effect == "?" and ref.kind == "elem" and not self._is_field(var):
            return ""
        return effect

    def _is_field(self, var: ir.Var | None, depth: int = 0) -> bool:
        """Whether ``var`` may hold a field of a record (``a[i].x``, ``a[i]["x"]``): a getattr
        or a getitem on an element."""
        if var is None or depth > 8:
            return False
        for d in self.defs.defs.get(var.name, ()):
            if isinstance(d, ir.Var) and self._is_field(d, depth + 1):
                return True
            if isinstance(d, ir.Expr) and d.op in ("getattr", "getitem", "static_getitem"):
                base = self.ref(d.value)
                if base is not None and base.kind == "elem":
                    return True
        return False

    def reshape_ndim(self, shape_args: list, e: ir.Expr) -> int | None:
        kws = dict(e.kws)
        if not shape_args and ("shape" in kws or "newshape" in kws):
            shape_args = [kws.get("shape", kws.get("newshape"))]
        if len(shape_args) != 1:
            return len(shape_args) or None            # a.reshape(2, 3)
        defs = self.defs.defs.get(shape_args[0].name, ())
        if len(defs) == 1 and isinstance(defs[0], ir.Expr) and defs[0].op == "build_tuple":
            return len(defs[0].items)                 # a.reshape((m, n)), whatever m and n are
        shape = self.defs.index_shape(shape_args[0])
        return None if shape is None or shape[1] else shape[0]

    def device_call(self, py_func: pytypes.FunctionType, e: ir.Expr) -> Ref | None:
        """Map a device function's summary back onto the caller's arrays."""
        code = py_func.__code__
        if code.co_flags & (_CO_VARARGS | _CO_VARKEYWORDS) or code.co_kwonlyargcount:
            return self.escape(e)
        names = code.co_varnames[:code.co_argcount]
        slots: list[ir.Var | None] = [None] * len(names)
        if len(e.args) > len(names) or e.vararg is not None or e.varkwarg is not None:
            return self.escape(e)
        slots[:len(e.args)] = e.args
        for name, var in e.kws:
            if name not in names:
                return self.escape(e)
            slots[names.index(name)] = var
        ndims = []
        for var in slots:
            ref = self.ref(var)
            if ref is not None and ref.kind not in ("array", "elem"):
                return self.escape(e)                 # a tuple of arrays into a callee: escape
            if ref is not None and ref.kind == "array":
                if ref.ndim is None and any(self.ndims[p] == TUPLE for p in ref.params
                                            if p < len(self.ndims)):
                    # An item of a tuple parameter may be an int, an array or a tuple: the
                    # callee must not take it for an array (its m[k] could be a row).
                    ndims.append(TUPLE)
                else:
                    ndims.append(ANY_NDIM if ref.ndim is None else ref.ndim)
            else:       # tell the callee when a value is an integer: m[i] there is then exact
                ndims.append(INDEX if var is not None and self.defs.index_shape(var) == (1, 0)
                             else None)
        summary = self.summarise(py_func, tuple(ndims))
        if summary is None:                           # recursion or too deep: all unknown
            for var in slots:
                self.use(var, self.ref(var), "?")
            return None
        self.handled.add(e.func.name)
        params: frozenset[int] = frozenset()
        elems: frozenset[int] = frozenset()
        for k, var in enumerate(slots):
            ref = self.ref(var)
            if ref is None:
                continue
            effect = summary.effects[k]
            self.use(var, ref, "?" if effect is None else effect)
            if k in summary.returns and ref.kind == "array":
                params |= ref.params
            if k in summary.ret_elems:
                elems |= ref.params                   # an element of it, or the record itself
        if params and elems:
            return Ref(params | elems, "mixed")       # an array or an element: uses escape
        if params:
            return Ref(params, "array", summary.ret_ndim)
        return Ref(elems, "elem") if elems else None

