"""Inlining device functions into their caller, the way numba-cuda types them.

numba-cuda compiles a device function as part of the kernel's typing, for the types (and literal
values) of one call: a device function may therefore declare ``cuda.shared.array``, call
``cuda.syncthreads()``, and take parameters whose values are known at compile time -- a function
(``cuda.atomic.add``, another device function), a dtype (``uint32``), a shape (``32``,
``(4, 8)``), a flag. The CPU translator normally gives each device function a function of its
own (``<name>__dev``); a call is *inlined* instead when

- the callee (or a device function it calls, transitively) uses shared memory or a barrier: the
  barrier has to split the kernel's unit loop, and the shared array belongs to the cube;
- or an argument is a compile-time object that is no run-time value (a function, a dtype);
- or a constant argument is used as an array shape in the callee;
- or the caller passes one of its shared arrays to a parameter the callee both stores into
  and reads at another index: units may exchange values through it without a barrier (a
  warp-synchronous reduction's ``warp_reduce(sdata, tid)``), and ``passes/lockstep/schedule.py`` must see those
  statements to keep the GPU's order.

``expand`` does it: compile-time arguments are bound as *static* names of a fresh copy of the
callee (``SourceFunction.with_static``: they resolve like closure variables), run-time arguments
are evaluated once into the callee's renamed parameters (or aliased, for plain names), the callee
is lowered for that binding by a child ``Lowerer``, its returns become assignments to a result
variable (``lower/inline/body.py``), and the statements are hoisted before the caller's statement, whose
call becomes the result variable.

Shared arrays follow numba-cuda, which creates one array per declaration in each compiled
version of a device function (a version per argument types, literal values included): calls
with the same compile-time arguments share one array per cube (as CUDA's ``__shared__`` in a
device function is one array per block); calls that bind different compile-time values
(another dtype, shape or literal) get arrays of their own. (One difference remains: two calls
with the same compile-time arguments but run-time arguments of different types are two
versions to numba-cuda, one array here; only a program that reads a shared array left by a
previous call of another version can tell.)

A ``cuda.jit`` kernel called from a kernel is a device function, as in numba-cuda. A ``*args``
parameter is supported in inlined functions (``lower/inline/bind.py``), nested ``def`` s in any function
(``lower/inline/nested.py``).

Refused with ``CompileError``: recursion through inlined functions, ``return`` inside a loop of
an inlined function, an inlined call evaluated lazily (in ``and``/``or``, ``x if c else y``, a
chained comparison, a ``while`` condition, a comprehension) or after another device-function or
atomic call of the same statement (``lower/inline/hooks.py``), ``**kwargs`` at the call, a compile-time
object bound to a parameter that the callee reassigns, and an inlined device function declared
with signatures (numba-cuda would convert the arguments).
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass, field

from numba_cube.backends.cpu.frontend import constexpr
from numba_cube.backends.cpu.lower.inline import body as ib
from numba_cube.backends.cpu.frontend import resolve as rs
from numba_cube.backends.cpu.lower.inline.bind import Binding, bind, stored_names
from numba_cube.backends.cpu.frontend.source import (
    RESERVED, Resolved, SourceFunction, chain, load_function, resolve,
)
from numba_cube.errors import CompileError
from numba_cube.kernel.signatures import declared_signatures

#: CUDA builtins that force the calling device function to be inlined
_CUBE_LEVEL = frozenset({"shared.array", "syncthreads", "syncwarp", "syncthreads_count",
                         "syncthreads_and", "syncthreads_or"})
_ARRAY_DECLS = frozenset({"shared.array", "local.array"})


@dataclass
class InlineState:
    """What the inlining of one generated function shares across its call sites."""

    count: int = 0                                              # inlined calls so far
    shared_names: dict[tuple, str] = field(default_factory=dict)  # sharing key -> array name
    sources: dict[int, SourceFunction] = field(default_factory=dict)
    cube_level: dict[int, str | None] = field(default_factory=dict)
    stack: list = field(default_factory=list)                   # py_funcs being inlined

    def source(self, py_func) -> SourceFunction:
        key = id(py_func)
        if key not in self.sources:
            self.sources[key] = load_function(py_func, "device function", allow_vararg=True)
        return self.sources[key]


def _shape_params(callee: SourceFunction) -> set[str]:
    """Parameters mentioned in a cuda.shared/local.array call of the callee."""
    names = set()
    for n in ast.walk(callee.node):
        if isinstance(n, ast.Call) and _cuda_path(callee, n.func) in _ARRAY_DECLS:
            names |= {m.id for a in n.args + [k.value for k in n.keywords]
                      for m in ast.walk(a) if isinstance(m, ast.Name)}
    return names & set(callee.params)


def _cuda_path(fn: SourceFunction, func: ast.expr) -> str | None:
    if chain(func) is None:
        return None
    try:
        r = resolve(fn, func)
    except CompileError:          # an undefined name: lowering reports it where it is
        return None
    return r.cuda_path if r is not None else None


def cube_level_use(state: InlineState, fn: SourceFunction, visiting=()) -> str | None:
    """What in ``fn`` (or a device function it calls) needs the cube: shared memory, a barrier."""
    key = id(fn.py_func)
    if not fn.static and key in state.cube_level:
        return state.cube_level[key]
    found = None
    for n in ast.walk(fn.node):
        if not isinstance(n, ast.Call) or chain(n.func) is None:
            continue
        try:
            r = resolve(fn, n.func)
        except CompileError:
            continue
        if r is None:
            continue
        if r.cuda_path in _CUBE_LEVEL:
            found = f"cuda.{r.cuda_path}"
        elif (r.cuda_path is None and not r.rest and rs.device_kind(r.obj) in ("device", "kernel")
              and id(r.obj.py_func) not in visiting and id(r.obj.py_func) != key):
            inner = cube_level_use(state, state.source(r.obj.py_func), (*visiting, key))
            if inner is not None:
                found = f"{inner} in {r.obj.py_func.__name__!r}"
        if found:
            break
    if not fn.static:
        state.cube_level[key] = found
    return found


def inline_reason(state: InlineState, callee: SourceFunction, binding: Binding,
                  owned: frozenset = frozenset()) -> str | None:
    """Why this call must be inlined, or None for an ordinary ``<name>__dev`` call.
    ``owned``: the caller's shared (and local) array names."""
    for p, value in binding.static.items():
        if value.cuda_path is not None or not constexpr.is_constant_value(value.obj):
            return f"its argument {p!r} is a compile-time object"
    shapes = _shape_params(callee) & set(binding.static)
    if shapes:
        return f"its argument {sorted(shapes)[0]!r} is an array shape"
    for p, expr in binding.runtime:
        if isinstance(expr, ast.Name) and expr.id in owned and _exchanges_through(callee, p):
            return (f"it stores into the shared array passed as {p!r} and reads it at another "
                    "index (units may exchange values there: passes/lockstep/schedule.py must see it)")
    use = cube_level_use(state, callee)
    return None if use is None else f"it uses {use}"


def _exchanges_through(callee: SourceFunction, param: str) -> bool:
    """Does ``callee`` store into ``param[...]`` and load ``param[...]`` at another index?"""
    stores, loads = set(), set()
    for n in ast.walk(callee.node):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) \
                and n.value.id == param:
            (stores if isinstance(n.ctx, ast.Store) else loads).add(ast.dump(n.slice))
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Subscript) \
                and isinstance(n.target.value, ast.Name) and n.target.value.id == param:
            loads.add(ast.dump(n.target.slice))
    return bool(stores) and bool(loads - stores or len(stores) > 1)


def expand(caller, obj, call: ast.Call) -> ast.expr | None:
    """Inline ``call`` (of device function ``obj``) into ``caller`` (a ``Lowerer``) when it must
    be; returns the expression that replaces the call, or None to call ``<name>__dev``."""
    state = caller.inlining
    callee = state.source(obj.py_func)
    starred = any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords)
    if starred and callee.vararg is None and cube_level_use(state, callee) is None:
        return None          # an ordinary call f(*t): Numba types it, as before
    binding = bind(caller, callee, call)
    reason = inline_reason(state, callee, binding, frozenset(caller.owned))
    if reason is None:
        if callee.vararg is not None:
            raise caller.fn.error(f"device function {callee.name!r} has a *{callee.vararg} "
                                  "parameter, which the CPU backend supports only in inlined "
                                  "functions (those taking compile-time arguments such as "
                                  "functions)", "*args/**kwargs/keyword-only parameters", call)
        return None
    what = f"device function {callee.name!r}, which the CPU backend inlines because {reason}"
    declared = declared_signatures(obj)
    if declared is not None and not declared.converts_nothing():
        raise caller.fn.error(f"{what}, was declared with signatures, whose argument conversions "
                              "the CPU backend does not reproduce; declare it without signatures",
                              "inlined device function with declared signatures", call)
    return inline_call(caller, callee, binding, call, obj.py_func, what)


def inline_call(caller, callee: SourceFunction, binding: Binding, call: ast.Call, key,
                what: str, keep: frozenset = frozenset()) -> ast.expr:
    """Inline ``callee`` bound by ``binding`` at ``call``. ``key`` identifies the function for
    the recursion check; names in ``keep`` are the caller's own variables (a nested function's
    captures) and are not renamed."""
    state = caller.inlining
    if any(k is key for k in state.stack):
        raise caller.fn.error(f"recursive call of {what}", "recursive inlined device function",
                              call)
    caller.check_hoistable(call, what)
    state.count += 1
    k = state.count
    stored = stored_names(callee)
    rename, prelude, owned = {}, [], set()
    for p, expr in binding.runtime:
        lowered = expr if p in binding.prelowered else caller.visit(expr)
        if isinstance(lowered, ast.Name) and p not in stored:
            rename[p] = lowered.id              # a plain name: no copy needed
            if lowered.id in caller.owned:
                owned.add(p)
        else:
            rename[p] = f"{p}__i{k}"
            prelude.append(ast.Assign([ast.Name(rename[p], ast.Store())], lowered))
    instance = callee.with_static({**callee.static, **binding.static})
    state.stack.append(key)
    try:
        low = caller.spawn(instance, owned, binding.packed).run()
    finally:
        state.stack.pop()
    return _splice(caller, instance, low, binding, rename, prelude, call, k, what, keep)


def _splice(caller, fn, low, binding, rename, prelude, call, k, what, keep) -> ast.expr:
    """Paste the lowered callee into the caller: returns, names, shared arrays, positions."""
    bad = ib.return_in_loop(low.body)
    if bad is not None:
        raise fn.error(f"'return' inside a loop of {what}: set a flag and 'break' instead",
                       "return inside a loop of an inlined device function", bad)
    result = None if caller.result_discarded(call) else f"{fn.node.name}__rv{k}"
    body = ib.prune_constant_branches(low.body)     # e.g. `if len(args) == 1:`
    body = ib.tail_returns_to_assign(ib.returns_to_tail(body), result)
    key_static = tuple(sorted((p, _identity(v)) for p, v in binding.static.items()))
    shared_names = caller.inlining.shared_names
    for decl in low.shared:
        if decl.name in shared_names.values():
            # named already by the inlining of a device function that ``fn`` calls: the same
            # array wherever that function is inlined (directly by this caller too)
            name = decl.name
        else:
            key = (id(fn.py_func), decl.node.lineno, decl.name, key_static)
            name = shared_names.setdefault(key, f"{decl.name}__s{len(shared_names) + 1}")
        if all(d.name != name for d in caller.out.shared):
            caller.out.shared.append(dataclasses.replace(decl, name=name))
        rename[decl.name] = name
        ib.relocate([decl.node], call)
    for name in fn.local_names:
        # temporaries of other passes are numbered per generated function already
        if RESERVED not in name and name not in keep:
            rename.setdefault(name, f"{name}__i{k}")
    for decl in low.local:
        caller.out.local.append(dataclasses.replace(decl, name=rename[decl.name]))
    renamer = ib.Renamer(rename)
    body = [renamer.visit(s) for s in body]
    statements = prelude + body
    ib.relocate(statements, call)
    # calls of <name>__dev functions inside the body get their hidden ids later (codegen);
    # found by name, since moving returns may have copied some of them
    callees = {node.func.id: callee for node, callee in low.device_calls}
    caller.out.device_calls += [(n, callees[n.func.id]) for s in statements for n in ast.walk(s)
                                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                                and n.func.id in callees]
    caller.root.fn.add_locals(set(rename.values()) | ({result} if result else set())
                              | {n for n in fn.local_names if RESERVED in n})
    caller.hoist(statements, call)
    if result is None:           # the statement `f(...)`: nothing is left of it
        return ast.copy_location(ast.Constant(None), call)
    return ast.copy_location(ast.Name(result, ast.Load()), call)


def _identity(value: Resolved):
    """What makes two compile-time arguments the same for numba-cuda's compiled versions."""
    if value.cuda_path is not None:
        return ("cuda", value.cuda_path)
    if constexpr.is_constant_value(value.obj):
        return ("value", type(value.obj).__name__, repr(value.obj))
    return ("object", id(value.obj))
