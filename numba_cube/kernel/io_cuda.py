"""numba.cuda's own builtins, recognised by identity, for the IO analysis.

The analysis treats a numba.cuda builtin (``cuda.grid``, ``cuda.atomic.add``, ``shfl_sync``,
libdevice) by a rule instead of analysing it, so it must not take a user's device function for
one: a function in a module that merely *calls itself* ``numba.cuda.something`` would have its
writes missed (a silently stale buffer). So a builtin is an object reachable from the real
``numba.cuda`` package as it is imported (its attributes, the members of its stub classes such as
``atomic.add``, and the API namespaces ``libdevice``, ``cg``, ``fp16``, ``bf16``), or, under
numba-cuda's simulator, a method of one of the simulator's fake API classes. Not the
``numba.cuda.random`` generators: they update their state array, and are analysed like any
device function.
"""

from __future__ import annotations

import sys
import threading
import types as pytypes

__all__ = ["is_cuda_object", "is_cuda_namespace"]

#: submodules of numba.cuda that are part of its kernel API (not ``random``: see the docstring)
_API_NAMESPACES = ("libdevice", "cg", "fp16", "bf16")
_PACKAGE_NAMES = ("numba.cuda", "numba_cuda.numba.cuda")
_SIMULATOR_API = "numba.cuda.simulator.kernelapi"

_lock = threading.Lock()
_cache: dict = {"stamp": None, "table": {}}


def is_cuda_namespace(obj) -> bool:
    """Whether ``obj`` is the numba.cuda package or one of its API namespaces (by identity)."""
    return any(obj is mod for mod in _namespaces())


def is_cuda_object(obj) -> bool:
    """Whether ``obj`` is one of numba.cuda's builtins (see the module docstring)."""
    hit = _table().get(id(obj))
    if hit is not None and hit is obj:
        return True
    simulator = sys.modules.get(_SIMULATOR_API)
    if simulator is None:
        return False
    owner = getattr(obj, "__self__", obj)            # a bound method of a fake API object
    cls = owner if isinstance(owner, type) else type(owner)
    return getattr(simulator, cls.__name__, None) is cls and cls.__module__ == _SIMULATOR_API


def _namespaces() -> list[pytypes.ModuleType]:
    mods = []
    for name in _PACKAGE_NAMES:
        mod = sys.modules.get(name)
        if mod is not None and all(mod is not m for m in mods):
            mods.append(mod)
    for pkg in list(mods):
        for name in _API_NAMESPACES:
            sub = pkg.__dict__.get(name)
            if isinstance(sub, pytypes.ModuleType) and sub.__name__ == f"{pkg.__name__}.{name}":
                mods.append(sub)
    return mods


def _table() -> dict[int, object]:
    """id -> object for every builtin; rebuilt when a namespace gains attributes (numba.cuda
    imports some lazily). Objects are kept in the table, so their ids are not recycled."""
    namespaces = _namespaces()
    stamp = tuple((id(m), len(m.__dict__)) for m in namespaces)
    if _cache["stamp"] == stamp:
        return _cache["table"]
    with _lock:
        table: dict[int, object] = {}
        for mod in namespaces:
            for name, value in list(mod.__dict__.items()):
                if name.startswith("_") or isinstance(value, pytypes.ModuleType):
                    continue
                if _defined_in_cuda(value):
                    table[id(value)] = value
                    if isinstance(value, type):        # stub classes: atomic.add, shared.array
                        for member in vars(value).values():
                            if isinstance(member, type) or callable(member):
                                table[id(member)] = member
        _cache["stamp"], _cache["table"] = stamp, table
        return table


def _defined_in_cuda(value) -> bool:
    """numba.cuda's own objects among its attributes, not what it re-exports (``numba.float64``
    as ``cuda.double``, NumPy): those are not builtins with a CUDA rule."""
    owner = getattr(value, "__module__", None)
    return isinstance(owner, str) and (owner == "numba.cuda" or owner.startswith(
        ("numba.cuda.", "numba_cuda.")))
