"""Lowering: numba.cuda builtins -> plain Python over hidden names.

One ``Lowerer`` pass per function (kernel or device function) rewrites the parsed body so that it
no longer mentions the CUDA module. This module does the traversal, name resolution and
statements; ``lower/cuda_calls.py`` (a mixin) knows what each CUDA builtin becomes:

====================================  =========================================================
CUDA                                  lowered
====================================  =========================================================
``threadIdx.x`` / ``.y`` / ``.z``     ``__tx`` / ``__ty`` / ``__tz`` (the unit loop variables)
``blockIdx``, ``blockDim``,           ``__bx..``, ``__bdx..``, ``__gdx..`` (cube index; launch
``gridDim`` ``.x/.y/.z``              geometry, parameters of the generated kernel)
``grid(n)``, ``gridsize(n)``          ``__nn(__bx * __bdx + __tx)``, ... (tuples for n = 2, 3)
``warpsize``, ``laneid``              ``32``, ``(__tid % 32)``
``syncthreads()``                     the barrier marker statement ``__syncthreads()``
``x = syncthreads_count(p)``          ``__sacc1 = 0; __sacc1 += (1 if p else 0); <barrier>;
(and ``_and``, ``_or``; inside an     x = __sacc1`` (cube-level counters, so ``x`` is uniform;
expression: hoisted first)            ``lower/warps.py`` hoists one out of an expression)
warp intrinsics (``shfl_*_sync``,     warp exchange points, split like barriers, with their
votes, ``match_*``, ``syncwarp``,     operands in per-unit arrays (``lower/warps.py``, ``emit/warps.py``)
``activemask``, ``lanemask_lt``)
``cg.this_grid().sync()``             the grid-sync marker (phases over the whole grid)
``shared.array(shape, dtype)``        removed; recorded in ``shared`` (allocated once per worker
                                      chunk by ``emit/cube_kernel.py``)
``local.array(shape, dtype)``         ``x = __local__('x')``, replaced later; recorded in ``local``
``const.array_like(a)``               ``a``
``atomic.<op>(...)``                  ``__atomic_<op>`` (global arrays) or ``__plain_<op>``
                                      (arrays declared shared/local here: one worker owns them)
``threadfence*()``, ``nanosleep()``   removed
``selp``, ``fma``, ``cbrt``           ``b if c else d``, ``__fma(a, b, c)`` (fused), ``__np.cbrt``
a ``cuda.jit(device=True)`` or        a call of the translated copy ``<name>__dev`` (the hidden
``njit`` function, or a cuda.jit      ids it needs are appended as keywords once known)
kernel (a device function to
numba-cuda)
a device function with shared         inlined: its lowered body, renamed apart, runs before the
memory, barriers or compile-time      calling statement, whose call becomes the result variable
arguments (functions, dtypes,         (``lower/inline/inliner.py``; a child ``Lowerer`` lowers it for the
shapes)                               call's compile-time arguments)
a nested ``def`` (closure)            inlined at each call (``lower/inline/nested.py``)
====================================  =========================================================

Free names are frozen or imported through ``resolve.freeze``. Constructs the CPU backend cannot run
(``with``/``try``, lambdas, a shuffle's ``width``, dynamic shared memory in a device function, ...)
raise ``CompileError`` naming the construct and its line.

Parameters that the body reassigns are renamed ``<p>__arg`` and re-bound by a first statement
``p = p__arg``: in the generated code one Python variable serves many units in turn, so a unit must
not see the value a previous unit left in a parameter.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

from numba_cube.backends.cpu.lower.inline import inliner as inline, nested as inline_nested
from numba_cube.backends.cpu.frontend import resolve as rs
from numba_cube.backends.cpu.lower.cuda_calls import (
    BARRIER_REDUCTIONS, BARRIERS, NOOPS, ArrayDecl, CudaCalls, name_node,
)
from numba_cube.backends.cpu.frontend.source import SourceFunction, chain, resolve
from numba_cube.backends.cpu.lower.hidden import BARRIER, HIDDEN_IDS, LOCAL_MARKER, NonNegWrapper
from numba_cube.backends.cpu.lower.inline.hooks import LAZY, Hoisted, InlineHooks

#: Python constructs the generated loops cannot host (or Numba cannot compile), by node type
_REFUSED = {ast.With: "'with' statement", ast.AsyncWith: "'async with' statement",
            ast.Try: "'try' statement", ast.Global: "'global' statement",
            ast.Nonlocal: "'nonlocal' statement", ast.FunctionDef: "nested function definition",
            ast.AsyncFunctionDef: "nested function definition", ast.ClassDef: "class definition",
            ast.Lambda: "lambda", ast.Yield: "'yield'", ast.YieldFrom: "'yield from'",
            ast.Await: "'await'", ast.NamedExpr: "assignment expression ':='",
            ast.Delete: "'del' statement"}
if hasattr(ast, "Match"):                  # Python >= 3.10
    _REFUSED[ast.Match] = "'match' statement"


@dataclass
class Lowered:
    """The result of lowering one function."""

    fn: SourceFunction
    body: list[ast.stmt]
    params: list[str]                       # parameter names in the generated def
    shared: list[ArrayDecl] = field(default_factory=list)
    local: list[ArrayDecl] = field(default_factory=list)
    device_calls: list[tuple[ast.Call, object]] = field(default_factory=list)
    hidden_used: set[str] = field(default_factory=set)


class Lowerer(CudaCalls, InlineHooks, ast.NodeTransformer):
    """Rewrites one function body; see the module docstring for the mapping."""

    def __init__(self, fn: SourceFunction, env: rs.ModuleEnv, register_device, role: str,
                 parent: Lowerer | None = None):
        self.fn = fn
        self.env = env
        self.register_device = register_device   # (py_func, kind, node) -> generated name
        self.role = role                          # "kernel" or "device"
        self.out = Lowered(fn, [], list(fn.params))
        self.owned: set[str] = set()              # shared/local array names (plain atomics)
        # An inlined device function (``lower/inline/inliner.py``) is lowered by a child of its caller's
        # Lowerer: generated names and counters are the root's, so they stay unique in the
        # generated function, and module-level names avoid every enclosing function's locals.
        self.parent = parent
        self.root: Lowerer = self if parent is None else parent.root
        self.inlining = inline.InlineState() if parent is None else parent.inlining
        self.avoid = set(fn.local_names) | (parent.avoid if parent is not None else set())
        self.pristine = copy.deepcopy(fn.node)   # before lowering rewrites it (frontend/constexpr.py)
        self._hoisted: Hoisted | None = None
        self._lazy = 0                            # depth of lazily evaluated expressions
        self.nested: dict[str, inline_nested.NestedFunction] = {}   # `def`s seen in this body
        # a nested `def` binds a local name, as in Python (ast records it as no Store)
        fn.add_locals({n.name for n in ast.walk(fn.node)
                       if isinstance(n, ast.FunctionDef) and n is not fn.node})
        self.packed: dict[str, int] = {}          # *args parameter -> its length (inlined)
        if parent is None:
            self._reductions = 0

    @property
    def n_reductions(self) -> int:
        """syncthreads_count/and/or seen so far in the generated function (inlined included)."""
        return self.root._reductions

    @n_reductions.setter
    def n_reductions(self, value: int) -> None:
        self.root._reductions = value

    def _warp_state(self):
        # lower/warps.py numbers its temporaries per generated function: inlined bodies share it
        return super()._warp_state() if self.parent is None else self.root._warp_state()

    def spawn(self, fn: SourceFunction, owned: set[str], packed: dict[str, int]) -> Lowerer:
        """A Lowerer for a device function inlined into this one (see ``lower/inline/inliner.py``)."""
        child = Lowerer(fn, self.env, self.register_device, self.role, parent=self)
        child.owned |= owned
        child.packed = dict(packed)
        return child

    # ---- entry point --------------------------------------------------------------------

    def run(self) -> Lowered:
        node = self.fn.node
        for stmt in ast.walk(node):
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
                path = self._cuda_path(stmt.value.func)
                if path in ("shared.array", "local.array"):
                    self.owned |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        body = []
        stmts = node.body
        if stmts and isinstance(stmts[0], ast.Expr) and isinstance(stmts[0].value, ast.Constant) \
                and isinstance(stmts[0].value.value, str):
            stmts = stmts[1:]                      # the docstring
        for stmt in stmts:
            new = self.visit(stmt)
            body.extend(new if isinstance(new, list) else [] if new is None else [new])
        reassigned = [p for p in self.fn.params
                      if any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                             and n.id == p for n in ast.walk(node))]
        if reassigned and self.role == "kernel" and self.parent is None:
            body = [ast.Assign([ast.Name(p, ast.Store())], name_node(p + "__arg"))
                    for p in reassigned] + body
            self.out.params = [p + "__arg" if p in reassigned else p for p in self.fn.params]
        body = [NonNegWrapper().visit(s) for s in body] or [ast.Pass()]
        for n in (n for s in body for n in ast.walk(s)):
            if hasattr(n, "body") and isinstance(n.body, list) and not n.body:
                n.body = [ast.Pass()]             # e.g. `if c: cuda.threadfence()`
        self.out.body = [ast.fix_missing_locations(s) for s in body]
        self.out.hidden_used = {n.id for s in self.out.body for n in ast.walk(s)
                                if isinstance(n, ast.Name) and n.id in HIDDEN_IDS}
        return self.out

    # ---- helpers --------------------------------------------------------------------------

    def _err(self, message, construct, node):
        return self.fn.error(message, construct, node)

    def _cuda_path(self, node) -> str | None:
        if chain(node) is None:
            return None
        r = resolve(self.fn, node)
        return r.cuda_path if r is not None else None

    # ---- statements ------------------------------------------------------------------------

    def visit_Assign(self, node):
        if isinstance(node.value, ast.Call):
            path = self._cuda_path(node.value.func)
            if (path in BARRIER_REDUCTIONS and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)):
                return self._barrier_reduction(path, node.value, node.targets[0].id, node)
            if path == "shared.array":
                if self.role != "kernel":
                    raise self._err("cuda.shared.array inside a device function is not supported "
                                    "by the CPU backend; declare it in the kernel and pass it",
                                    "cuda.shared.array in a device function", node)
                self.out.shared.append(self._decl(node, "shared"))
                return None
            if path == "local.array":
                decl = self._decl(node, "local")
                self.out.local.append(decl)
                if self.role != "kernel":   # device functions: a fresh array per call
                    return ast.copy_location(ast.parse(
                        f"{decl.name} = __np.empty({decl.shape}, {decl.dtype_expr})").body[0],
                        node)
                return ast.copy_location(ast.parse(
                    f"{decl.name} = {LOCAL_MARKER}({decl.name!r})").body[0], node)
        return self.generic_visit(node)

    def visit_Expr(self, node):
        if isinstance(node.value, ast.Call):
            path = self._cuda_path(node.value.func)
            if path in BARRIER_REDUCTIONS:
                return self._barrier_reduction(path, node.value, None, node)
            if path in BARRIERS:
                if self.role != "kernel":
                    raise self._err(f"cuda.{path}() inside a device function is not supported by "
                                    "the CPU backend (barriers must be in the kernel body)",
                                    f"cuda.{path}() in a device function", node)
                return ast.copy_location(ast.Expr(ast.Call(name_node(BARRIER), [], [])), node)
            if path in NOOPS:
                return None
        return self.generic_visit(node)

    def visit_Return(self, node):
        # (an inlined device function's return values become assignments: lower/inline/inliner.py)
        if self.role == "kernel" and self.parent is None and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            raise self._err("a kernel cannot return a value", "return with a value", node)
        return self.generic_visit(node)

    def visit(self, node):
        if isinstance(node, ast.FunctionDef):       # a closure: lower/inline/nested.py
            return inline_nested.define(self, node)
        what = _REFUSED.get(type(node))
        if what is not None:
            raise self._err(f"{what} is not supported in kernels by the CPU backend", what, node)
        if isinstance(node, ast.stmt):
            # inlined device functions (lower/inline/inliner.py) are hoisted before the statement calling them
            outer, self._hoisted = self._hoisted, Hoisted(node)
            try:
                return self._hoisted.before(self._visit_statement(node), self)
            finally:
                self._hoisted = outer
        if isinstance(node, LAZY):
            with self.lazily():
                return super().visit(node)
        return super().visit(node)

    def _visit_statement(self, node):
        if self._is_marker(node):
            return node                  # already lowered by lower/warps.py
        expanded = self._expand_statement(node)     # lower/warps.py: warp intrinsics, grid sync,
        if expanded is not None:                    # barrier values inside expressions
            return expanded
        return super().visit(node)

    # ---- expressions -----------------------------------------------------------------------

    def visit_Name(self, node):
        if not isinstance(node.ctx, ast.Load):
            return node
        if node.id in self.nested:
            raise self._nested_value(node.id, node)
        return self._free_chain(node) or node

    def _nested_value(self, name, node):
        return self._err(f"nested function {name!r} can only be called, or passed to a device "
                         "function, on the CPU backend", f"nested function {name!r} used as a "
                         "value", node)

    def visit_Attribute(self, node):
        if isinstance(node.ctx, ast.Load) and chain(node) is not None:
            new = self._free_chain(node)
            if new is not None:
                return new
        return self.generic_visit(node)

    def _free_chain(self, node):
        """Lower a free name chain; None when it is local (left to the generic visit)."""
        r = resolve(self.fn, node)
        if r is None:
            return None
        if r.cuda_path is not None:
            return ast.copy_location(self._cuda_value(r.cuda_path, node), node)
        if isinstance(r.obj, inline_nested.NestedFunction):
            raise self._nested_value(r.root, node)
        if _device_kind(r.obj) is not None and not r.rest:
            raise self._err(f"{r.root!r} is a function: it can only be called",
                            f"device function {r.root!r} used as a value", node)
        try:
            base = rs.freeze(self.env, r.root, r.obj, self.avoid)
        except rs.Unsupported as exc:
            raise self._err(f"global {r.root!r} cannot be used in a CPU kernel: {exc}",
                            f"global {r.root!r}", node) from None
        for attr in r.rest:
            base = ast.Attribute(base, attr, ast.Load())
        return ast.copy_location(base, node)

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.nested:
            return inline_nested.expand(self, self.nested[func.id], node)
        path = self._cuda_path(func) if chain(func) is not None else None
        if path is not None:
            return ast.copy_location(self._cuda_call(path, node), node)
        if chain(func) is not None:
            r = resolve(self.fn, func)
            if r is not None and isinstance(r.obj, inline_nested.NestedFunction) and not r.rest:
                return inline_nested.expand(self, r.obj, node)     # passed as an argument
            if (r is not None and r.obj is len and len(node.args) == 1 and isinstance(
                    node.args[0], ast.Name) and node.args[0].id in self.packed):
                return ast.copy_location(ast.Constant(self.packed[node.args[0].id]), node)
            kind = _device_kind(r.obj) if r is not None and r.cuda_path is None else None
            # a cuda.jit kernel called from a kernel is a device function to numba-cuda
            if kind in ("device", "kernel") and not r.rest:
                inlined = inline.expand(self, r.obj, node)
                if inlined is not None:
                    return inlined
            if kind is not None and not r.rest:
                alias = self.register_device(r.obj, kind, node)
                node.func = ast.copy_location(name_node(alias), func)
                node.args = [self.visit(a) for a in node.args]
                node.keywords = [self.visit(k) for k in node.keywords]
                self.out.device_calls.append((node, r.obj))
                return node
        if (isinstance(func, ast.Attribute) and func.attr == "bit_count" and not node.args
                and not node.keywords):
            return self._bit_count_call(node)            # numba-cuda's int.bit_count (cudacalls)
        return self.generic_visit(node)

#: kept under its old name for this module's callers
_device_kind = rs.device_kind
