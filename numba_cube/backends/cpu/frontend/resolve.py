"""What a kernel's global references become in the generated module.

A generated module must be self-contained *as text*: Numba's ``cache=True`` re-imports it by name in
a later process and tracks only its file, so nothing may be injected into its namespace at run
time. Each free name a kernel uses therefore
becomes one of:

- a **literal** frozen into the text (``TPB = 256`` at module level -> ``256``), so that changing the
  constant changes the module's hash and invalidates both caches;
- an **import** line (``import math``, ``from numpy import sqrt as sqrt``) for library modules,
  functions and classes that can be re-imported by name (checked by identity round-trip);
- a **NumPy scalar type** spelled ``__np.float32`` (NumPy/Numba dtype objects, dtype instances);
- a **module-level constant array** (small global ndarrays, which CUDA treats as constant memory);
- a **device function** translated into the same module (handled by the caller).

Anything else is refused with a CompileError naming the global.

``ModuleEnv`` owns the module-level namespace: it hands out collision-free names (a kernel and a
device function from another module may both say ``np``, meaning different things) and collects the
header lines. Names the translator itself needs start with ``__``, which user code may not use.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import math
import types as pytypes

import numpy as np
from numba.core import types as nbtypes

from numba_cube.backends.cpu.kernel_runtime import mathcalls
from numba_cube.backends.cpu.frontend import records
from numba_cube.kernel import dialects

#: packages whose pure-Python functions may be imported by generated code (Numba implements
#: them, e.g. np.linspace); any other plain function is refused
LIBRARY_PACKAGES = frozenset({"numpy", "numba", "math", "cmath"})

#: largest global ndarray frozen into the generated text (elements)
MAX_FROZEN_ARRAY = 1 << 16


class Unsupported(Exception):
    """Raised by ``freeze`` for objects that cannot appear in a generated module."""


def numpy_scalar_name(obj) -> str | None:
    """``"float32"`` for np.float32 / numba.float32 / np.dtype('f4') / 'float32'; else None."""
    try:
        if isinstance(obj, nbtypes.Type):
            if not isinstance(obj, (nbtypes.Number, nbtypes.Boolean)):
                return None
            dt = np.dtype(str(obj))
        elif isinstance(obj, np.dtype):
            dt = obj
        elif isinstance(obj, type) and issubclass(obj, np.generic):
            dt = np.dtype(obj)
        elif isinstance(obj, str):
            dt = np.dtype(obj)
        elif isinstance(obj, type) and obj in (float, int, bool, complex):
            dt = np.dtype(obj)
        else:
            return None
    except TypeError:
        return None
    if dt.fields is not None or dt.subdtype is not None or dt.kind not in "biufc":
        return None
    name = dt.type.__name__
    return name if getattr(np, name, None) is dt.type else None


def dtype_expr(name: str) -> ast.expr:
    """``__np.<name>`` as an AST expression."""
    return ast.Attribute(ast.Name("__np", ast.Load()), name, ast.Load())


def literal(value) -> ast.expr:
    """A frozen Python/NumPy scalar (or tuple of them) as an AST expression."""
    if isinstance(value, (bool, str, bytes)) or value is None:
        return ast.Constant(value)
    if isinstance(value, int):
        return ast.Constant(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ast.parse("__np.nan", mode="eval").body
        if math.isinf(value):
            return ast.parse("__np.inf" if value > 0 else "(-__np.inf)", mode="eval").body
        return ast.Constant(value)
    if isinstance(value, complex):
        return ast.Call(ast.Name("complex", ast.Load()),
                        [literal(value.real), literal(value.imag)], [])
    if isinstance(value, np.generic):
        name = numpy_scalar_name(type(value))
        if name is None:
            raise Unsupported(f"NumPy scalar of type {type(value).__name__}")
        return ast.Call(dtype_expr(name), [literal(value.item())], [])
    if isinstance(value, tuple):
        return ast.Tuple([literal(v) for v in value], ast.Load())
    raise Unsupported(f"value of type {type(value).__name__}")


def importable(obj) -> tuple[str, str] | None:
    """``(module, qualname)`` if ``from module import qualname`` gives back ``obj`` itself."""
    modname = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if not modname or not qualname or "." in qualname or "<" in qualname:
        return None
    if modname == "builtins":
        return None
    try:
        mod = importlib.import_module(modname)
    except Exception:
        return None
    return (modname, qualname) if getattr(mod, qualname, None) is obj else None


class ModuleEnv:
    """The module-level namespace of one generated file: names, imports, constants."""

    def __init__(self):
        self._names: dict[str, object] = {}        # module-level name -> object it denotes
        self._by_obj: dict[tuple[int, str], str] = {}
        self.header: list[str] = []                # import lines (user-visible names)
        self.constants: list[str] = []             # module-level constant definitions
        self.helpers: dict[str, str] = {}          # hidden alias -> import line
        #: exceptions name the raising unit (debug=True kernels; lower/raises.py)
        self.unit_positions_in_exceptions = False

    @property
    def objects(self) -> dict[str, object]:
        """Module-level name -> the object it denotes (for purity checks)."""
        return dict(self._names)

    # hidden helpers the translator itself uses (atomics, support functions)
    def helper(self, module: str, name: str, alias: str) -> str:
        self.helpers.setdefault(alias, f"from {module} import {name} as {alias}")
        return alias

    def _claim(self, preferred: str, obj, avoid: set[str]) -> tuple[str, bool]:
        """A module-level name for ``obj``: ``(name, is_new)``; reuses an existing binding."""
        key = (id(obj), preferred)
        if key in self._by_obj and self._by_obj[key] not in avoid:
            return self._by_obj[key], False
        name, k = preferred, 1
        while (name in self._names and self._names[name] is not obj) or name in avoid:
            k += 1
            name = f"{preferred}_{k}"
        is_new = name not in self._names
        self._names[name] = obj
        self._by_obj[key] = name
        return name, is_new

    def bind_module(self, preferred: str, mod: pytypes.ModuleType, avoid: set[str]) -> str:
        name, new = self._claim(preferred, mod, avoid)
        if new:
            self.header.append(f"import {mod.__name__}" if name == mod.__name__
                               else f"import {mod.__name__} as {name}")
        return name

    def bind_import(self, preferred: str, obj, where: tuple[str, str], avoid: set[str]) -> str:
        name, new = self._claim(preferred, obj, avoid)
        if new:
            modname, qualname = where
            self.header.append(f"from {modname} import {qualname}" if name == qualname
                               else f"from {modname} import {qualname} as {name}")
        return name

    def bind_array(self, preferred: str, arr: np.ndarray, avoid: set[str]) -> str:
        if arr.size > MAX_FROZEN_ARRAY:
            raise Unsupported(f"global array of {arr.size} elements (more than "
                              f"{MAX_FROZEN_ARRAY}); pass it as a kernel argument")
        if arr.dtype.fields is not None:               # records: frozen as bytes (frontend/records.py)
            reason = records.unsupported_reason(arr.dtype)
            if reason is not None:
                raise Unsupported(f"global record array: {reason}")
            name, new = self._claim(preferred + "__const", arr, avoid)
            if new:
                self.constants.append(records.constant_line(name, arr))
            return name
        dtname = numpy_scalar_name(arr.dtype)
        if dtname is None:
            raise Unsupported(f"global array of dtype {arr.dtype}")
        name, new = self._claim(preferred + "__const", arr, avoid)
        if new:
            values = repr(arr.ravel().tolist()).replace("nan", "__np.nan").replace(
                "inf", "__np.inf")
            self.constants.append(f"{name} = __np.array({values}, dtype=__np.{dtname})"
                                  f".reshape({arr.shape!r})")
        return name


def freeze(env: ModuleEnv, name: str, obj, avoid: set[str]) -> ast.expr:
    """The expression that stands for global ``name`` (bound to ``obj``) in generated code.

    Raises ``Unsupported`` with a reason for objects that have no faithful spelling. Device
    functions and the CUDA module are handled by the caller before this is reached.
    """
    if isinstance(obj, (bool, int, float, complex, str, bytes, np.generic)) or obj is None:
        return literal(obj)
    if isinstance(obj, tuple):
        return ast.Tuple([freeze(env, name, v, avoid) for v in obj], ast.Load())
    if isinstance(obj, np.ndarray):
        # Before anything that compares ``obj`` with ``==`` or ``in``: an array answers those with
        # an array, whose truth value raises.
        return ast.Name(env.bind_array(name, obj, avoid), ast.Load())
    builtin_name = getattr(obj, "__name__", None)
    if isinstance(builtin_name, str) and getattr(builtins, builtin_name, None) is obj:
        return ast.Name(builtin_name, ast.Load())      # e.g. ``imin = min`` at module level
    scalar = numpy_scalar_name(obj)
    if scalar == "float16":               # the CPU backend's half type, not Numba's (kernel_runtime/fp16.py)
        return ast.Name(env.helper("numba_cube.backends.cpu.kernel_runtime.fp16", "HALF", "__half"), ast.Load())
    if scalar is not None:
        return dtype_expr(scalar)
    if isinstance(obj, pytypes.ModuleType):
        return ast.Name(env.bind_module(name, obj, avoid), ast.Load())
    if isinstance(obj, pytypes.FunctionType) and (getattr(obj, "__module__", None) or "").split(
            ".")[0] not in LIBRARY_PACKAGES:
        # a plain Python function of the user's: Numba cannot call it, and importing it by name
        # would hide edits to it from the module hash
        raise Unsupported("a plain Python function; only cuda.jit(device=True) and numba.njit "
                          "functions can be called from a kernel")
    # math.fmod, remainder, nextafter, modf: Numba's CPU target lacks them (kernel_runtime/mathcalls.py)
    obj = mathcalls.substitute(obj) or obj
    where = importable(obj)
    if where is not None:
        return ast.Name(env.bind_import(name, obj, where, avoid), ast.Load())
    raise Unsupported(f"object of type {type(obj).__name__}")


def device_kind(obj) -> str | None:
    """"device" (cuda.jit device=True), "kernel" (cuda.jit kernel), "njit", or None."""
    if not hasattr(obj, "py_func"):
        return None
    options = getattr(obj, "targetoptions", None)
    if isinstance(options, dict) and "device" in options and (
            "nopython" not in options or dialects.is_mlir_dispatcher(obj)):
        return "device" if options.get("device") else "kernel"
    if hasattr(obj, "_device"):                     # numba.cuda simulator's FakeCUDAKernel
        return "device" if obj._device else "kernel"
    try:
        from numba.core.registry import CPUDispatcher
    except ImportError:                             # pragma: no cover
        return None
    return "njit" if isinstance(obj, CPUDispatcher) else None
