"""The CUDA backend under numba-cuda's simulator: a ``HostBackend`` driven by ``DeviceServer``.

This is what ``cube.client("cuda")`` is when ``NUMBA_ENABLE_CUDASIM=1`` (CI has no GPU), and what a
separate plugin can register under another name (``make_simulator_server(index, "cudasim")``).
It runs the *same kernels* through the *same runtime* (gates, ledger, hazards, stream workers,
memory pool, capture); only the mechanism differs from the GPU's:

- compile: ``FakeCUDAKernel(py_func, device=False, fastmath=False)`` (works whether or not the
  simulator is enabled for ``numba.cuda`` itself); nothing is compiled, the Python function is
  interpreted at each dispatch, one Python thread per unit;
- dispatch: ``fake[count, dim](*views)`` with every array wrapped as a ``FakeCUDAArray`` over the
  NumPy view of our memory (no copy in, no copy back, so aliased arguments see each other's
  writes as on a GPU);
- an out-of-bounds index raises ``IndexError`` inside the simulated kernel: a launch failure
  recorded on the launch's write set, like any kernel error;
- what a real driver refuses (more than 1024 units per cube, a dimension above CUDA's limits) is
  refused here too, by the runtime's launch policy before the dispatch (``DeviceServer``, the same
  check on every backend: a ``LaunchArgumentError`` on the write set), so a test of refusals runs
  unchanged on the simulator and on a GPU;
- it accepts numba-cuda's compile options (``fastmath=...``: there is nothing to compile, so they
  change nothing), so code written for ``cube.client("cuda", ...)`` runs unchanged on it.

Two properties of the simulator shape this module:

- It runs one kernel at a time per process (its kernel context is a module global and it asserts
  there is no other), and a ``FakeCUDAKernel`` keeps its launch configuration in attributes. So
  every dispatch takes ``_SIMULATOR_LOCK``: streams still order and overlap their bookkeeping;
  only the simulated kernels are serialized.
- While a kernel runs, it swaps the ``cuda`` module for its fake in the *globals* of the kernel's
  function. Swapping the user's module globals would let a concurrent compile of another kernel
  of that module (by the CPU backend, on another thread) see the fake module. So each kernel runs
  as a copy of its function over a private copy of its globals, in which ``cuda.jit(device=True)``
  device functions are replaced by simulated ones (``_isolated``).
"""

from __future__ import annotations

import importlib
import threading
import types

import numpy as np

from ... import config
from ...runtime.channel import ThreadChannel
from ...runtime.composite import composite_bindings
from ...runtime.geometry import MAX_DYNAMIC_SHARED_BYTES
from ...runtime.handle import Allocation, Handle
from ...runtime.layout import byte_extent
from ...runtime.server import DeviceServer
from ..base import HostBackend
from .compiler import JIT_OPTIONS
from .driver import CudaError
from .interop import BorrowedEntry, BorrowedTable

__all__ = ["SimulatorBackend", "SimulatorServer", "make_simulator_server"]

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


def uses_grid_sync(fn, seen=None) -> bool:
    """Does ``fn`` (or a device function it reaches through its globals) ask for the grid group?
    Read from the names its code objects use: ``this_grid`` is how numba.cuda spells it."""
    seen = set() if seen is None else seen
    if id(fn) in seen:
        return False
    seen.add(id(fn))
    stack = [fn.__code__]
    while stack:
        code = stack.pop()
        if "this_grid" in code.co_names:
            return True
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        for name in code.co_names:
            value = fn.__globals__.get(name)
            py = getattr(value, "py_func", None)
            if isinstance(py, types.FunctionType) and uses_grid_sync(py, seen):
                return True
    return False


class SimulatorBackend(HostBackend):
    """Kernels on numba-cuda's CUDA simulator; memory as NumPy bytes."""

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

        fake = FakeCUDAKernel(_isolated(kernel.py_func, {}), device=False, fastmath=False)
        name = kernel.name
        grid_sync = uses_grid_sync(kernel.py_func)

        def run(count, dim, args, shared_bytes=0):
            if grid_sync and count[0] * count[1] * count[2] > 1:
                # The simulator's grid group syncs one block only (it runs cubes one after the
                # other), so a grid of several cubes would compute wrong values without an
                # error. Refuse it the way a driver refuses a cooperative grid it cannot host.
                raise CudaError("cuLaunchCooperativeKernel (simulated)", None,
                                "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
                                "too many blocks in cooperative launch",
                                f"{name} synchronizes its grid (cuda.cg.this_grid().sync()); the "
                                f"simulator runs such a kernel on one cube only")
            wrapped = [FakeCUDAArray(a) if isinstance(a, np.ndarray) and a.ndim > 0 else a for a in args]
            with _SIMULATOR_LOCK:
                # Always all four values: the fake kernel keeps its configuration in attributes,
                # so a launch without a size would inherit the previous launch's.
                fake[tuple(count), tuple(dim), 0, shared_bytes](*wrapped)

        return run


class SimulatorServer(DeviceServer):
    """``DeviceServer`` plus adoption of the simulator's "device arrays" (``FakeCUDAArray``, what
    ``numba.cuda.to_device`` returns under the simulator) as launch arguments, without copies.

    See ``interop.py`` for the contract; here foreign memory is host memory, so there is no
    stream to order after (the simulator runs everything synchronously)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.borrowed = BorrowedTable()
        self._borrowed_ids: set = set()

    # Seam used by Client._bind for arguments that are not Handles.
    def adopt_foreign(self, obj) -> Handle | None:
        ary = getattr(obj, "_ary", None)  # FakeCUDAArray
        if not isinstance(ary, np.ndarray) or not hasattr(obj, "__cuda_ndarray__"):
            return None
        return self.channel.call(self.op_adopt, obj, ary)

    def op_adopt(self, owner, ary: np.ndarray) -> Handle:
        """Bind ``ary`` (the simulator array's NumPy array) in place, with its strides (an
        F-ordered, transposed, strided or broadcast view, as numba's ufunc machinery makes):
        the borrowed memory is the whole NumPy buffer the view lies in, so every view of one
        array shares one memory id, as on the GPU."""
        from ...errors import LaunchArgumentError

        self.borrowed.maybe_sweep(self.hazards, self.ledger)
        root = ary
        while isinstance(root.base, np.ndarray):
            root = root.base
        if not _is_compact(root):
            # (a root that is itself a view of non-NumPy memory, laid out with gaps)
            root = ary
        if not _is_compact(root):
            raise LaunchArgumentError("a simulator device array whose memory is not one contiguous "
                                      "NumPy buffer cannot be bound: pass a copy")
        memory = root.ravel(order="K").view(np.uint8)     # compact: a view, lowest byte first
        base = memory.__array_interface__["data"][0] if memory.size else root.__array_interface__["data"][0]
        ptr = ary.__array_interface__["data"][0]
        low, high = byte_extent(ary.shape, ary.strides, ary.dtype.itemsize)
        if ary.size and (ptr + low < base or ptr + high > base + memory.nbytes):
            raise LaunchArgumentError(f"a simulator device array (shape {ary.shape}, strides "
                                      f"{ary.strides}) reaches outside the buffer that holds it")
        entry = self.borrowed.get(base)
        if entry is None:
            memory_id = next(self.memory_ids)
            self.memory[memory_id] = (memory.nbytes, memory)
            self._borrowed_ids.add(memory_id)
            entry = BorrowedEntry(memory_id, base, memory.nbytes, None)
            entry.allocation = Allocation(self, memory_id, memory.nbytes)
            self.borrowed.add(entry)
        self.borrowed.touch(entry, owner)
        return Handle(entry.allocation, ptr - base, ary.shape, ary.dtype, ary.strides)

    def op_launch(self, req, blocking=False):
        if self.borrowed:
            for a in composite_bindings(req.args):     # (arrays inside tuples too)
                self.borrowed.consume(a.memory_id)
        return super().op_launch(req, blocking)

    def drain_frees(self) -> None:
        # Borrowed ids never reach the pool: their bytes belong to another library.
        if self.pending_frees and self._borrowed_ids:
            for memory_id in [m for m in self.pending_frees if m in self._borrowed_ids]:
                self.pending_frees.remove(memory_id)
                self._borrowed_ids.discard(memory_id)
                self.memory.pop(memory_id, None)
                self._views.pop(memory_id, None)
                self.forget_bound_launches(memory_id)
                self.hazards.forget(memory_id)
                self.ledger.forget(memory_id)
                self.borrowed.forget_id(memory_id)
        super().drain_frees()


def _is_compact(ary: np.ndarray) -> bool:
    """Are ``ary``'s bytes one run (C or F order)? Then its ``ravel(order="K")`` is a view."""
    return ary.flags.c_contiguous or ary.flags.f_contiguous


def make_simulator_server(index: int, name: str = "cudasim") -> SimulatorServer:
    """The server of device ``<name>:<index>`` on the simulator: its own memory, streams and
    device thread (any index works, as with ``cpu``)."""
    # Fail here, with the reason, rather than at the first launch.
    importlib.import_module("numba.cuda.simulator.kernel")

    device = f"{name}:{index}"
    return SimulatorServer(device, SimulatorBackend(), ThreadChannel(device),
                           max_tasks=config.get_int("NUMBA_CUBE_MAX_TASKS", 32, 1))
