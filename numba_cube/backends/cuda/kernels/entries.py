"""Kernel entries: a kernel compiled by numba-cuda for one argument signature, or why not.

The CUDA mechanism's compile cache (``mechanism.py`` binds launches from it). Its *compile key*
is (kernel id, signature, options), the signature made of plain Python values per argument
(dtype, ndim and layout of a buffer, the type key of a tuple or record, the type of a scalar), so
a miss of the server's bound-launch cache never builds numba types. An entry remembers a compile
failure as well as a compiled kernel (CONTRACT.md 1.2 step 2), with the kernel's IO (which
parameters it reads and writes: ``resolve_access``, every parameter both where the analysis
fails).

The key also carries ``compiler.kernel_errors_mode()`` (``NUMBA_CUBE_CUDA_KERNEL_ERRORS``, read at
each lookup): a kernel that can raise compiles to other code with checking on than off.

A miss asks the on-disk cache (``diskcache.py``) before compiling, when the compiler can hand
back what it compiled (``compiler.image_of``): a hit loads the kernel and its IO answer without
numba-cuda or the IO analysis; a compile is kept there for the next process. The server's
``compiles`` counter counts the entries made here either way (so a dry run still "compiles" the
kernel its later launch finds); ``cuda_disk_cache_hits``, ``..._misses`` and
``..._uncacheable`` say where they came from.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from numba_cube.errors import CompileError
from numba_cube.kernel.kernel import resolve_access
from numba_cube.runtime.launch.composite import COMPOSITE_TYPES, analysis_entry
from numba_cube.runtime.memory.handle import Binding
from numba_cube.backends.cuda.kernels import diskcache
from numba_cube.backends.cuda.kernels.compiler import arg_kinds, jit_options, kernel_errors_mode
from numba_cube.backends.cuda.driver.errors import CudaError

__all__ = ["KernelEntry", "KernelEntries"]

log = logging.getLogger("numba_cube")


class KernelEntry(NamedTuple):
    """A kernel compiled for one argument signature (or why it did not compile), and its IO."""

    compiled: Any
    error: BaseException | None
    access: tuple


class KernelEntries:
    """The compile cache of one device: ``compiler`` (``compiler.py``), ``activate`` (numba-cuda
    pops its context when it is done), ``counters`` (the server's). The on-disk cache is the
    compiler's ``disk_cache()`` (None, or no such method: nothing is kept on disk)."""

    def __init__(self, compiler, activate, counters, device: str):
        self.compiler = compiler
        disk_cache = getattr(compiler, "disk_cache", None)
        self._disk = disk_cache() if disk_cache is not None else None
        self._activate = activate
        self._counters = counters
        self._device = device
        self.compile_cache: dict[tuple, KernelEntry] = {}   # compile key -> entry

    def entry(self, kernel, args: tuple, options: tuple, *, py_func=None, kid=None,
              access=None) -> KernelEntry:
        """The entry of ``kernel`` (or of ``py_func`` standing for it under id ``kid``: the
        device-count wrapper) for ``args`` (bindings, composites, scalars) and ``options``."""
        kid = kid or kernel.id
        sig = tuple((a.dtype, len(a.shape), a.layout) if type(a) is Binding
                    else a.type_key if type(a) in COMPOSITE_TYPES else type(a) for a in args)
        # Whether exceptions are recorded changes the code (compiler.kernel_errors_mode).
        errors = kernel_errors_mode()
        key = (kid, sig, options, errors)
        entry = self.compile_cache.get(key)
        if entry is not None:
            self._counters["cache_hits"] += 1
            return entry
        self._counters["compiles"] += 1
        try:
            kernel.check_frozen()          # the caches are keyed by its id: nothing it covers moved
            jit = jit_options(kernel, dict(options))
            # The user's own dispatcher compiles exactly this when nothing differs from it: not the
            # dynamic-count wrapper (another function), not a client's overriding options.
            user_dispatcher = (kernel.dispatcher if py_func in (None, kernel.py_func)
                               and kernel.dispatcher is not None and jit == jit_options(kernel, {})
                               else None)
            disk_key = self._disk_key(kernel, py_func, kid, sig,
                                      options + (("kernel_errors", errors),), args, jit,
                                      user_dispatcher)
            found = self._disk.load(disk_key, arg_kinds(args)) if disk_key is not None else None
            if found is not None:
                self._counters[diskcache.HITS] += 1
                compiled = found[0]
                access = access if access is not None else found[1]
            else:
                access = self._access(kernel, args, access)
                compiled = self.compiler.compile((kid, options), py_func or kernel.py_func,
                                                 kernel.name, args, jit, user_dispatcher,
                                                 kernel_errors=errors)
                if disk_key is not None:
                    self._keep(disk_key, kernel.name, compiled, access)
            entry = KernelEntry(compiled, None, access)
        except CompileError as exc:
            entry = KernelEntry(None, exc, self._access(kernel, args, access))
        except CudaError as exc:
            err = CompileError(f"kernel {kernel.name} could not be loaded on {self._device}: {exc}")
            err.__cause__ = exc
            entry = KernelEntry(None, err, self._access(kernel, args, access))
        except Exception as exc:  # noqa: BLE001 - Numba's own errors are compile failures too
            err = CompileError.wrapping(
                f"kernel {kernel.name} failed to compile for CUDA: {type(exc).__name__}: {exc}", exc)
            entry = KernelEntry(None, err, self._access(kernel, args, access))
        finally:
            self._activate()   # numba-cuda pops its context when it is done
        self.compile_cache[key] = entry
        return entry

    @staticmethod
    def _access(kernel, args: tuple, access) -> tuple:
        """``access`` if the caller gave it, else the kernel's IO answer for ``args``."""
        if access is not None:
            return access
        ndims = tuple(len(a.shape) if type(a) is Binding
                      else analysis_entry(a) if type(a) in COMPOSITE_TYPES else None
                      for a in args)
        try:
            return resolve_access(kernel, ndims)
        except Exception:  # noqa: BLE001 - the analysis must never break a launch: assume all
            log.debug("IO analysis failed for %s", kernel.id, exc_info=True)
            return tuple((n is not None, n is not None) for n in ndims)

    def _disk_key(self, kernel, py_func, kid, sig, options, args, jit, user_dispatcher):
        """The on-disk key of this compile, or None when it is not kept there (counted)."""
        if self._disk is None:
            return None          # a compiler that hands back no image: nothing to count
        key = None
        try:
            reason = diskcache.refusal(kernel, args, jit, user_dispatcher)
            if reason is None:
                key = diskcache.entry_key(kid, sig, options, jit, self._disk.device_facts(),
                                          py_func or kernel.py_func)
        except Exception as exc:  # noqa: BLE001 - the disk cache must never fail a launch
            reason = f"its key cannot be made: {type(exc).__name__}: {exc}"
        if key is None:
            log.debug("numba_cube: %s is not kept on disk: %s", kid, reason or "no stable key (an option without a stable text form, or "
                      "numba_cube's sources unreadable)")
            self._counters[diskcache.UNCACHEABLE] += 1
        return key

    def _keep(self, disk_key: str, name: str, compiled, access: tuple) -> None:
        """Write the compile to disk (a miss), unless the compiler says it cannot be loaded from
        there (uncacheable: only known once numba-cuda compiled it, a debug kernel say)."""
        try:
            image = self.compiler.image_of(compiled)
        except Exception as exc:  # noqa: BLE001 - the kernel compiled: keeping it is a bonus
            image = f"its image cannot be read: {type(exc).__name__}: {exc}"
        if isinstance(image, str):
            log.debug("numba_cube: %s is not kept on disk: %s", name, image)
            self._counters[diskcache.UNCACHEABLE] += 1
            return
        self._counters[diskcache.MISSES] += 1
        self._disk.store(disk_key, name, compiled, image, access)
