"""Numba's cache of numba_cube's own nopython helpers, signed like the generated code's.

Generated kernels call helpers defined in numba_cube itself (``kernel_runtime/warps.py``,
``kernel_runtime/scans.py``), ``@njit(cache=True)``. Their cache matters: compiling them costs seconds in
every process that compiles a new kernel using them (measured: 3-9 s more for a first warp
kernel on a 2-core host, the helpers' ~6 overloads), and a kernel's own cached code, once there,
does not need them. But Numba keeps that cache unsigned, where its locators say
(``NUMBA_CACHE_DIR``, possibly a shared directory, or beside the package), and unpickles what it
finds there: a pickle planted in ``NUMBA_CACHE_DIR`` ran when a warp kernel compiled.

So each helper module ends with ``sign_helpers(globals())``, which gives every ``cache=True``
dispatcher it defines a ``HelperCache``: ``numba_cache.AuthenticatedCache`` (files signed with this
user's key, verified before unpickling, in ``<cache dir>/__pycache__``) stamped with the SHA-256
of the helper module's text, in the cache directory current at each compile
(``config.cache_root()``, which a process may change and which refuses directories that are not
private). Numba's own locations are never read. A cache that cannot be used is a miss.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from pathlib import Path

from numba.core.caching import NullCache
from numba.core.dispatcher import Dispatcher

from numba_cube import config
from numba_cube.backends.cpu.cache.numba_cache import AuthenticatedCache

__all__ = ["sign_helpers", "HelperCache"]


def sign_helpers(namespace: dict) -> None:
    """Give every ``cache=True`` dispatcher defined in the module whose globals are ``namespace``
    a ``HelperCache`` instead of Numba's. Called last in that module, so nothing has compiled
    (nor read Numba's cache) yet: decorating only defines."""
    module = sys.modules[namespace["__name__"]]
    try:
        stamp = hashlib.sha256(inspect.getsource(module).encode("utf-8")).digest()
    except (OSError, TypeError):
        stamp = None                        # no source to stamp the files with: no disk cache
    for value in list(namespace.values()):
        if not (isinstance(value, Dispatcher) and value.py_func.__globals__ is namespace
                and value.stats.cache_path is not None):
            continue                        # imported from elsewhere, or not cache=True
        if value.overloads:
            raise RuntimeError(f"internal error: helper {value.py_func.__name__} was compiled "
                               "before numba_cube could verify its cache")
        value._cache = NullCache() if stamp is None else HelperCache(value.py_func, stamp)


class HelperCache:
    """What a Numba dispatcher asks of its cache (``load_overload``, ``save_overload``,
    ``flush``, ``cache_path``), answered by an ``AuthenticatedCache`` of the current cache
    directory; a directory that cannot be used (``OSError``) is a miss, never a failure."""

    def __init__(self, py_func, source_stamp: bytes):
        self._py_func = py_func
        self._stamp = source_stamp
        self._by_root: dict[Path, AuthenticatedCache] = {}

    def _current(self) -> AuthenticatedCache:
        root = config.cache_root()
        cache = self._by_root.get(root)
        if cache is None:
            cache = self._by_root[root] = AuthenticatedCache(self._py_func, root, self._stamp)
        return cache

    @property
    def cache_path(self) -> str | None:
        try:
            return self._current()._cache_path
        except OSError:
            return None

    def load_overload(self, sig, target_context):
        try:
            cache = self._current()
        except OSError:
            return None
        return cache.load_overload(sig, target_context)     # (a failed read is a miss there)

    def save_overload(self, sig, data) -> None:
        try:
            self._current().save_overload(sig, data)
        except OSError:
            pass                            # disk full, read-only: the helper works, uncached

    def flush(self) -> None:
        try:
            self._current().flush()
        except OSError:
            pass
