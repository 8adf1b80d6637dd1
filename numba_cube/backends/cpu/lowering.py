"""Lowering: numba.cuda builtins -> plain Python over hidden names.

One ``Lowerer`` pass per function (kernel or device function) rewrites the parsed body so that it
no longer mentions the CUDA module:

===============================  =============================================================
CUDA                             lowered
===============================  =============================================================
``threadIdx.x`` / ``.y`` / ``.z``  ``__tx`` / ``__ty`` / ``__tz`` (the unit loop variables)
``blockIdx.*``, ``blockDim.*``,    ``__bx..``, ``__bdx..``, ``__gdx..`` (cube index, kernel params)
``gridDim.*``
``grid(n)``, ``gridsize(n)``       ``__nn(__bx * __bdx + __tx)``, ... (n = 1, 2, 3; tuples for 2, 3)
``warpsize``, ``laneid``           ``32``, ``__tid % 32``
``syncthreads()``, ``syncwarp()``  the barrier marker statement ``__syncthreads()``
``shared.array(shape, dtype)``     removed; recorded in ``shared`` (allocated per cube by codegen)
``local.array(shape, dtype)``      ``x = __local__('x')`` marker, replaced by codegen; recorded
``const.array_like(a)``            ``a``
``atomic.<op>(...)``               ``__atomic_<op>`` (global arrays) or ``__plain_<op>`` (arrays
                                   declared shared/local in this function: one worker owns them)
``threadfence*()``, ``nanosleep``  removed
``selp``, ``fma``, ``cbrt``        ``b if c else d``, ``a * b + c``, ``__np.cbrt``
a ``cuda.jit(device=True)`` or     a call of the translated copy ``<name>__dev`` (hidden ids it
``njit`` function                  needs are appended as keywords once they are known)
===============================  =============================================================

Free names are frozen or imported through ``resolve.freeze``. Constructs the CPU backend cannot run
(warp shuffles/votes, grid sync, dynamic shared memory, ``with``/``try``, nested functions, ...)
raise ``CompileError`` naming the construct and its line.

Parameters that the body reassigns are renamed ``<p>__arg`` and re-bound by a first statement
``p = p__arg``: in the generated code one Python variable serves many units in turn, so a unit must
not see the value a previous unit left in a parameter.
"""

from __future__ import annotations

import ast
import copy
import operator
from dataclasses import dataclass, field

import numpy as np

from numba_cube.backends.cpu import resolve as rs
from numba_cube.backends.cpu.atomics import OPS as ATOMIC_OPS
from numba_cube.backends.cpu.atomics import function_name as atomic_function_name
from numba_cube.backends.cpu.frontend import SourceFunction, chain, resolve

DIMS = ("x", "y", "z")
THREAD_IDS = ("__tx", "__ty", "__tz")
BLOCK_IDS = ("__bx", "__by", "__bz")
BLOCK_DIMS = ("__bdx", "__bdy", "__bdz")
GRID_DIMS = ("__gdx", "__gdy", "__gdz")
LINEAR_TID = "__tid"
#: every hidden id a lowered body may mention, in the canonical order used for device parameters
HIDDEN_IDS = THREAD_IDS + BLOCK_IDS + BLOCK_DIMS + GRID_DIMS + (LINEAR_TID,)
#: hidden ids with the same value for every unit of a cube
UNIFORM_IDS = frozenset(BLOCK_IDS + BLOCK_DIMS + GRID_DIMS)

BARRIER = "__syncthreads"
LOCAL_MARKER = "__local__"
NONNEG = "__nn"

_BUILTIN_VECS = {"threadIdx": THREAD_IDS, "blockIdx": BLOCK_IDS, "blockDim": BLOCK_DIMS,
                 "gridDim": GRID_DIMS}
_NOOPS = {"threadfence", "threadfence_block", "threadfence_system", "nanosleep"}
_BARRIERS = {"syncthreads", "syncwarp"}
_WARP_LEVEL = ("shfl", "ballot", "all_sync", "any_sync", "eq_sync", "match_", "activemask",
               "lanemask", "vote_sync")


@dataclass
class ArrayDecl:
    """A ``cuda.shared.array`` / ``cuda.local.array`` declaration."""

    name: str
    shape: str          # source text of a constant shape (int or tuple)
    dtype: str          # NumPy scalar type name, e.g. "float32"
    node: ast.AST


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


def _name(id_: str) -> ast.Name:
    return ast.Name(id_, ast.Load())


def _expr(src: str) -> ast.expr:
    return ast.parse(src, mode="eval").body


def _is_barrier(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == BARRIER)


def contains_barrier(node: ast.AST) -> bool:
    return any(_is_barrier(n) for n in ast.walk(node) if isinstance(n, ast.stmt))


class Lowerer(ast.NodeTransformer):
    """Rewrites one function body; see the module docstring for the mapping."""

    def __init__(self, fn: SourceFunction, env: rs.ModuleEnv, register_device, role: str):
        self.fn = fn
        self.env = env
        self.register_device = register_device   # (py_func, kind, node) -> generated name
        self.role = role                          # "kernel" or "device"
        self.out = Lowered(fn, [], list(fn.params))
        self.owned: set[str] = set()              # shared/local array names (plain atomics)

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
        if reassigned and self.role == "kernel":
            body = [ast.Assign([ast.Name(p, ast.Store())], _name(p + "__arg"))
                    for p in reassigned] + body
            self.out.params = [p + "__arg" if p in reassigned else p for p in self.fn.params]
        body = [NonNegWrapper().visit(s) for s in body] or [ast.Pass()]
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

    def _unsupported_cuda(self, path, node):
        what = f"cuda.{path}"
        if path.startswith(_WARP_LEVEL):
            reason = "warp-level primitives (shuffles, votes, ballots) are not supported"
        elif path.startswith("cg") or "grid_group" in path:
            reason = "cooperative groups / grid-wide synchronisation is not supported"
        elif path.startswith("syncthreads_"):
            reason = "barrier reductions (syncthreads_count/and/or) are not supported"
        else:
            reason = "this CUDA builtin is not supported"
        return self._err(f"{what}: {reason} by the CPU backend", what, node)

    def _decl(self, stmt: ast.Assign, kind: str) -> ArrayDecl:
        call = stmt.value
        if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
            raise self._err(f"cuda.{kind}.array must be assigned to a single plain name",
                            f"cuda.{kind}.array", stmt)
        args = list(call.args) + [k.value for k in call.keywords]
        kw = {k.arg: k.value for k in call.keywords}
        shape = kw.get("shape", call.args[0] if call.args else None)
        dtype = kw.get("dtype", call.args[1] if len(call.args) > 1 else None)
        if shape is None or dtype is None or len(args) != 2:
            raise self._err(f"cuda.{kind}.array needs (shape, dtype)", f"cuda.{kind}.array",
                            stmt)
        shape = self.visit(copy.deepcopy(shape))
        if any(isinstance(n, ast.Name) and n.id != "__np" for n in ast.walk(shape)):
            raise self._err(f"the shape of cuda.{kind}.array must be a compile-time constant "
                            "(literals and module-level constants)", f"cuda.{kind}.array shape",
                            stmt)
        try:
            value = eval(compile(ast.Expression(shape), "<shape>", "eval"), {"__np": np})
            value = (tuple(operator.index(v) for v in value) if isinstance(value, tuple)
                     else operator.index(value))
        except Exception:
            raise self._err(f"cannot evaluate the shape of cuda.{kind}.array to integers",
                            f"cuda.{kind}.array shape", stmt) from None
        if value == 0 or value == (0,):
            raise self._err("dynamic shared memory (shape 0) is not supported by the CPU backend",
                            "dynamic cuda.shared.array", stmt)
        return ArrayDecl(stmt.targets[0].id, repr(value), self._dtype_name(dtype, stmt), stmt)

    def _dtype_name(self, node, stmt) -> str:
        obj = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            obj = node.value
        elif chain(node) is not None:
            r = resolve(self.fn, node)
            if r is not None and r.cuda_path is None and not r.rest:
                obj = r.obj
        name = rs.numpy_scalar_name(obj) if obj is not None else None
        if name is None:
            raise self._err("the dtype of a cuda shared/local array must be a NumPy or Numba "
                            "scalar type (e.g. numba.float32, np.int64)", "array dtype", stmt)
        return name

    # ---- statements ------------------------------------------------------------------------

    def visit_Assign(self, node):
        if isinstance(node.value, ast.Call):
            path = self._cuda_path(node.value.func)
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
                        f"{decl.name} = __np.empty({decl.shape}, __np.{decl.dtype})").body[0],
                        node)
                return ast.copy_location(ast.parse(
                    f"{decl.name} = {LOCAL_MARKER}({decl.name!r})").body[0], node)
        return self.generic_visit(node)

    def visit_Expr(self, node):
        if isinstance(node.value, ast.Call):
            path = self._cuda_path(node.value.func)
            if path in _BARRIERS:
                if self.role != "kernel":
                    raise self._err(f"cuda.{path}() inside a device function is not supported by "
                                    "the CPU backend (barriers must be in the kernel body)",
                                    f"cuda.{path}() in a device function", node)
                return ast.copy_location(ast.Expr(ast.Call(_name(BARRIER), [], [])), node)
            if path in _NOOPS:
                return None
        return self.generic_visit(node)

    def visit_Return(self, node):
        if self.role == "kernel" and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            raise self._err("a kernel cannot return a value", "return with a value", node)
        return self.generic_visit(node)

    def _refuse(self, node, what):
        raise self._err(f"{what} is not supported in kernels by the CPU backend", what, node)

    def visit_With(self, node): self._refuse(node, "'with' statement")
    def visit_AsyncWith(self, node): self._refuse(node, "'async with' statement")
    def visit_Try(self, node): self._refuse(node, "'try' statement")
    def visit_Global(self, node): self._refuse(node, "'global' statement")
    def visit_Nonlocal(self, node): self._refuse(node, "'nonlocal' statement")
    def visit_FunctionDef(self, node): self._refuse(node, "nested function definition")
    def visit_AsyncFunctionDef(self, node): self._refuse(node, "nested function definition")
    def visit_ClassDef(self, node): self._refuse(node, "class definition")
    def visit_Lambda(self, node): self._refuse(node, "lambda")
    def visit_Yield(self, node): self._refuse(node, "'yield'")
    def visit_YieldFrom(self, node): self._refuse(node, "'yield from'")
    def visit_Await(self, node): self._refuse(node, "'await'")
    def visit_NamedExpr(self, node): self._refuse(node, "assignment expression ':='")
    def visit_Delete(self, node): self._refuse(node, "'del' statement")

    def visit_Match(self, node):
        self._refuse(node, "'match' statement")

    # ---- expressions -----------------------------------------------------------------------

    def visit_Name(self, node):
        if not isinstance(node.ctx, ast.Load):
            return node
        return self._free_chain(node) or node

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
        if _device_kind(r.obj) is not None and not r.rest:
            raise self._err(f"{r.root!r} is a function: it can only be called",
                            f"device function {r.root!r} used as a value", node)
        try:
            base = rs.freeze(self.env, r.root, r.obj, self.fn.local_names)
        except rs.Unsupported as exc:
            raise self._err(f"global {r.root!r} cannot be used in a CPU kernel: {exc}",
                            f"global {r.root!r}", node) from None
        for attr in r.rest:
            base = ast.Attribute(base, attr, ast.Load())
        return ast.copy_location(base, node)

    def _cuda_value(self, path, node):
        head, _, tail = path.partition(".")
        if head in _BUILTIN_VECS and tail in DIMS:
            return _name(_BUILTIN_VECS[head][DIMS.index(tail)])
        if path == "warpsize":
            return ast.Constant(32)
        if path == "laneid":
            return _expr(f"({LINEAR_TID} % 32)")
        if head in _BUILTIN_VECS:
            raise self._err(f"cuda.{head} must be used with .x, .y or .z", f"cuda.{path}", node)
        raise self._unsupported_cuda(path, node)

    def visit_Call(self, node):
        func = node.func
        path = self._cuda_path(func) if chain(func) is not None else None
        if path is not None:
            return ast.copy_location(self._cuda_call(path, node), node)
        if chain(func) is not None:
            r = resolve(self.fn, func)
            kind = _device_kind(r.obj) if r is not None and r.cuda_path is None else None
            if kind == "kernel":
                raise self._err("calling a kernel from a kernel is not supported",
                                f"call of kernel {r.root!r}", node)
            if kind is not None and not r.rest:
                alias = self.register_device(r.obj, kind, node)
                node.func = ast.copy_location(_name(alias), func)
                node.args = [self.visit(a) for a in node.args]
                node.keywords = [self.visit(k) for k in node.keywords]
                self.out.device_calls.append((node, r.obj))
                return node
        return self.generic_visit(node)

    def _cuda_call(self, path, node):
        args = [self.visit(a) for a in node.args]
        if node.keywords:
            raise self._err(f"keyword arguments to cuda.{path} are not supported",
                            f"cuda.{path}", node)
        if path in ("grid", "gridsize"):
            if len(args) != 1 or not isinstance(args[0], ast.Constant) or args[0].value not in (
                    1, 2, 3):
                raise self._err(f"cuda.{path}(n) needs a literal n of 1, 2 or 3",
                                f"cuda.{path}", node)
            n = args[0].value
            if path == "grid":
                items = [f"{NONNEG}({b} * {d} + {t})"
                         for b, d, t in zip(BLOCK_IDS, BLOCK_DIMS, THREAD_IDS)][:n]
            else:
                items = [f"({d} * {g})" for d, g in zip(BLOCK_DIMS, GRID_DIMS)][:n]
            return _expr(items[0] if n == 1 else "(" + ", ".join(items) + ")")
        if path.startswith("atomic."):
            return self._atomic(path[len("atomic."):], args, node)
        if path == "const.array_like" and len(args) == 1:
            return args[0]
        if path == "selp" and len(args) == 3:
            return ast.IfExp(args[0], args[1], args[2])
        if path == "fma" and len(args) == 3:
            return ast.BinOp(ast.BinOp(args[0], ast.Mult(), args[1]), ast.Add(), args[2])
        if path == "cbrt" and len(args) == 1:
            return ast.Call(_expr("__np.cbrt"), args, [])
        if path in _BARRIERS or path in _NOOPS or path in ("shared.array", "local.array"):
            raise self._err(f"cuda.{path}(...) must be a statement of its own (or, for arrays, "
                            "assigned to a plain name)", f"cuda.{path}", node)
        raise self._unsupported_cuda(path, node)

    def _atomic(self, op, args, node):
        if op == "compare_and_swap":
            if len(args) != 3:
                raise self._err("cuda.atomic.compare_and_swap takes (ary, old, val)",
                                "cuda.atomic.compare_and_swap", node)
            op, args = "cas", [args[0], ast.Constant(0), args[1], args[2]]
        if op not in ATOMIC_OPS:
            raise self._unsupported_cuda(f"atomic.{op}", node)
        if len(args) != (4 if op == "cas" else 3):
            raise self._err(f"wrong number of arguments to cuda.atomic.{op}",
                            f"cuda.atomic.{op}", node)
        plain = isinstance(args[0], ast.Name) and args[0].id in self.owned
        fname = atomic_function_name(op, atomic=not plain)
        alias = self.env.helper("numba_cube.backends.cpu.atomics", fname, "__" + fname)
        return ast.Call(_name(alias), args, [])


class NonNegWrapper(ast.NodeTransformer):
    """Wrap maximal ``+``/``*`` trees of hidden ids and non-negative int literals in ``__nn``.

    Such values are >= 0 by construction; telling LLVM so removes Numba's negative-index
    wraparound and lets thread loops vectorize (see ``support.assume_nonneg``).
    """

    def visit_BinOp(self, node):
        if _nonneg_tree(node):
            return ast.copy_location(ast.Call(_name(NONNEG), [node], []), node)
        return self.generic_visit(node)

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id == NONNEG:
            return node              # already wrapped (cuda.grid)
        return self.generic_visit(node)


def _nonneg_tree(node) -> bool:
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, (ast.Add, ast.Mult)) and _nonneg_tree(
            node.left) and _nonneg_tree(node.right)
    if isinstance(node, ast.Name):
        return node.id in HIDDEN_IDS
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id == NONNEG
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 0


def _device_kind(obj) -> str | None:
    """"device" (cuda.jit device=True), "kernel" (cuda.jit kernel), "njit", or None."""
    if not hasattr(obj, "py_func"):
        return None
    options = getattr(obj, "targetoptions", None)
    if isinstance(options, dict) and "device" in options and "nopython" not in options:
        return "device" if options.get("device") else "kernel"
    if hasattr(obj, "_device"):                     # numba.cuda simulator's FakeCUDAKernel
        return "device" if obj._device else "kernel"
    try:
        from numba.core.registry import CPUDispatcher
    except ImportError:                             # pragma: no cover
        return None
    return "njit" if isinstance(obj, CPUDispatcher) else None
