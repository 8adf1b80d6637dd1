"""What each CUDA builtin call becomes: the half of the lowering that knows numba.cuda's API.

``CudaCalls`` is a mixin of ``lowering.Lowerer`` (which does the traversal, name resolution and
statement handling). Each method here receives a resolved CUDA path (``"grid"``, ``"atomic.add"``,
``"shared.array"``, ...) and returns the replacement node(s) or raises ``CompileError``; the table
in ``lowering``'s docstring lists the mapping.
"""

from __future__ import annotations

import ast
import copy
import difflib
import operator
from dataclasses import dataclass

import numpy as np

from numba_cube.backends.cpu.frontend import constexpr
from numba_cube.backends.cpu.lower import dtypes
from numba_cube.backends.cpu.frontend import resolve as rs
from numba_cube.backends.cpu.kernel_runtime.atomics import OPS as ATOMIC_OPS
from numba_cube.backends.cpu.kernel_runtime.atomics import function_name as atomic_function_name
from numba_cube.backends.cpu.lower.dynamic_shared import is_dynamic_shape
from numba_cube.backends.cpu.kernel_runtime.fp16_functions import FP16_FUNCTIONS
from numba_cube.backends.cpu.frontend.source import chain, resolve
from numba_cube.backends.cpu.lower.hidden import (
    ACC_PREFIX, BARRIER, BLOCK_DIMS, BLOCK_IDS, DIMS, GRID_DIMS, LINEAR_TID, NONNEG, THREAD_IDS,
)
from numba_cube.backends.cpu.lower.raises import RaiseLowering
from numba_cube.backends.cpu.kernel_runtime.vectors import VECTOR_TYPES, constructor_name
from numba_cube.backends.cpu.lower.warps import WarpLowering

_BUILTIN_VECS = {"threadIdx": THREAD_IDS, "blockIdx": BLOCK_IDS, "blockDim": BLOCK_DIMS,
                 "gridDim": GRID_DIMS}
NOOPS = {"threadfence", "threadfence_block", "threadfence_system", "nanosleep"}
BARRIERS = {"syncthreads"}           # syncwarp is a warp exchange (lower/warps.py)
BARRIER_REDUCTIONS = {"syncthreads_count", "syncthreads_and", "syncthreads_or"}
_WARP_LEVEL = ("shfl", "ballot", "all_sync", "any_sync", "eq_sync", "match_", "activemask",
               "lanemask", "vote_sync")


@dataclass
class ArrayDecl:
    """A ``cuda.shared.array`` / ``cuda.local.array`` declaration."""

    name: str
    shape: str          # source text of a constant shape (int or tuple)
    dtype: str          # NumPy scalar type name, e.g. "float32", or a module-level name
                        # ("__half", "__rec_..."; lower/dtypes.py) for float16 and records
    node: ast.AST
    dynamic: bool = False   # cuda.shared.array(0, dtype): a view of the launch's dynamic bytes

    @property
    def dtype_expr(self) -> str:
        """The element type as source text of the generated module."""
        return self.dtype if self.dtype.startswith("__") else f"__np.{self.dtype}"


def name_node(id_: str) -> ast.Name:
    return ast.Name(id_, ast.Load())


def _expr(src: str) -> ast.expr:
    return ast.parse(src, mode="eval").body


#: the parameters of ``cuda.shared.array`` / ``cuda.local.array``, in numba-cuda's order
DECL_PARAMS = ("shape", "dtype", "alignment")

#: numba.cuda's bit intrinsics, on the argument's own integer width (``kernel_runtime/bitops.py``)
BIT_INTRINSICS = frozenset({"popc", "clz", "ffs", "brev"})


def unknown_cuda_name(path: str) -> str | None:
    """Why ``cuda.<path>`` is no name of numba.cuda at all ("unknown ..., did you mean ..."), or
    ``None`` when numba.cuda has it (then the CPU backend merely does not support it)."""
    # Only on this error path: the kernel's own module has imported numba.cuda already.
    import numba.cuda

    owner, owner_name = numba.cuda, "cuda"
    for part in path.split("."):
        if not hasattr(owner, part):
            public = [name for name in dir(owner) if not name.startswith("_")]
            close = difflib.get_close_matches(part, public, n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(f'{owner_name}.{c}' for c in close)}?" if close else ""
            return f"unknown name: {owner_name} has no attribute {part!r}{hint}"
        owner, owner_name = getattr(owner, part), f"{owner_name}.{part}"
    return None


class CudaCalls(WarpLowering, RaiseLowering):
    """Mixin: lowering of CUDA builtin values and calls (needs ``fn``, ``env``, ``role``,
    ``owned``, ``n_reductions``, ``visit`` and ``_err`` from the ``Lowerer``)."""

    def _unsupported_cuda(self, path, node):
        what = f"cuda.{path}"
        if path.startswith(_WARP_LEVEL):
            reason = ("this warp-level primitive is not supported (shfl*_sync, all/any/eq/"
                      "ballot_sync, match_any/all_sync, syncwarp, activemask and lanemask_lt "
                      "are)")
        elif path.startswith("cg") or "grid_group" in path:
            reason = ("of cooperative groups only 'g = cuda.cg.this_grid(); g.sync()' (as "
                      "statements) is supported")
        elif path in BARRIER_REDUCTIONS:
            reason = (f"only supported as a statement 'name = cuda.{path}(predicate)' in the "
                      "kernel body")
        else:
            unknown = unknown_cuda_name(path)
            if unknown is not None:
                # A typo is not a missing feature: say so, with what the user likely meant.
                return self._err(f"{what}: {unknown}", what, node)
            reason = "this CUDA builtin is not supported"
        return self._err(f"{what}: {reason} (CPU backend)", what, node)

    def _decl(self, stmt: ast.Assign, kind: str) -> ArrayDecl:
        call = stmt.value
        if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
            raise self._err(f"cuda.{kind}.array must be assigned to a single plain name",
                            f"cuda.{kind}.array", stmt)
        shape, dtype = self._decl_arguments(call, kind, stmt)
        try:    # evaluated in the source's scope, as numba-cuda's typing proves it constant
            value = constexpr.shape_value(self.fn, shape, self.pristine)
        except constexpr.NotConstant:
            raise self._err(f"the shape of cuda.{kind}.array must be a compile-time constant "
                            "(literals, module-level or closure constants, local names assigned "
                            "once from constants, and tuples/arithmetic of those)",
                            f"cuda.{kind}.array shape", stmt) from None
        except (TypeError, ValueError):
            raise self._err(f"cannot evaluate the shape of cuda.{kind}.array to integers",
                            f"cuda.{kind}.array shape", stmt) from None
        if kind == "shared" and is_dynamic_shape(value):     # lower/dynamic_shared.py says how it is lowered
            element = self._dtype_name(dtype, stmt)
            if element.startswith("__"):
                raise self._err("dynamic shared memory of float16 or record elements is not "
                                "supported by the CPU backend; declare it with a NumPy scalar "
                                "dtype", "dynamic cuda.shared.array dtype", stmt)
            return ArrayDecl(stmt.targets[0].id, repr(value), element, stmt, dynamic=True)
        if any(v <= 0 for v in (value if isinstance(value, tuple) else (value,))):
            # numba-cuda refuses these at compile time ("array length <= 0"); only a 1-D shared
            # array of size 0 has a meaning (dynamic shared memory).
            raise self._err(f"cuda.{kind}.array of shape {value!r}: every dimension must be at "
                            "least 1 (only cuda.shared.array(0, dtype), the dynamic shared "
                            "memory, may have size 0)", f"cuda.{kind}.array of size <= 0", stmt)
        return ArrayDecl(stmt.targets[0].id, repr(value), self._dtype_name(dtype, stmt), stmt)

    def _decl_arguments(self, call: ast.Call, kind: str, stmt) -> tuple[ast.expr, ast.expr]:
        """``(shape, dtype)`` of ``cuda.<kind>.array(shape, dtype, alignment=None)``, positional
        or by keyword as numba-cuda binds them (numba-cuda-mlir calls the third ``alignas``).
        The alignment is checked as numba-cuda checks it and has no other effect here: it
        places the array in memory but does not change a value the kernel computes."""
        what = f"cuda.{kind}.array"
        bound: dict[str, ast.expr] = dict(zip(DECL_PARAMS, call.args))
        for k in call.keywords:
            name = "alignment" if k.arg == "alignas" else k.arg
            if k.arg is None or name not in DECL_PARAMS:
                raise self._err(f"{what} got an unexpected keyword argument "
                                f"{'**' if k.arg is None else repr(k.arg)}; it takes (shape, "
                                "dtype, alignment=None)", what, stmt)
            if name in bound:
                raise self._err(f"{what} got multiple values for argument {name!r}", what, stmt)
            bound[name] = k.value
        if len(call.args) > len(DECL_PARAMS) or "shape" not in bound or "dtype" not in bound:
            raise self._err(f"{what} needs (shape, dtype) and takes an optional alignment",
                            what, stmt)
        if "alignment" in bound:
            self._check_alignment(bound["alignment"], what, stmt)
        return bound["shape"], bound["dtype"]

    def _check_alignment(self, node, what, stmt) -> None:
        """numba-cuda's rules (``cudaimpl._validate_alignment``): None, or a constant power of
        two that is a multiple of the pointer size."""
        try:
            value = constexpr.evaluate(self.fn, node, self.pristine)
        except (constexpr.NotConstant, TypeError, ValueError):
            value = "not a constant"
        if value is None:
            return
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                or value <= 0 or value & (value - 1) or value % 8:
            raise self._err(f"the alignment of {what} must be None or a constant power of two "
                            f"that is a multiple of 8 (numba-cuda's rule), got {value!r}",
                            f"{what} alignment", stmt)

    def _dtype_name(self, node, stmt) -> str:
        obj = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            obj = node.value
        elif chain(node) is not None:
            r = resolve(self.fn, node)
            if r is not None and r.cuda_path is None and not r.rest:
                obj = r.obj
        name = rs.numpy_scalar_name(obj) if obj is not None else None
        try:
            special = dtypes.array_dtype_name(self.env, obj, name)      # float16, records
        except ValueError as exc:
            raise self._err(f"the record dtype of a cuda shared/local array is not supported by "
                            f"the CPU backend: {exc}", "array dtype", stmt) from None
        if special is not None:
            return special
        if name is None:
            what = ast.unparse(node) + (f" = {obj!r}" if obj is not None else "")
            raise self._err(f"the dtype of a cuda shared/local array ({what}) must be a NumPy or "
                            "Numba scalar type (e.g. cuda.float32, numba.float32, np.int64, "
                            "'float32') or a record dtype on the CPU backend", "array dtype",
                            stmt)
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
        if path == "const.array_like" and len(node.args) + len(node.keywords) == 1 and all(
                k.arg == "ndarray" for k in node.keywords):       # numba-cuda's parameter name
            return self.visit(node.args[0] if node.args else node.keywords[0].value)
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
        if path == "fma" and len(args) == 3:      # fused, one rounding (kernel_runtime/mathcalls.py)
            alias = self.env.helper("numba_cube.backends.cpu.kernel_runtime.mathcalls", "fma", "__fma")
            return ast.Call(name_node(alias), args, [])
        if path in BIT_INTRINSICS and len(args) == 1:
            alias = self.env.helper("numba_cube.backends.cpu.kernel_runtime.bitops", path, "__" + path)
            return ast.Call(name_node(alias), args, [])
        if path in VECTOR_TYPES:                                          # kernel_runtime/vectors.py
            alias = self.env.helper("numba_cube.backends.cpu.kernel_runtime.vectors", constructor_name(path),
                                    "__vec_" + VECTOR_TYPES[path])
            return ast.Call(name_node(alias), args, [])
        if path.startswith("fp16.") and path[len("fp16."):] in FP16_FUNCTIONS:
            name = path[len("fp16."):]                                 # kernel_runtime/fp16_functions.py
            alias = self.env.helper("numba_cube.backends.cpu.kernel_runtime.fp16_functions", name,
                                    "__fp16_" + name)
            return ast.Call(name_node(alias), args, [])
        if path == "lanemask_lt" and not args:
            return self._lanemask_lt()                                   # lower/warps.py
        if path == "cbrt" and len(args) == 1:
            return ast.Call(_expr("__np.cbrt"), args, [])
        if path in BARRIERS or path in NOOPS or path in ("shared.array", "local.array") \
                or path in BARRIER_REDUCTIONS:
            raise self._err(f"cuda.{path}(...) must be a statement of its own (or, for arrays, "
                            "assigned to a plain name)", f"cuda.{path}", node)
        raise self._unsupported_cuda(path, node)

    def _bit_count_call(self, node):
        """``x.bit_count()``: numba-cuda's overload for integers is ``cuda.popc(x)`` (set bits of
        the two's-complement value, in ``x``'s type); other receivers fail to type there too."""
        receiver = self.visit(node.func.value)
        alias = self.env.helper("numba_cube.backends.cpu.kernel_runtime.bitops", "popc", "__popc")
        return ast.copy_location(ast.Call(name_node(alias), [receiver], []), node)

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
        alias = self.env.helper("numba_cube.backends.cpu.kernel_runtime.atomics", fname, "__" + fname)
        return ast.Call(name_node(alias), args, [])
