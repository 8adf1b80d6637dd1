"""``CudaMechanism``: the CUDA backend's ``DeviceMechanism``, which the policy server drives.

The policy (``runtime/server.py``: the launch steps, the ledger's execute scope, capture windows,
reads, sync and check bookkeeping, exclusive use, the memory table and pool) is the runtime's, the
same as every backend's. This module answers its hooks (``backends/base.py``) by composing the
CUDA parts, each with its dependencies given to its constructor:

- ``CudaContext`` (``context.py``): the primary context made current, faults;
- ``DeviceAllocator`` and ``PinnedPool`` (``memory.py``) under the server's pool, and
  ``DeviceCopies`` (``copies.py``): ``create``, ``write`` and ``read``;
- ``CudaStreams`` (``streams/executor.py``), the executor: a task runs at once, on the CUDA stream of its
  stream id, after device-side event waits for its dependencies;
- ``KernelEntries`` (``kernels/entries.py``): numba-cuda compiles once per signature; a *bound
  launch* (``CudaBoundLaunch``, made by ``bound_launch.py``) holds the kernel as a ``PackedLaunch`` (``packed_launch.py``: the
  buffers' pointers, shapes and strides packed once) with its read and write sets;
- ``WarmPath`` (``fast_path.py``): a launch that repeats an earlier one skips all of the above but
  the dependency check and the driver call (the client calls it first);
- ``ErrorSlots`` (``error_slots.py``): the error words of launches of kernels that can raise
  (``exception_codegen.py``), checked when their buffers are read, never by a wait per launch;
- ``DynamicCounts`` (``dynamic.py``): the device-count kernel where the kernel allows it, else a
  blocking 12-byte read-back;
- ``CudaInterop`` (``interop.py``): ``__cuda_array_interface__`` export, adoption of foreign arrays;
  ``DLPackExporter`` (``dlpack_export.py``): the DLPack export;
- ``CudaGraph`` (``graphs.py``): hardware CUDA graphs from capture windows;
- ``LaunchRanges`` (``nvtx.py``): NVTX ranges named after the kernels, when ``NUMBA_CUBE_NVTX`` is on.

The channel is an ``InlineChannel`` (``server.py``): server operations run on the issuing thread
under the device lock, since a launch is a ~4 us asynchronous driver call and a hop to a device
thread would cost more than that.
"""

from __future__ import annotations

import time

import numpy as np

from ... import config
from ...errors import LaunchArgumentError
from numba_cube.runtime.client import observers
from numba_cube.runtime.launch.dispatch import Recorded
from numba_cube.runtime.memory.handle import Binding
from numba_cube.runtime.launch.requests import refusal_of
from ..base import DeviceMechanism
from numba_cube.backends.cuda.launch.bound_launch import (
    CudaBoundLaunch, bind_launch, bound_launch_key,
)
from numba_cube.backends.cuda.kernels.compiler import JIT_OPTIONS
from numba_cube.backends.cuda.driver.context import CudaContext
from numba_cube.backends.cuda.memory.copies import DeviceCopies
from numba_cube.backends.cuda.memory.dlpack_export import DLPackExporter
from numba_cube.backends.cuda.driver.driver import Driver
from numba_cube.backends.cuda.driver.errors import CudaError
from numba_cube.backends.cuda.launch.dynamic import DynamicCounts
from numba_cube.backends.cuda.launch.error_slots import DEFAULT_SLOTS, ErrorSlots
from numba_cube.backends.cuda.launch.fast_path import WarmPath
from numba_cube.backends.cuda.streams.graphs import CudaGraph
from numba_cube.backends.cuda.memory.interop import CudaInterop
from numba_cube.backends.cuda.kernels.entries import KernelEntries
from numba_cube.backends.cuda.driver.nvtx import launch_ranges
from numba_cube.backends.cuda.memory.memory import DeviceAllocator, PinnedPool
from numba_cube.backends.cuda.launch.packed_launch import PackedLaunch
from numba_cube.backends.cuda.streams.executor import CudaStreams
from numba_cube.backends.cuda.streams.tasks import CudaTask

__all__ = ["CudaMechanism"]

class CudaMechanism(DeviceMechanism):
    """One GPU, as mechanism: ``index`` of ``driver`` (the real one by default), kernels compiled
    by ``compiler`` (numba-cuda's by default), devices named ``<name>:<index>``."""

    #: A host write lands with one copy over a view's extent (``copies.py``).
    strided_host_writes = False

    def __init__(self, index: int, *, driver: Driver | None = None, compiler=None,
                 name: str = "cuda"):
        self.name = name
        self.driver = driver if driver is not None else Driver()
        self.index = index
        self.device = f"{name}:{index}"
        self.context = CudaContext(self.driver, index, self.device)
        self.activate = self.context.activate
        self.device_name = self.context.device_name
        self.sm_count = self.context.sm_count
        self.max_dynamic_shared_bytes = self.context.max_shared_bytes
        if compiler is None:
            from numba_cube.backends.cuda.kernels.compiler import NumbaCudaCompiler

            compiler = NumbaCudaCompiler(self.driver, index)
        self.compiler = compiler
        self.pinned = PinnedPool(self.driver, self.activate)
        self._capture_stream = None

    def __repr__(self) -> str:
        return f"<CudaMechanism {self.device} ({self.device_name})>"

    def attach(self, server) -> CudaStreams:
        drv = self.driver
        self._server = server

        def raised(exc: CudaError) -> BaseException:
            return self.context.raised(exc, server.mark_broken)

        memory = server.memory
        # The pool is the server's, made after this returns: out of memory, its idle blocks go
        # back to the driver before the allocator tries again.
        self.allocator = DeviceAllocator(drv, self.activate, trim=lambda: server.pool.trim())
        self.entries = KernelEntries(self.compiler, self.activate, server.counters, self.device)
        self.copies = DeviceCopies(drv, self.context, self.pinned, server.ledger,
                                   lambda memory_id: memory[memory_id][1].ptr, raised)
        self.dynamic = DynamicCounts(drv, self.sm_count, self.pinned, server.ledger, raised,
                                     config.get_str("NUMBA_CUBE_CUDA_DYNAMIC_COUNT", "auto",
                                                    ("auto", "readback")))
        self.interop = CudaInterop(server, self.context, raised)
        self.streams = CudaStreams(drv, server.mark_broken, server.ledger, server.channel.lock)
        self.slots = ErrorSlots(drv, self.streams, server.ledger, self.activate,
                                config.get_int("NUMBA_CUBE_CUDA_ERROR_SLOTS", DEFAULT_SLOTS,
                                               minimum=4))
        self.warm = WarmPath(server, self.streams, self.activate)
        self.adopt_foreign = self.interop.adopt_foreign
        self.cuda_array_interface = self.interop.cuda_array_interface
        self.dlpack_exporter = DLPackExporter(self.index, self._pointer_of)
        # NVTX ranges (nvtx.py) wrap the launch paths only when on, so that off they cost nothing.
        self.launch_ranges = launch_ranges(self.device)
        if self.launch_ranges is not None:
            self.enqueue = self.launch_ranges.around_enqueue(self.enqueue)
        return self.streams

    def known_options(self) -> frozenset:
        """numba-cuda's compile options, and ``boundscheck`` (no numba-cuda equivalent: ignored)."""
        return frozenset(("boundscheck",) + JIT_OPTIONS)

    def warm_launcher(self):
        ranges = self.launch_ranges
        return self.warm.fast_launch if ranges is None else ranges.around_warm(self.warm.fast_launch)

    def fold_counts(self, counters) -> None:
        self.warm.fold_counts(counters)
        # turns of the error-word ring that had to wait for a launch (error_slots.py)
        counters["cuda_error_slot_waits"] = self.slots.waits

    def cache_sizes(self) -> dict:
        return {"warm_launches": self.warm.armed_count()}

    # -- faults --------------------------------------------------------------------------------------
    def is_device_fault(self, exc: BaseException) -> bool:
        return self.context.is_device_fault(exc)

    def synchronize_foreign(self, synchronize) -> None:
        # numba_cube's own calls make the context current where they run; a foreign stream's
        # synchronize is called on the user's thread, which may have none (CUDA_ERROR_INVALID_
        # CONTEXT from cuStreamSynchronize on the legacy default stream).
        self.context.activate()
        synchronize()

    def probe_fault(self) -> None:
        """Ask the context (``cuCtxSynchronize``: this also waits for all work in it)."""
        try:
            self.context.synchronize()
        except CudaError as exc:
            self._server.record_fault(exc)

    # -- memory and copies ---------------------------------------------------------------------------
    def allocate(self, nbytes: int):
        return self.allocator.allocate(nbytes)

    def release(self, memory) -> None:
        self.allocator.release(memory)

    def before_free(self, memory_id: int) -> bool:
        self.warm.forget(memory_id)
        # The pool reuses the memory once its users are done: warm tasks among them must have
        # an event for "done" to become true.
        self.streams.flush_tasks(self._server.hazards.users_of(memory_id))
        return not self.interop.forget(memory_id)     # borrowed bytes never go to the pool

    def view(self, memory, b: Binding):
        raise TypeError(f"{self.device} memory is device memory: it has no host view "
                        f"(read it with client.read)")

    def initial_write(self, b: Binding, data: np.ndarray) -> None:
        self.copies.initial_write(b, data)

    def read_binding(self, b: Binding) -> np.ndarray:
        return self.copies.read_binding(b)

    def write_task(self, b: Binding, staged: np.ndarray, stream) -> CudaTask:
        return self.copies.write_task(b, staged, stream)

    def before_sync(self) -> None:
        self.pinned.sweep()
        self.interop.sweep()

    # -- launches ------------------------------------------------------------------------------------
    def prepare(self) -> None:
        self.activate()

    # The server's hook, answered by bound_launch.py without a call frame of this class's own.
    bound_launch_key = staticmethod(bound_launch_key)

    def bind_launch(self, req) -> CudaBoundLaunch:
        return bind_launch(req, self.entries, self.dynamic, self.driver,
                           self.interop.borrowed_ids, self._pointer_of, self.slots)

    def _pointer_of(self, b: Binding) -> int:
        return self._server.memory[b.memory_id][1].ptr + b.offset

    def refusal(self, req, bound: CudaBoundLaunch):
        """``refusal_of``; with dynamic shared memory also when the kernel's static shared memory
        and the size together exceed what a cube of this device can have (the client already
        refused a size above the device's limit by itself; the static part is known once
        compiled): a ``LaunchArgumentError`` on the write set."""
        refusal = refusal_of(req)
        if refusal is None and req.shared_bytes and bound.packed is not None:
            problem = bound.packed.shared_refusal(req.shared_bytes, self.max_dynamic_shared_bytes,
                                                  self.device)
            if problem is not None:
                refusal = LaunchArgumentError(f"kernel {req.kernel.name} cannot be launched: {problem}")
        return refusal

    def dispatch(self, req, bound: CudaBoundLaunch, capturing: bool) -> Recorded:
        """The dispatch on the CUDA stream of the launch's stream id. A dynamic count runs the
        device-count wrapper when the kernel allows it (also inside a capture, which can carry
        it; outside one only while the outputs carry no failure: the wrapper would not repair
        them), else the plain kernel after a read-back of the count (``dispatch_task``)."""
        kid = req.kernel.id
        reads, writes = bound.reads, bound.writes
        handle = self.streams.stream(req.stream).handle
        report = self._server.reporter(req, writes)
        dim = req.dim.as_tuple()
        if req.count_binding is None:
            return Recorded(kid, bound.packed, req.count.as_tuple(), dim, (handle, req.args), None,
                            reads, writes, report, req.shared_bytes)
        ledger = self._server.ledger
        # (an output pending on an unchecked launch counts as failed here: a zero count would
        # leave it clean, where the read-back leaves it as it was)
        if bound.device_count is not None and (
                capturing or (ledger.first_failure(writes) is None
                              and not ledger.pending_of(writes))):
            return Recorded(kid, bound.device_count, (self.dynamic.wrapper_grid(bound, dim), 1, 1),
                            dim, (handle, (None,) + tuple(req.args)), None, reads, writes, report,
                            req.shared_bytes)
        return Recorded(kid, bound.packed, (0, 0, 0), dim, (handle, req.args), None, reads, writes,
                        report, req.shared_bytes)

    @staticmethod
    def _reads_back(req, bound: CudaBoundLaunch, rec: Recorded) -> bool:
        """Does this dispatch read its dynamic count back to the host first?"""
        return req.count_binding is not None and rec.artifact is not bound.device_count

    def not_capturable(self, req, bound: CudaBoundLaunch, rec: Recorded) -> str | None:
        if getattr(rec.artifact, "checks", None) is not None:
            return (f"launch of {req.kernel.id}: a kernel that can raise cannot be recorded into a "
                    f"CUDA graph (each launch needs its own error word, which a replayed graph "
                    f"cannot be given)")
        if self._reads_back(req, bound, rec):
            return (f"launch of {req.kernel.id} with a dynamic count read back on the host "
                    f"(a CUDA graph cannot carry the read-back; "
                    f"{self.dynamic.wrapper_reason(req.kernel)})")
        return None

    def dispatch_task(self, req, bound: CudaBoundLaunch, rec: Recorded) -> CudaTask:
        """A task that runs at once on its stream's CUDA stream (``CudaStreams``)."""
        task = CudaTask(None, req.stream, rec.kernel_id)
        task.cs = self.streams.stream(req.stream)
        if self._reads_back(req, bound, rec):
            task.run = self.dynamic.readback_run(task, rec, bound.count_ptr)
        else:
            task.rec = rec
        return task

    def refused_task(self, req, run) -> CudaTask:
        task = CudaTask(run, req.stream, req.kernel.id)
        task.ran = False            # no kernel ran: observers see no times
        return task

    def enqueue(self, task: CudaTask, deps: list, bound: CudaBoundLaunch, blocking: bool) -> None:
        streams = self.streams
        if blocking:
            task.timing = streams.timing_pair()
        if observers.tasks_observed():
            start = time.perf_counter()
            streams.enqueue(task, deps)
            # On the GPU the dispatch runs later on the device: the times are the host enqueue
            # times.
            end = time.perf_counter()
            observers.notify_task(observers.TaskEvent(
                self.device, task.task_id, task.label, task.stream, tuple(d.task_id for d in deps),
                start if task.ran else None, end if task.ran else None,
                self._server.ledger.first_failure(bound.writes) is not None))
        else:
            streams.enqueue(task, deps)
        if bound.foreign:
            self.interop.after_foreign(task, bound.foreign)

    def launched(self, req, bound: CudaBoundLaunch) -> None:
        # A launch that writes nothing is never armed: a warm repeat the driver refused would
        # have nowhere to record it (the warm path reports to no outcome or log).
        if req.as_called is not None and bound.writes and req.count_binding is None:
            self.warm.arm(req, bound, self.streams.stream(req.stream))

    def packed_launch_of(self, req) -> PackedLaunch | None:
        """The packed kernel launch ``req`` binds to (None if it does not compile): what the warm
        path hands the driver, for tools that measure the driver's floor under it
        (``benchmarks/bench_cuda.py``)."""
        return self._server.bound_launch(req).packed

    # -- capture ---------------------------------------------------------------------------------------
    def capture_stream(self):
        """The private stream that recordings are replayed onto to make a CUDA graph."""
        if self._capture_stream is None:
            self._capture_stream = self.driver.stream_create()
        return self._capture_stream

    def graph(self, stream, recorded: list, memory_ids: frozenset) -> CudaGraph:
        """A sealed recording becomes a hardware CUDA graph (``graphs.py``)."""
        return CudaGraph(self._server, self, stream, recorded, memory_ids)
