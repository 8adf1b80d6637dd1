"""Kernel entries: a kernel compiled by numba-cuda for one argument signature, or why not.

The CUDA mechanism's compile cache (``mechanism.py`` binds launches from it). Its *compile key*
is (kernel id, signature, options), the signature made of plain Python values per argument
(dtype, ndim and layout of a buffer, the type key of a tuple or record, the type of a scalar), so
a miss of the server's bound-launch cache never builds numba types. An entry remembers a compile
failure as well as a compiled kernel (CONTRACT.md 1.2 step 2), with the kernel's IO (which
parameters it reads and writes: ``resolve_access``, every parameter both where the analysis
fails).
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from ...errors import CompileError
from ...kernel.kernel import resolve_access
from ...runtime.composite import COMPOSITE_TYPES, analysis_entry
from ...runtime.handle import Binding
from .compiler import jit_options
from .driver import CudaError

__all__ = ["KernelEntry", "KernelEntries"]

log = logging.getLogger("numba_cube")


class KernelEntry(NamedTuple):
    """A kernel compiled for one argument signature (or why it did not compile), and its IO."""

    compiled: Any
    error: BaseException | None
    access: tuple


class KernelEntries:
    """The compile cache of one device: ``compiler`` (``compiler.py``), ``activate`` (numba-cuda
    pops its context when it is done), ``counters`` (the server's)."""

    def __init__(self, compiler, activate, counters, device: str):
        self.compiler = compiler
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
        key = (kid, sig, options)
        entry = self.compile_cache.get(key)
        if entry is not None:
            self._counters["cache_hits"] += 1
            return entry
        self._counters["compiles"] += 1
        if access is None:
            ndims = tuple(len(a.shape) if type(a) is Binding
                          else analysis_entry(a) if type(a) in COMPOSITE_TYPES else None
                          for a in args)
            try:
                access = resolve_access(kernel, ndims)
            except Exception:  # noqa: BLE001 - the analysis must never break a launch: assume all
                log.debug("IO analysis failed for %s", kernel.id, exc_info=True)
                access = tuple((n is not None, n is not None) for n in ndims)
        try:
            kernel.check_frozen()          # the caches are keyed by its id: nothing it covers moved
            jit = jit_options(kernel, dict(options))
            # The user's own dispatcher compiles exactly this when nothing differs from it: not the
            # dynamic-count wrapper (another function), not a client's overriding options.
            user_dispatcher = (kernel.dispatcher if py_func in (None, kernel.py_func)
                               and kernel.dispatcher is not None and jit == jit_options(kernel, {})
                               else None)
            compiled = self.compiler.compile((kid, options), py_func or kernel.py_func, kernel.name,
                                             args, jit, user_dispatcher)
            entry = KernelEntry(compiled, None, access)
        except CompileError as exc:
            entry = KernelEntry(None, exc, access)
        except CudaError as exc:
            err = CompileError(f"kernel {kernel.name} could not be loaded on {self._device}: {exc}")
            err.__cause__ = exc
            entry = KernelEntry(None, err, access)
        except Exception as exc:  # noqa: BLE001 - Numba's own errors are compile failures too
            err = CompileError.wrapping(
                f"kernel {kernel.name} failed to compile for CUDA: {type(exc).__name__}: {exc}", exc)
            entry = KernelEntry(None, err, access)
        finally:
            self._activate()   # numba-cuda pops its context when it is done
        self.compile_cache[key] = entry
        return entry
