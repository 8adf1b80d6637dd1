"""The ``cudasim`` backend's own mechanism (used where numba_cube has no
``numba_cube.backends.cuda.simulator``): a ``HostBackend`` whose "compiled" kernel is numba-cuda's
``FakeCUDAKernel``, driven by numba_cube's ``HostServer`` like the CPU backend.

Memory is NumPy bytes, as on the CPU backend; a dispatch is ``fake_kernel[count, dim](*views)``,
each view wrapped as the simulator's ``FakeCUDAArray`` so that the kernel works on our memory in
place (the simulator would otherwise copy each array in and back out, and two arguments that
alias one buffer would not see each other's writes, as they do on a GPU).
The simulator runs every CUDA thread of a block as a Python thread and indexes arrays through
NumPy, so an out-of-bounds index raises ``IndexError`` (with the thread and block indices) inside
the kernel; the runtime records it on the launch's write set like any kernel failure.

Two properties of the simulator shape this module:

- One simulated kernel at a time per process (the simulator keeps its kernel context in a module
  global and asserts there is no other). Stream workers run concurrently, so every dispatch takes
  ``_SIMULATOR_LOCK``: streams still order and overlap their bookkeeping, only the kernels
  themselves are serialized. This is a debugging backend; correctness over speed.
- The simulator swaps the real ``cuda`` module for its fake one in the kernel function's
  *globals* while it runs. Swapping the user's module globals would let a concurrent CPU-backend
  compile of another kernel from the same module see the fake module; so each kernel runs as a
  copy of its function over a private copy of its globals, in which ``cuda.jit(device=True)``
  device functions are replaced by simulated ones (``_isolated``).
"""

from __future__ import annotations

import threading
import types

import numpy as np

from numba_cube import config
from numba_cube.backends.base import HostBackend
from numba_cube.runtime.channel import ThreadChannel
from numba_cube.runtime.memory import ALIGNMENT
from numba_cube.runtime.server import HostServer

__all__ = ["SimulatorBackend", "make_simulator_server"]

_SIMULATOR_LOCK = threading.Lock()


def _is_device_function(value) -> bool:
    """A real ``cuda.jit(device=True)`` dispatcher (not callable from Python as it is)."""
    options = getattr(value, "targetoptions", None)
    return isinstance(options, dict) and bool(options.get("device")) and callable(getattr(value, "py_func", None))


def _isolated(fn, memo: dict):
    """``fn`` over a private copy of its globals, device functions simulated, recursively.

    ``memo`` maps a module's globals dict to its copy; it is filled in *before* the copy's
    device functions are rebuilt, so mutually recursive and same-module device functions share
    one copy and the recursion ends.
    """
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    key = id(fn.__globals__)
    private = memo.get(key)
    if private is None:
        private = memo[key] = dict(fn.__globals__)
        for name, value in list(private.items()):
            if _is_device_function(value):
                private[name] = FakeCUDAKernel(_isolated(value.py_func, memo), device=True)
    copy = types.FunctionType(fn.__code__, private, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    copy.__module__ = fn.__module__
    return copy


class SimulatorBackend(HostBackend):
    """Kernels on numba-cuda's CUDA simulator; memory as NumPy bytes."""

    name = "cudasim"

    def allocate(self, nbytes: int) -> np.ndarray:
        # Over-allocate and slice so every buffer starts on the pool alignment (the runtime's
        # compile-cache key includes the alignment of each view).
        raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
        shift = (-raw.ctypes.data) % ALIGNMENT
        return raw[shift:shift + nbytes]

    def array(self, memory, offset, shape, dtype) -> np.ndarray:
        nbytes = dtype.itemsize
        for s in shape:
            nbytes *= s
        return memory[offset:offset + nbytes].view(dtype).reshape(shape)

    def arg_type(self, value):
        if isinstance(value, np.ndarray):
            return ("array", value.dtype.str, value.ndim)
        return ("scalar", type(value).__name__)

    def compile(self, kernel, arg_types, extras, options):
        # Nothing is compiled: the simulator interprets the Python function at each dispatch.
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        fake = FakeCUDAKernel(_isolated(kernel.py_func, {}), device=False, fastmath=False)

        def run(count, dim, args):
            wrapped = [FakeCUDAArray(a) if isinstance(a, np.ndarray) and a.ndim > 0 else a for a in args]
            with _SIMULATOR_LOCK:
                fake[tuple(count), tuple(dim)](*wrapped)

        return run


def make_simulator_server(index: int, name: str = "cudasim") -> HostServer:
    """The server of device ``<name>:<index>``: its own memory, streams and device thread."""
    import numba.cuda.simulator.kernel  # noqa: F401 - fail here, with the reason, not at first launch

    device = f"{name}:{index}"
    rule = config.get_str("NUMBA_CUBE_DEPENDENCY_RULE", "hazard", ("hazard", "baseline"))
    return HostServer(device, SimulatorBackend(), ThreadChannel(device),
                      max_tasks=config.get_int("NUMBA_CUBE_MAX_TASKS", 32, 1),
                      baseline_rule=(rule == "baseline"))
