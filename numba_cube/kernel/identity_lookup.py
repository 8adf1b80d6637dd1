"""Lookups for the identity encoder (``identity.py``): what a function's code reads, and which
objects belong to an installed library (and are then named by their import path).

A library object is judged by where its file is, not by its module's name: a user's module may
well be called ``numba.cuda.mine``, and its device functions must be fingerprinted by contents.
"""

from __future__ import annotations

import dis
import functools
import os
import sys
import types as pytypes

from .dialects import is_mlir_scalar, numba_scalar_type

__all__ = ["UNDEFINED", "references", "global_value", "through_modules", "library_name",
           "importable", "is_library_module", "is_dispatcher", "is_fake_kernel",
           "dispatcher_options", "numba_type_name"]

#: packages whose objects are identified by their import path instead of their contents:
#: installed libraries whose code does not change while a process runs
LIBRARY_PACKAGES = ("numpy", "numba", "numba_cuda", "numba_cuda_mlir", "llvmlite")
_BUILTIN_MODULES = frozenset({"builtins", "math", "cmath", "operator", "_operator"})
_CHAIN_OPS = frozenset({"LOAD_ATTR", "LOAD_METHOD"})

#: stands for a name that is bound to nothing (an empty closure cell, a missing global)
UNDEFINED = object()


# -- what a function reads ------------------------------------------------------------------------

@functools.lru_cache(maxsize=4096)
def references(code: pytypes.CodeType) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``("global" | "free", (name, attr, ...))``, sorted, for every global or closure variable
    the code (and the code nested in it: comprehensions, lambdas) loads, with the attribute chain
    read right after the load (``config.TPB`` -> ``("config", "TPB")``). Memoised: a code object
    never changes."""
    found: set[tuple[str, tuple[str, ...]]] = set()
    freevars = set(code.co_freevars)
    stack = [code]
    while stack:
        c = stack.pop()
        stack.extend(k for k in c.co_consts if isinstance(k, pytypes.CodeType))
        chain: list[str] | None = None
        kind = ""
        for ins in dis.get_instructions(c):
            if chain is not None and ins.opname in _CHAIN_OPS:
                chain.append(ins.argval)
                continue
            if chain is not None:
                found.add((kind, tuple(chain)))
                chain = None
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                kind, chain = "global", [ins.argval]
            elif ins.opname in ("LOAD_DEREF", "LOAD_CLASSDEREF") and ins.argval in freevars:
                kind, chain = "free", [ins.argval]
        if chain is not None:
            found.add((kind, tuple(chain)))
    return tuple(sorted(found))


def global_value(fn: pytypes.FunctionType, name: str):
    if name in fn.__globals__:
        return fn.__globals__[name]
    builtins = fn.__globals__.get("__builtins__", __builtins__)
    if isinstance(builtins, pytypes.ModuleType):
        builtins = builtins.__dict__
    return builtins.get(name, UNDEFINED)


def through_modules(value, attrs: tuple[str, ...]):
    """Follow ``attrs`` from ``value`` while it is a module; ``(object reached, attrs used)``.
    An attribute of anything else is read from that object's own encoding (``W.shape``)."""
    used = []
    for attr in attrs:
        if not isinstance(value, pytypes.ModuleType):
            break
        try:
            value = getattr(value, attr)
        except Exception:                              # noqa: BLE001 - lazy module attributes
            value = UNDEFINED
        used.append(attr)
    return value, tuple(used)


# -- naming library objects ---------------------------------------------------------------------

def _library_roots() -> tuple[str, ...]:
    roots = []
    # numba.cuda too: numba-cuda installs it from its own directory, and the package that
    # directory belongs to (numba_cuda) need not be imported.
    for pkg in (*LIBRARY_PACKAGES, "numba.cuda"):
        mod = sys.modules.get(pkg)
        path = getattr(mod, "__file__", None)
        if path:
            roots.append(os.path.dirname(os.path.abspath(path)) + os.sep)
    return tuple(roots)


def is_library_module(modname: str) -> bool:
    """A module of an installed library, judged by where its file is (not by its name: a user's
    module may be called ``numba.cuda.mine``)."""
    if modname in _BUILTIN_MODULES:
        return True
    mod = sys.modules.get(modname)
    path = getattr(mod, "__file__", None)
    if modname.split(".")[0] not in LIBRARY_PACKAGES or not path:
        return False
    return os.path.abspath(path).startswith(_library_roots())


def library_name(obj, fn: pytypes.FunctionType) -> tuple[str, str] | None:
    """The import path of ``obj`` (a function, or the dispatcher of ``fn``) when it is a
    library's: importable by that path, from a library module, its code in a library's files."""
    named = importable(obj)
    if named is None or not is_library_module(obj.__module__):
        return None
    return named if os.path.abspath(fn.__code__.co_filename).startswith(_library_roots()) else None


def importable(obj) -> tuple[str, str] | None:
    """``(module, qualname)`` when that path, in the modules already imported, leads back to
    ``obj`` itself (nested names too: ``atomic.add``)."""
    modname = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if not isinstance(modname, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    target = sys.modules.get(modname)
    try:
        for attr in qualname.split("."):
            target = getattr(target, attr, UNDEFINED)
    except Exception:                                  # noqa: BLE001 - a raising property
        return None
    return (modname, qualname) if target is obj else None


def is_dispatcher(obj) -> bool:
    """A Numba dispatcher (``njit``, ``cuda.jit``) or the CUDA simulator's fake kernel."""
    return isinstance(getattr(obj, "targetoptions", None), dict) or is_fake_kernel(obj)


def is_fake_kernel(obj) -> bool:
    module = sys.modules.get("numba.cuda.simulator.kernel")
    fake = getattr(module, "FakeCUDAKernel", None)
    return fake is not None and isinstance(obj, fake)


def dispatcher_options(obj) -> dict:
    """What a dispatcher compiles its function with: its options and, where it was declared
    with some, its signatures (a device function declared ``(int64, int64)`` casts what the
    kernel passes it, one declared ``(float64, float64)`` does not: different code)."""
    if is_fake_kernel(obj):
        # The simulator keeps only these (``FakeCUDAKernel.__init__``).
        return {"device": obj._device, "fastmath": obj._fastmath, "debug": obj._debug,
                "extensions": list(obj.extensions)}
    from .signatures import declared_signatures

    declared = declared_signatures(obj)
    if declared is None:
        return obj.targetoptions
    return {**obj.targetoptions, "declared signatures": list(declared.describe())}


def numba_type_name(obj) -> str | None:
    """``"<class>:<name>"`` of a Numba type (``numba.float32``), or of numba-cuda-mlir's copy
    of a Numba scalar type, which stands for Numba's own (``dialects.numba_scalar_type``), else
    None."""
    if is_mlir_scalar(obj):             # (checked by class name: imports nothing)
        obj = numba_scalar_type(obj)
    numba_types = sys.modules.get("numba.core.types")
    if numba_types is not None and isinstance(obj, numba_types.Type):
        return f"{type(obj).__qualname__}:{obj.name}"
    return None
