"""The ``cudasim`` backend: numba.cuda kernels on numba-cuda's simulator, as a ``HostBackend``.

This is the mechanism only; the policy (gates, launch modes, compile cache, read and write sets,
the failure ledger, streams and inferred dependencies, capture, borrowed memory) is numba_cube's
``DeviceServer``, the same as for the CPU backend. It is also what ``cube.client("cuda")`` is under
``NUMBA_ENABLE_CUDASIM=1``: numba_cube's ``cuda`` backend then builds its server through this
plugin's factory (``make_simulator_server(index, "cuda")``).

- compile: ``FakeCUDAKernel(py_func, device=False, fastmath=False)`` (works whether or not the
  simulator is enabled for ``numba.cuda`` itself); nothing is compiled, the Python function is
  interpreted at each dispatch, one Python thread per unit;
- dispatch: ``fake[count, dim, 0, shared_bytes](*views)`` with every array wrapped as a
  ``FakeCUDAArray`` over the NumPy view of numba_cube's memory (no copy in, no copy back, so
  aliased arguments see each other's writes as on a GPU);
- an out-of-bounds index raises ``IndexError`` inside the simulated kernel: a launch failure
  recorded on the launch's write set, like any kernel error;
- what a real driver refuses (more than 1024 units per cube, a dimension above CUDA's limits) is
  refused by the runtime before the dispatch, the same check on every backend, so a test of
  refusals runs unchanged on the simulator and on a GPU; a grid-synchronizing kernel on more than
  one cube is refused here, as a driver refuses a cooperative grid it cannot host (the
  simulator's grid group syncs one block only);
- it accepts numba-cuda's compile options (``fastmath=...``: there is nothing to compile, so they
  change nothing), so code written for ``cube.client("cuda", ...)`` runs unchanged on it;
- foreign memory: a simulator "device array" (``FakeCUDAArray``, what ``numba.cuda.to_device``
  returns under the simulator) passed as a launch argument is bound in place, without a copy
  (``foreign_memory``; the runtime's ``runtime/memory/borrowed.py`` does the rest).

The simulator runs one kernel at a time per process (its kernel context is a module global and
it asserts there is no other), and a ``FakeCUDAKernel`` keeps its launch configuration in
attributes. So every dispatch takes ``SIMULATOR_LOCK``: streams still order and overlap their
bookkeeping; only the simulated kernels are serialized.
"""

from __future__ import annotations

import importlib
import threading

import numpy as np

from numba_cube import config
from numba_cube.backends.base import HostBackend
from numba_cube.backends.cuda.kernels.compiler import JIT_OPTIONS
from numba_cube.backends.cuda.driver.errors import CudaError
from numba_cube.runtime.memory.borrowed import describe_host_array
from numba_cube.runtime.streams.channel import ThreadChannel
from numba_cube.runtime.launch.geometry import MAX_DYNAMIC_SHARED_BYTES
from numba_cube.runtime.server import DeviceServer

from .isolation import isolated, uses_grid_sync

__all__ = ["SIMULATOR_LOCK", "SimulatorBackend", "make_simulator_server"]

#: Held by every simulated kernel while it runs (see the module docstring).
SIMULATOR_LOCK = threading.Lock()


class SimulatorBackend(HostBackend):
    """Kernels on numba-cuda's CUDA simulator; memory as NumPy bytes (HostBackend's defaults)."""

    name = "cudasim"
    compile_options = frozenset(("boundscheck",) + JIT_OPTIONS)
    #: the simulator allocates any size; the portable limit keeps it to what some GPU can run
    max_dynamic_shared_bytes = MAX_DYNAMIC_SHARED_BYTES

    def arg_type(self, value):
        if isinstance(value, np.ndarray):
            layout = "C" if value.flags.c_contiguous else "F" if value.flags.f_contiguous else "A"
            return ("array", value.dtype.str, value.ndim, layout)
        return ("scalar", type(value).__name__)

    def compile(self, kernel, arg_types, extras, options):
        # Nothing is compiled: the simulator interprets the Python function at each dispatch.
        # It still must not run changed globals under the id of the old ones (caches key on it).
        kernel.check_frozen()
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        fake = FakeCUDAKernel(isolated(kernel.py_func, {}), device=False, fastmath=False)
        name = kernel.name
        grid_sync = uses_grid_sync(kernel.py_func)

        def run(count, dim, args, shared_bytes=0):
            if grid_sync and count[0] * count[1] * count[2] > 1:
                # The simulator would sync one cube at a time: wrong values, without an error.
                raise CudaError("cuLaunchCooperativeKernel (simulated)", None,
                                "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
                                "too many blocks in cooperative launch",
                                f"{name} synchronizes its grid (cuda.cg.this_grid().sync()); the "
                                f"simulator runs such a kernel on one cube only")
            wrapped = [FakeCUDAArray(a) if isinstance(a, np.ndarray) and a.ndim > 0 else a for a in args]
            with SIMULATOR_LOCK:
                # Always all four values: the fake kernel keeps its configuration in attributes,
                # so a launch without a size would inherit the previous launch's.
                fake[tuple(count), tuple(dim), 0, shared_bytes](*wrapped)

        return run

    def foreign_memory(self, obj):
        # A FakeCUDAArray wraps a NumPy array (``_ary``, which numba-cuda offers no public
        # accessor for: ``copy_to_host`` copies); anything else is not ours to adopt.
        ary = getattr(obj, "_ary", None)
        if not isinstance(ary, np.ndarray) or not hasattr(obj, "__cuda_ndarray__"):
            return None
        return describe_host_array(ary, "a simulator device array")


def make_simulator_server(index: int, name: str = "cudasim") -> DeviceServer:
    """The server of device ``<name>:<index>`` on the simulator: its own memory, streams and
    device thread (any index works, as with ``cpu``)."""
    # Fail here, with the reason, rather than at the first launch.
    importlib.import_module("numba.cuda.simulator.kernel")

    device = f"{name}:{index}"
    return DeviceServer(device, SimulatorBackend(), ThreadChannel(device),
                      max_tasks=config.get_int("NUMBA_CUBE_MAX_TASKS", 32, 1))
