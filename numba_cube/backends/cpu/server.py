"""The CPU backend's mechanism: memory as NumPy bytes, kernels as generated ``njit`` functions.

Compiling has two levels. ``build_program`` translates a kernel once per (kernel, boundscheck)
into a generated module holding a ``parallel`` (prange over cubes) and a ``serial`` twin; then
each argument signature is compiled explicitly with ``dispatcher.compile(sig)``, which is what a
dry run needs (compile without running) and gives the entry point for that signature directly, so
a launch skips Numba's type dispatch.

Which twin a launch uses is decided from the static count (``cache_extras``): small grids run the
serial twin, because a parallel region's fork/join has a floor of its own (8 ms per call with
libgomp's default wait policy on a 2-core VM, research/cpu-kernels.md section 6).

Threading layer: stream workers call parallel kernels from several Python threads at once.
Numba's ``workqueue`` layer aborts the process when that happens, so this backend selects ``omp``
(or ``tbb``) before the first parallel call, and refuses to start, with the reason, when neither
can be loaded.
"""

from __future__ import annotations

import logging
import os
import threading

import numba
import numpy as np
from numba import types

from ... import config
from ...errors import CompileError
from ...runtime.channel import ThreadChannel
from ...runtime.server import HostServer
from ..base import HostBackend

__all__ = ["CpuBackend", "make_cpu_server", "select_threading_layer"]

log = logging.getLogger("numba_cube")

_layer_lock = threading.Lock()
_layer: str | None = None


def select_threading_layer() -> str:
    """Pick a threading layer that tolerates concurrent callers; idempotent."""
    global _layer
    with _layer_lock:
        if _layer is not None:
            return _layer
        wanted = os.environ.get("NUMBA_THREADING_LAYER", "").lower()
        if wanted == "workqueue":
            raise RuntimeError("NUMBA_THREADING_LAYER=workqueue aborts the process when two streams run "
                               "parallel kernels at once; use 'omp' or 'tbb' with numba_cube")
        candidates = [wanted] if wanted in ("omp", "tbb") else ["omp", "tbb"]
        for name in candidates:
            try:
                if name == "omp":
                    from numba.np.ufunc import omppool  # noqa: F401 - loads libgomp or fails
                else:
                    from numba.np.ufunc import tbbpool  # noqa: F401
            except ImportError as exc:
                log.debug("threading layer %s unavailable: %s", name, exc)
                continue
            numba.config.THREADING_LAYER = name
            _layer = name
            return name
        raise RuntimeError("neither Numba's 'omp' nor 'tbb' threading layer can be loaded (libgomp "
                           "missing; `pip install tbb` provides the other): numba_cube's CPU backend "
                           "needs one that allows concurrent parallel calls")


_ARRAY_TYPES: dict = {}


def _array_type(dtype: np.dtype, ndim: int):
    key = (dtype, ndim)
    t = _ARRAY_TYPES.get(key)
    if t is None:
        t = _ARRAY_TYPES[key] = types.Array(numba.from_dtype(dtype), ndim, "C")
    return t


class CpuBackend(HostBackend):
    name = "cpu"

    def __init__(self):
        self._programs: dict = {}
        # Read once: cache_extras runs on every launch.
        self.serial_units = config.get_int("NUMBA_CUBE_SERIAL_UNITS", 32768, 0)



    def arg_type(self, value):
        if isinstance(value, np.ndarray):
            return _array_type(value.dtype, value.ndim)
        return numba.typeof(value)

    def cache_extras(self, count, dim) -> tuple:
        if count.is_dynamic:
            return ("parallel",)
        units = count.num_elems * dim.num_elems
        serial = count.num_elems == 1 or units < self.serial_units
        return ("serial" if serial else "parallel",)

    def _program(self, kernel, boundscheck: bool):
        key = (kernel.id, boundscheck)
        prog = self._programs.get(key)
        if prog is None:
            from .translate import build_program

            prog = self._programs[key] = build_program(kernel.py_func, boundscheck=boundscheck)
        return prog

    def compile(self, kernel, arg_types, extras, options):
        prog = self._program(kernel, bool(options.get("boundscheck", False)))
        dispatcher = prog.serial if extras[0] == "serial" else prog.parallel
        sig = (types.int64,) * 6 + tuple(arg_types)
        try:
            entry = dispatcher.compile(sig)
        except CompileError:
            raise
        except Exception as exc:
            err = CompileError(f"kernel {kernel.name} does not compile for arguments "
                               f"({', '.join(map(str, arg_types))}): {type(exc).__name__}: {exc}")
            raise err from exc
        if not callable(entry):
            entry = dispatcher

        def run(count, dim, args):
            entry(count[0], count[1], count[2], dim[0], dim[1], dim[2], *args)

        run.program = prog
        return run


def make_cpu_server(index: int) -> HostServer:
    select_threading_layer()
    rule = config.get_str("NUMBA_CUBE_DEPENDENCY_RULE", "hazard", ("hazard", "baseline"))
    device = f"cpu:{index}"
    return HostServer(device, CpuBackend(), ThreadChannel(device),
                      max_tasks=config.get_int("NUMBA_CUBE_MAX_TASKS", 32, 1),
                      baseline_rule=(rule == "baseline"))
