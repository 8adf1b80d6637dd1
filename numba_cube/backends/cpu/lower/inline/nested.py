"""Nested functions (closures) in kernels and device functions, as numba-cuda compiles them.

numba-cuda turns a ``def`` inside a jitted function into a function value: called where it is
defined, it is inlined (its free variables are the enclosing function's, read at the call);
passed to another function (``consumer(inner, x)``), it "escapes", and then every enclosing
variable it reads must be a compile-time constant (numba-cuda: "Cannot capture the non-constant
value"). The CPU translator does the same: ``define`` records the ``def`` (the statement itself
generates nothing), and ``expand`` inlines a call of it through ``inline.inline_call``, either
in the enclosing function (captures stay the enclosing function's variables) or inside a
function it was passed to (captures are bound as compile-time constants).

Refused with ``CompileError``: decorators, keyword-only and ``**`` parameters, non-constant
defaults, a capture that is not constant when the function escapes, and a nested function used
as a value other than a call or an argument of a call.
"""

from __future__ import annotations

import ast
import copy
from numba_cube.backends.cpu.frontend import constexpr
from numba_cube.backends.cpu.frontend.source import Resolved, SourceFunction
from numba_cube.backends.cpu.lower.inline.inliner import inline_call
from numba_cube.backends.cpu.lower.inline.bind import NestedFunction, bind


def define(lowerer, node: ast.FunctionDef) -> None:
    """Record the nested function ``node``; the ``def`` statement itself is removed."""
    what = f"nested function {node.name!r}"
    args = node.args
    if node.decorator_list:
        raise lowerer.fn.error(f"{what}: decorators are not supported by the CPU backend",
                               "decorated nested function", node)
    if args.kwarg or args.kwonlyargs or args.posonlyargs or args.kw_defaults:
        raise lowerer.fn.error(f"{what} may only have positional parameters and *args",
                               "*args/**kwargs/keyword-only parameters", node)
    defaults = []
    for d in args.defaults:
        try:
            defaults.append(constexpr.evaluate(lowerer.fn, d, lowerer.pristine))
        except constexpr.NotConstant:
            raise lowerer.fn.error(f"the defaults of {what} must be constants",
                                   "non-constant default", d) from None
    lowerer.nested[node.name] = NestedFunction(copy.deepcopy(node), lowerer, tuple(defaults))
    lowerer.fn.add_locals({node.name})


def _source(nf: NestedFunction) -> SourceFunction:
    enc = nf.enclosing.fn
    node = copy.deepcopy(nf.node)
    params = [a.arg for a in node.args.args]
    for a in node.args.args:
        a.annotation = None
    node.returns = None
    vararg = node.args.vararg.arg if node.args.vararg else None
    own = set(params) | {vararg} - {None} | {
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    own |= {n.name for n in ast.walk(node) if isinstance(n, ast.FunctionDef) and n is not node}
    return SourceFunction(enc.py_func, node, enc.filename, enc.line_offset, params, own,
                          vararg=vararg)


def expand(caller, nf: NestedFunction, call: ast.Call) -> ast.expr:
    """Inline a call of ``nf`` at ``call`` (in ``caller``, a ``Lowerer``)."""
    fn = _source(nf)
    enc = nf.enclosing
    what = f"nested function {nf.name!r}"
    free = {n.id for n in ast.walk(fn.node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)} - fn.local_names
    keep = set()
    for name in sorted(free):
        if name in enc.nested:
            fn.static[name] = Resolved(obj=enc.nested[name], root=name)
        elif name in enc.fn.static:
            fn.static[name] = enc.fn.static[name]
        elif name in enc.fn.local_names:
            if caller is enc:            # called where it is defined: the variable itself
                keep.add(name)
                continue
            use = ast.Name(name, ast.Load(), lineno=nf.node.lineno, col_offset=0)
            try:
                value = constexpr.evaluate(enc.fn, use, enc.pristine)
            except constexpr.NotConstant:
                raise caller.fn.error(
                    f"{what} is passed to another function and reads {name!r} of the enclosing "
                    "function, which is not a compile-time constant (numba-cuda refuses this "
                    "too: 'Cannot capture the non-constant value')",
                    "closure capturing a non-constant value", call) from None
            fn.static[name] = Resolved(obj=value, root=name)
    fn.local_names |= keep
    binding = bind(caller, fn, call, defaults=nf.defaults)
    return inline_call(caller, fn, binding, call, nf, what, frozenset(keep))
