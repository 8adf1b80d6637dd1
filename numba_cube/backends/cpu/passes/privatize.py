"""Find the global arrays whose atomics may be privatized per chunk, and name their copies (the
chunk function that makes and merges them is printed by ``emit/privatized_chunk.py``). What a
"copy" is depends on the dtype, at run time: a zeroed private array for integers, an ordered log
of the adds for floats (``kernel_runtime/logged_atomics.py``); the proof below covers both.

Why this exists: a kernel that only ever *adds* into a global array through ``cuda.atomic.add``
(a histogram) spends its time in contended atomic instructions on the CPU. ``private_atomics``
holds the run-time side (the private copy, the update, the merge, and the run-time policy); this
module proves, on the lowered kernel body, which kernel parameters qualify, rewrites their
atomics, and prints the chunk function that allocates the copies and merges them.

A parameter ``a`` qualifies when every mention of it in the lowered kernel body is

- the array of an ``__atomic_add(a, idx, val)`` or ``__atomic_sub(a, idx, val)`` call that is a
  statement of its own (its result, the old value, is unused), or
- ``a.shape``, ``a.size`` or ``a.ndim`` (metadata, the same for the private copy),

and there is at least one such atomic. Anything else -- a plain read or write, another atomic
(``max``, ``inc``, ``cas`` ...), the atomic's result, passing ``a`` to a device function,
rebinding the name -- keeps today's atomic path for the whole array. Device functions are
separate functions in the generated module, so an atomic inside one is never rewritten.

The rewrite: ``__atomic_add(a, i, v)`` becomes ``__private_add(a, __priv_a, i, v)``, and
``__priv_a`` becomes an extra parameter of the chunk's body (``<kernel>__body``). The chunk
function the launchers call keeps its signature and does::

    def <kernel>__chunk(__c, __nchunks, <geometry>, <params>):
        __units = <the launch's units> // __nchunks
        __data = __array_bytes(p1) + __array_bytes(p2) + ...
        __priv_a = __private_copy(a, __units, __data, __nchunks,
                                  not (__may_alias(a, p1) or ...))
        <kernel>__body(__c, __nchunks, <geometry>, <params>, __priv_a)
        __merge_private(a, __priv_a)

Per chunk rather than per worker thread: a chunk runs on one thread from start to end, so its copy
needs no thread id (``numba.get_thread_id()`` would tie the generated module to the threading
layer and, like ``get_num_threads()``, make it uncacheable), and launches from several stream
threads at once cannot share a copy. The serial twin runs one chunk, so it privatizes too when the
policy allows. An exception in the body skips the merge: the launch has failed, and its writes
carry the failure (numba_cube/runtime/CONTRACT.md, section 4). Two privatized parameters may be
the same array: each merges its own adds, so only overlap with a *non*-privatized argument is checked.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from numba_cube.backends.cpu.passes import enabled
from numba_cube.backends.cpu.kernel_runtime.atomics import function_name
from numba_cube.backends.cpu.lower.lowering import Lowered

#: the atomics' helper names in generated code (``cuda_calls._atomic``) that privatize, and the
#: ``private_atomics`` functions that replace them. Only add and sub: inc/dec wrap at a bound (not
#: additive), max/min/and/or/xor could be privatized with their identity but no kernel needs them
#: yet, and exch/cas are order-dependent.
ADDITIVE = {"__" + function_name(op, atomic=True): f"private_{op}" for op in ("add", "sub")}
#: array attributes that are the same on the private copy
METADATA = frozenset({"shape", "size", "ndim"})
MODULE = "numba_cube.backends.cpu.kernel_runtime.private_atomics"
#: prefix of the private copies' names (the translator's own ``__`` namespace)
PREFIX = "__priv_"


@dataclass
class Privatized:
    """The outcome for one kernel: which parameters got private copies, under which names."""

    entry_params: list[str]            # the kernel's own parameters (the launchers' signature)
    copies: dict[str, str]             # parameter -> name of its private copy


def privatize(kernel: Lowered, env) -> Privatized | None:
    """Rewrite the qualifying parameters' atomics in ``kernel`` (in place) and append their
    private copies to ``kernel.params``; None (and nothing changed) when none qualifies."""
    if not enabled("privatize"):
        return None
    taken = {n.id for n in _walk(kernel.body) if isinstance(n, ast.Name)} | set(kernel.params)
    # a user name that happens to be a copy's name keeps its array on the atomic path
    names = [p for p in qualifying(kernel.body, kernel.params) if PREFIX + p not in taken]
    if not names:
        return None
    entry = list(kernel.params)
    copies = {p: PREFIX + p for p in names}
    for node in _walk(kernel.body):
        if isinstance(node, ast.Call) and _atomic_on(node, copies):
            helper = ADDITIVE[node.func.id]
            node.func = ast.Name(env.helper(MODULE, helper, "__" + helper), ast.Load())
            array = node.args[0].id
            node.args.insert(1, ast.Name(copies[array], ast.Load()))
    kernel.params.extend(copies.values())
    return Privatized(entry, copies)


def qualifying(body: list[ast.stmt], params: list[str]) -> list[str]:
    """The parameters every mention of which is an additive atomic statement or metadata."""
    parents = {}
    for node in _walk(body):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    ok = {p: False for p in params}           # False: no atomic seen yet; None: disqualified
    for node in _walk(body):
        if not (isinstance(node, ast.Name) and node.id in ok) or ok[node.id] is None:
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.Attribute) and parent.attr in METADATA \
                and isinstance(node.ctx, ast.Load):
            continue
        if (isinstance(parent, ast.Call) and parent.args and parent.args[0] is node
                and isinstance(parent.func, ast.Name) and parent.func.id in ADDITIVE
                and len(parent.args) == 3 and not parent.keywords
                and isinstance(parents.get(parent), ast.Expr)):
            ok[node.id] = True
            continue
        ok[node.id] = None
    return [p for p in params if ok[p]]


def _atomic_on(call: ast.Call, copies: dict[str, str]) -> bool:
    return (isinstance(call.func, ast.Name) and call.func.id in ADDITIVE and call.args
            and isinstance(call.args[0], ast.Name) and call.args[0].id in copies)


def _walk(body: list[ast.stmt]):
    for stmt in body:
        yield from ast.walk(stmt)
