"""What each CUDA builtin call becomes: the half of the lowering that knows numba.cuda's API.

``CudaCalls`` is a mixin of ``lowering.Lowerer`` (which does the traversal, name resolution and
statement handling). Each method here receives a resolved CUDA path (``"grid"``, ``"atomic.add"``,
``"shared.array"``, ...) and returns the replacement node(s) or raises ``CompileError``; the table
in ``lowering``'s docstring lists the mapping.
"""

from __future__ import annotations

import ast
import copy
import operator
from dataclasses import dataclass

import numpy as np

from numba_cube.backends.cpu import resolve as rs
from numba_cube.backends.cpu.atomics import OPS as ATOMIC_OPS
from numba_cube.backends.cpu.atomics import function_name as atomic_function_name
from numba_cube.backends.cpu.frontend import chain, resolve
from numba_cube.backends.cpu.hidden import (ACC_PREFIX, BARRIER, BLOCK_DIMS, BLOCK_IDS, DIMS,
                                           GRID_DIMS, LINEAR_TID, NONNEG, THREAD_IDS)

_BUILTIN_VECS = {"threadIdx": THREAD_IDS, "blockIdx": BLOCK_IDS, "blockDim": BLOCK_DIMS,
                 "gridDim": GRID_DIMS}
NOOPS = {"threadfence", "threadfence_block", "threadfence_system", "nanosleep"}
BARRIERS = {"syncthreads", "syncwarp"}
BARRIER_REDUCTIONS = {"syncthreads_count", "syncthreads_and", "syncthreads_or"}
_WARP_LEVEL = ("shfl", "ballot", "all_sync", "any_sync", "eq_sync", "match_", "activemask",
               "lanemask", "vote_sync")


@dataclass
class ArrayDecl:
    """A ``cuda.shared.array`` / ``cuda.local.array`` declaration."""

    name: str
    shape: str          # source text of a constant shape (int or tuple)
    dtype: str          # NumPy scalar type name, e.g. "float32"
    node: ast.AST


def name_node(id_: str) -> ast.Name:
    return ast.Name(id_, ast.Load())


def _expr(src: str) -> ast.expr:
    return ast.parse(src, mode="eval").body


#: numba.cuda's bit intrinsics, on the argument's own integer width (``bitops.py``)
BIT_INTRINSICS = frozenset({"popc", "clz", "ffs", "brev"})


class CudaCalls:
    """Mixin: lowering of CUDA builtin values and calls (needs ``fn``, ``env``, ``role``,
    ``owned``, ``n_reductions``, ``visit`` and ``_err`` from the ``Lowerer``)."""

    def _unsupported_cuda(self, path, node):
        what = f"cuda.{path}"
        if path.startswith(_WARP_LEVEL):
            reason = "warp-level primitives (shuffles, votes, ballots) are not supported"
        elif path.startswith("cg") or "grid_group" in path:
            reason = "cooperative groups / grid-wide synchronisation are not supported"
        elif path in BARRIER_REDUCTIONS:
            reason = (f"only supported as a statement 'name = cuda.{path}(predicate)' in the "
                      "kernel body")
        else:
            reason = "this CUDA builtin is not supported"
        return self._err(f"{what}: {reason} (CPU backend)", what, node)

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

    def _barrier_reduction(self, path, call, target, node):
        """``target = cuda.syncthreads_<op>(pred)`` -> per-unit counting, barrier, cube-level
        result. The counters are cube-level names (ACC_PREFIX*), so ``target`` is uniform and may
        drive cube-level control flow (``while flag:`` around more barriers)."""
        if self.role != "kernel":
            raise self._err(f"cuda.{path}() inside a device function is not supported by the "
                            "CPU backend (barriers must be in the kernel body)",
                            f"cuda.{path}() in a device function", node)
        if len(call.args) != 1 or call.keywords:
            raise self._err(f"cuda.{path} takes one predicate", f"cuda.{path}", node)
        pred = ast.unparse(self.visit(call.args[0]))
        self.n_reductions += 1
        count, units = f"{ACC_PREFIX}{self.n_reductions}", f"{ACC_PREFIX}{self.n_reductions}n"
        op = path[len("syncthreads_"):]
        result = {"count": count, "and": f"int({count} == {units})",
                  "or": f"int({count} > 0)"}[op]
        src = (f"{count} = 0\n{units} = 0\n"           # before the region: cube level
               f"{count} = {count} + (1 if {pred} else 0)\n{units} = {units} + 1\n"
               f"{BARRIER}()\n")
        if target is not None:
            src += f"{target} = {result}\n"
        return [ast.copy_location(s, node) for s in ast.parse(src).body]

    def _cuda_value(self, path, node):
        head, _, tail = path.partition(".")
        if head in _BUILTIN_VECS and tail in DIMS:
            return name_node(_BUILTIN_VECS[head][DIMS.index(tail)])
        if path == "warpsize":
            return ast.Constant(32)
        if path == "laneid":
            return _expr(f"({LINEAR_TID} % 32)")
        if head in _BUILTIN_VECS:
            raise self._err(f"cuda.{head} must be used with .x, .y or .z", f"cuda.{path}", node)
        raise self._unsupported_cuda(path, node)

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
        if path in BIT_INTRINSICS and len(args) == 1:
            alias = self.env.helper("numba_cube.backends.cpu.bitops", path, "__" + path)
            return ast.Call(name_node(alias), args, [])
        if path == "cbrt" and len(args) == 1:
            return ast.Call(_expr("__np.cbrt"), args, [])
        if path in BARRIERS or path in NOOPS or path in ("shared.array", "local.array") \
                or path in BARRIER_REDUCTIONS:
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
        return ast.Call(name_node(alias), args, [])
