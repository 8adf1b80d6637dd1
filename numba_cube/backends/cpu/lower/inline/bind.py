"""How a call binds an inlined function's parameters (``lower/inline/inliner.py``).

Each argument is either a *compile-time value* -- a literal or constant expression, a CUDA
builtin such as ``cuda.atomic.add``, a device function, a dtype or other type, a nested function
(``lower/inline/nested.py``) -- which the callee's copy resolves like a closure variable, or a run-time
value, evaluated once by the caller into the callee's (renamed) parameter. Defaults are
constants. A ``*args`` parameter receives a run-time tuple of the extra arguments, whose length
is known (``Binding.packed``), so ``f(*args)`` and ``len(args)`` can be resolved at compile time.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import numpy as np

from numba_cube.backends.cpu.frontend import constexpr
from numba_cube.backends.cpu.frontend import resolve as rs
from numba_cube.backends.cpu.frontend.source import Resolved, SourceFunction, chain, resolve


@dataclass(eq=False)
class NestedFunction:
    """A ``def`` statement seen while lowering ``enclosing`` (a ``Lowerer``); a compile-time
    value when passed as an argument (``lower/inline/nested.py`` inlines its calls)."""

    node: ast.FunctionDef            # as written, before any lowering
    enclosing: object
    defaults: tuple                  # evaluated at the definition, as Python does

    @property
    def name(self) -> str:
        return self.node.name


@dataclass
class Binding:
    """How one call binds the callee's parameters."""

    static: dict[str, Resolved]                 # compile-time values
    runtime: list[tuple[str, ast.expr]]          # (parameter, caller's expression), in order
    packed: dict[str, int] = field(default_factory=dict)   # *args parameter -> its length
    #: parameters whose expression is already in generated form (a default's frozen literal)
    prelowered: set[str] = field(default_factory=set)


def stored_names(fn: SourceFunction) -> set[str]:
    return {n.id for n in ast.walk(fn.node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)}


def _is_compile_time_object(obj) -> bool:
    """Objects that numba-cuda passes as compile-time values (functions, types, dtypes)."""
    return (isinstance(obj, (NestedFunction, np.dtype)) or rs.device_kind(obj) is not None
            or rs.numpy_scalar_name(obj) is not None or callable(obj))


def static_value(caller, expr: ast.expr) -> Resolved | None:
    """The compile-time value of a call argument in the caller's scope, or None (run time)."""
    if isinstance(expr, ast.Name) and expr.id in caller.nested:
        return Resolved(obj=caller.nested[expr.id], root=expr.id)
    if chain(expr) is not None:
        r = resolve(caller.fn, expr)
        if r is not None:
            if r.cuda_path is not None:
                return Resolved(cuda_path=r.cuda_path, root=r.root)
            if r.rest or isinstance(r.obj, np.ndarray):
                return None                    # e.g. W.shape, a global array: run-time values
            if constexpr.is_constant_value(r.obj) or _is_compile_time_object(r.obj):
                return Resolved(obj=r.obj, root=r.root)
            return None
    try:
        return Resolved(obj=constexpr.evaluate(caller.fn, expr, caller.pristine))
    except constexpr.NotConstant:
        return None


def bind(caller, callee: SourceFunction, call: ast.Call, defaults=None) -> Binding:
    """Match the call's arguments to the callee's parameters (``defaults``: the callee's
    default values, ``__defaults__`` when None)."""
    def refuse(why, construct):
        return caller.fn.error(f"call of {callee.name!r}: {why}", construct, call)

    args = _unpacked(caller, call, refuse)
    if any(k.arg is None for k in call.keywords):
        raise refuse("**kwargs at the call are not supported by the CPU backend",
                     "**kwargs in a device function call")
    params = callee.params
    if len(args) > len(params) and callee.vararg is None:
        raise refuse(f"{len(args)} arguments for {len(params)} parameters",
                     "too many arguments")
    given = list(zip(params, args))
    for k in call.keywords:
        if k.arg not in params or k.arg in dict(given):
            raise refuse(f"unexpected or repeated keyword argument {k.arg!r}",
                         f"keyword argument {k.arg!r}")
        given.append((k.arg, k.value))
    if defaults is None:
        defaults = callee.py_func.__defaults__ or ()
    first_default = len(params) - len(defaults)
    stored = stored_names(callee)
    static, runtime = {}, []
    bound = dict(given)
    for i, p in enumerate(params):
        if p not in bound:
            if i < first_default:
                raise refuse(f"missing argument {p!r}", "missing argument")
            value = defaults[i - first_default]
            if not constexpr.is_constant_value(value):
                raise refuse(f"the default of parameter {p!r} must be a constant",
                             "non-constant default")
            static[p] = Resolved(obj=value, root=p)
    for p, expr in given:
        value = static_value(caller, expr)
        if value is not None and p not in stored:
            static[p] = value
        elif value is not None and (value.cuda_path is not None
                                    or not constexpr.is_constant_value(value.obj)):
            raise refuse(f"parameter {p!r} receives a compile-time object and is reassigned in "
                         "the function; use another variable", f"reassigned parameter {p!r}")
        else:
            runtime.append((p, expr))
    prelowered = set()
    for p in [p for p in static if p in stored]:     # a reassigned parameter is a variable
        runtime.append((p, rs.literal(static.pop(p).obj)))
        prelowered.add(p)
    packed = {}
    if callee.vararg is not None:
        extra = args[len(params):]
        for e in extra:
            value = static_value(caller, e)
            if value is not None and (value.cuda_path is not None
                                      or not constexpr.is_constant_value(value.obj)):
                raise refuse(f"a compile-time object ({ast.unparse(e)}) cannot be part of "
                             f"*{callee.vararg} on the CPU backend",
                             "compile-time object in *args")
        runtime.append((callee.vararg, ast.copy_location(ast.Tuple(list(extra), ast.Load()),
                                                         call)))
        packed[callee.vararg] = len(extra)
    return Binding(static, runtime, packed, prelowered)


def _unpacked(caller, call: ast.Call, refuse) -> list[ast.expr]:
    """The call's positional arguments, ``*args`` of a known length spelled out."""
    out = []
    for a in call.args:
        if not isinstance(a, ast.Starred):
            out.append(a)
        elif isinstance(a.value, ast.Name) and a.value.id in caller.packed:
            out += [ast.copy_location(ast.Subscript(ast.Name(a.value.id, ast.Load()),
                                                    ast.Constant(i), ast.Load()), a)
                    for i in range(caller.packed[a.value.id])]
        else:
            raise refuse("*args at the call are only supported for a *args parameter of the "
                         "calling (inlined) function", "*args in a device function call")
    return out
