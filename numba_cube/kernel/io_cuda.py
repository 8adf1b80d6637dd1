"""numba.cuda's own builtins, recognised by identity and named by their path, for the IO analysis.

The analysis treats a numba.cuda builtin (``cuda.grid``, ``cuda.atomic.add``, ``cuda.stcg``,
libdevice) by the rule of its *path* (``"atomic.add"``, ``"stcg"``, ``"libdevice.sin"``;
``io_rules``) instead of analysing it, so it must not take a user's device function for one: a
function in a module that merely *calls itself* ``numba.cuda.something`` would have its writes
missed (a silently stale buffer). So a builtin is an object reachable from the real
``numba.cuda`` package as it is imported (its attributes, the members of its stub classes such as
``atomic.add``, and the API namespaces ``libdevice``, ``cg``, ``fp16``, ``bf16``), or, under
numba-cuda's simulator, a method of one of the simulator's fake API classes. Its path is where it
was found, not its ``__qualname__`` (``fp16.hadd`` calls itself ``__hadd``). Not the
``numba.cuda.random`` generators: they update their state array, and are analysed like any
device function.
"""

from __future__ import annotations

import sys
import threading
import types as pytypes

from numba_cube.kernel import dialects

__all__ = ["cuda_path", "is_cuda_object", "namespace_prefix"]

#: submodules of numba.cuda that are part of its kernel API (not ``random``: see the docstring);
#: numba-cuda-mlir makes ``shared``, ``local`` and ``const`` modules too (numba.cuda: classes)
_API_NAMESPACES = ("libdevice", "cg", "fp16", "bf16", "shared", "local", "const")
_PACKAGE_NAMES = dialects.CUDA_MODULE_NAMES
_SIMULATOR_API = "numba.cuda.simulator.kernelapi"
# The simulator's fake API classes, by the namespace each one stands for ("" is numba.cuda).
_SIMULATOR_CLASSES = {"FakeCUDAModule": "", "FakeCUDAAtomic": "atomic.", "FakeCUDAConst": "const.",
                      "FakeCUDALocal": "local.", "FakeCUDAShared": "shared.",
                      "FakeCUDAFp16": "fp16.", "FakeCUDACg": "cg."}

_lock = threading.Lock()
_cache: dict = {"stamp": None, "table": {}}


def namespace_prefix(obj) -> str | None:
    """``""`` for the numba.cuda package, ``"libdevice."`` (...) for one of its API namespaces,
    None for anything else (by identity)."""
    for mod, prefix in _namespaces():
        if obj is mod:
            return prefix
    return None


def is_cuda_object(obj) -> bool:
    """Whether ``obj`` is one of numba.cuda's builtins (see the module docstring)."""
    return cuda_path(obj) is not None


def cuda_path(obj) -> str | None:
    """The dotted path of a numba.cuda builtin below ``numba.cuda`` (``"atomic.add"``), or
    None when ``obj`` is not one."""
    hit = _table().get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    simulator = sys.modules.get(_SIMULATOR_API)
    if simulator is None:
        return None
    owner = getattr(obj, "__self__", obj)            # a bound method of a fake API object
    cls = owner if isinstance(owner, type) else type(owner)
    prefix = _SIMULATOR_CLASSES.get(cls.__name__)
    if prefix is None or getattr(simulator, cls.__name__, None) is not cls \
            or cls.__module__ != _SIMULATOR_API or owner is obj:
        return None
    return prefix + getattr(obj, "__name__", "?")


def _namespaces() -> list[tuple[pytypes.ModuleType, str]]:
    mods: list[tuple[pytypes.ModuleType, str]] = []
    for name in _PACKAGE_NAMES:
        mod = sys.modules.get(name)
        if mod is not None and all(mod is not m for m, _ in mods):
            mods.append((mod, ""))
    for pkg, _ in list(mods):
        for name in _API_NAMESPACES:
            sub = pkg.__dict__.get(name)
            # Under the simulator, numba.cuda.bf16 is the simulator's module of that name;
            # numba-cuda-mlir keeps cg in its copy of numba-cuda.
            if isinstance(sub, pytypes.ModuleType) and sub.__name__ in (
                    f"{pkg.__name__}.{name}", f"{pkg.__name__}.simulator.{name}",
                    f"numba_cuda_mlir.numba_cuda.{name}"):
                mods.append((sub, name + "."))
    return mods


def _table() -> dict[int, tuple[object, str]]:
    """id -> (object, path) for every builtin; rebuilt when a namespace gains attributes
    (numba.cuda imports some lazily). Objects are kept in the table, so their ids are not
    recycled. An object reachable by two paths keeps the first (numba.cuda's own first)."""
    namespaces = _namespaces()
    stamp = tuple((id(m), len(m.__dict__)) for m, _ in namespaces)
    if _cache["stamp"] == stamp:
        return _cache["table"]
    with _lock:
        table: dict[int, tuple[object, str]] = {}
        for mod, prefix in namespaces:
            for name, value in list(mod.__dict__.items()):
                if name.startswith("_") or isinstance(value, pytypes.ModuleType):
                    continue
                if _defined_in_cuda(value):
                    table.setdefault(id(value), (value, prefix + name))
                    if isinstance(value, type):        # stub classes: atomic.add, shared.array
                        for member_name, member in vars(value).items():
                            if not member_name.startswith("_") and (
                                    isinstance(member, type) or callable(member)):
                                table.setdefault(id(member),
                                                 (member, f"{prefix}{name}.{member_name}"))
        _cache["stamp"], _cache["table"] = stamp, table
        return table


def _defined_in_cuda(value) -> bool:
    """numba.cuda's own objects among its attributes, not what it re-exports (``numba.float64``
    as ``cuda.double``, NumPy): those are not builtins with a CUDA rule."""
    return dialects.defined_in_cuda(value)
