"""``CudaServer``: the runtime's ``HostServer`` policy over a real GPU.

What is reused from ``HostServer`` unchanged: the ledger and the execute scope (every dispatch
runs inside ``ExecuteScope`` through ``dispatch.run_recorded``), the hazard tracker (inferred
dependencies), the memory table and ``MemoryPool`` (size classes, quarantine), the capture state
machine and its refusals, reads/sync/check bookkeeping, exclusive use.

What is replaced:

- **channel**: ``InlineChannel``. Server operations run on the issuing thread under the device
  lock: a launch is a ~4 us asynchronous driver call, and a hop to a device thread would cost
  more than that;
- **executor**: ``CudaStreams`` (``streams.py``) instead of worker threads: a task runs at once,
  on the CUDA stream of its stream id, after device-side event waits for its dependencies, and
  records an event; tasks answer ``done``/``wait`` from their events;
- **compile and launch**: a two-level cache. A *launch plan* (``launch_plan.py``) per (kernel,
  bound buffers, scalar types, options) holds the loaded kernel with the buffers' pointers,
  shapes and strides already packed, and the read/write sets already worked out; it is found by
  one dict lookup and dropped when a buffer it binds is freed (the runtime's plan bookkeeping).
  On a miss, the *kernel entry* per (kernel, argument signature, options) compiles with numba-cuda
  (``compiler.py``) once, or remembers the compile failure;
- **warm launches**: a launch that repeats an earlier one skips all of the above but the
  dependency check and the driver call (``fast_path.py``; the client tries it first);
- **memory**: device memory through ``cuMemAlloc`` under the pool (``memory.py``); ``create`` is a
  synchronous host-to-device copy into fresh memory, ``write`` an asynchronous copy in stream
  order from pinned staging, ``read`` a device-to-host copy after waiting for the writer's event;
- **dynamic counts**: the device-count kernel where the kernel allows it, else a blocking 12-byte
  read-back (``dynamic.py``; ``NUMBA_CUBE_CUDA_DYNAMIC_COUNT=readback`` forces the read-back);
- **graphs**: hardware CUDA graphs (``graphs.py``);
- **interop**: ``__cuda_array_interface__`` export and adoption of foreign arrays (``interop.py``).

Launch policy shared with ``HostServer``: a geometry beyond CUDA's launch limits is refused
before the driver is asked (``refusal_of``: a ``LaunchArgumentError`` on the write set, as on every
backend), dry-run launches report to their dry runs (``_skip``), and a failure no buffer can
carry goes to the launch's outcome or the unrecorded-failure log (``_reporter``, on every path
below: the common one, the general one, and never armed for the warm one).

Faults. A launch the driver refuses (too many threads per block for this kernel, too much shared
memory) raises from ``cuLaunchKernel`` inside the scope: a failure recorded on its write set
(``LaunchFailure`` on read), nothing else is affected. A *sticky* fault (an illegal address in a kernel) breaks the
whole CUDA context: it is kept as the server's fault and ``sync()`` raises ``DeviceFault``. What
survives it: nothing on this device. Every later driver call in the context fails the same way,
so later launches fail their write sets with the fault as root cause, reads raise
``DeviceFault``, and the memory is lost; the process must restart to use this GPU again (the
primary context is shared with numba-cuda, CuPy and PyTorch, which are broken the same way).
Other devices (``cuda:1``, ``cpu``) and their buffers are unaffected.

Context. Every operation makes the device's primary context current on the calling thread if it
is not (one ``cuCtxGetCurrent`` per operation): threads start with no context, and other
libraries switch contexts on multi-GPU machines.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, NamedTuple

import numpy as np

from ... import config
from ...errors import BackendNotFound, CompileError, DeviceFault, LaunchArgumentError
from ...kernel.kernel import resolve_access
from ...runtime import observers
from ...runtime.dispatch import Recorded
from ...runtime.channel import InlineChannel
from ...runtime.composite import COMPOSITE_TYPES, analysis_entry
from ...runtime.handle import Binding
from ...runtime.layout import from_extent, host_staging
from ...runtime.ledger import Failure
from ...runtime.requests import refusal_of
from ...runtime.server import HostServer
from .compiler import JIT_OPTIONS, jit_options
from .driver import CudaError, Driver
from .dynamic import DynamicCountMixin
from .fast_path import FastLaunchMixin
from .interop import BorrowedTable, CudaInteropMixin
from .launch_plan import LaunchPlan
from .memory import DeviceAllocator, PinnedPool
from .streams import CudaStreams, CudaTask

__all__ = ["CudaServer", "make_gpu_server"]

log = logging.getLogger("numba_cube")

_U32 = np.dtype(np.uint32)


class _KernelEntry(NamedTuple):
    """A kernel compiled for one argument signature (or why it did not compile), and its IO."""

    compiled: Any
    error: BaseException | None
    access: tuple


class _Plan:
    """Everything a warm launch needs, worked out once per launch-plan key."""

    __slots__ = ("launch", "error", "reads", "writes", "read_mems", "write_mems", "device_count",
                 "readback", "count_ptr", "foreign", "bound_for")

    def __init__(self):
        self.launch = None          # LaunchPlan of the kernel (None on a compile failure)
        self.error = None           # the compile failure
        self.reads = ()
        self.writes = ()
        self.read_mems = frozenset()
        self.write_mems = frozenset()
        self.device_count = None    # LaunchPlan of the device-count wrapper, when eligible
        self.readback = False       # a dynamic count resolved by read-back
        self.count_ptr = 0
        self.foreign = ()           # memory ids of borrowed buffers it binds
        self.bound_for = {}         # block threads -> wrapper grid (device count)


class CudaServer(FastLaunchMixin, CudaInteropMixin, DynamicCountMixin, HostServer):
    """One GPU: its primary context, streams, memory, compile cache and ledger."""

    #: A host write lands with one copy over a view's extent, so a view whose extent holds
    #: bytes that are not its elements (a step, a column) cannot be written from the host: the
    #: client refuses that on the issuing thread (``Client.write``).
    strided_host_writes = False

    def __init__(self, index: int, *, driver: Driver | None = None, compiler=None,
                 name: str = "cuda", baseline_rule: bool | None = None):
        drv = driver if driver is not None else Driver()
        self.driver = drv
        self.index = index
        drv.init()
        count = drv.device_count()
        if not 0 <= index < count:
            raise BackendNotFound(f"{name}:{index}: this machine has {count} CUDA device(s)")
        self._dev = drv.device(index)
        self._ctx = drv.primary_context(self._dev)
        self._ctx_int = int(self._ctx)
        self._get_current = drv.api.cuCtxGetCurrent
        self._success = drv.SUCCESS
        self.activate()
        self.device_name = drv.device_name(self._dev)
        self.sm_count = drv.device_attribute("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT", self._dev)
        device = f"{name}:{index}"
        self._init_fast_path()
        allocator = DeviceAllocator(drv, self.activate)
        super().__init__(device, allocator, InlineChannel(device), baseline_rule=baseline_rule)
        # What one cube may have with the opt-in attribute (LaunchPlan.opt_in): the client refuses
        # a dynamic size above it, the launch one whose static part leaves too little.
        self.max_dynamic_shared_bytes = drv.device_attribute(
            "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", self._dev)
        allocator._trim = self.pool_trim
        self.allocator = allocator
        self.pinned = PinnedPool(drv, self.activate)
        if compiler is None:
            from .compiler import NumbaCudaCompiler

            compiler = NumbaCudaCompiler(drv, index)
        self.compiler = compiler
        self._ptrs: dict[int, int] = {}            # memory id -> device address
        self._wrappers: dict = {}                  # kernel id -> device-count wrapper or Ineligible
        self.borrowed = BorrowedTable()
        self._borrowed_ids: set = set()
        self._empty_foreign = None                 # the Allocation all empty foreign arrays view
        self._count_buf = None                     # pinned 16 bytes for count read-backs
        self._capture_stream = None
        self._export_stream = None
        self._upload = None                        # private stream of create()'s copies
        self._upload_lock = threading.Lock()
        self._foreign_streams: dict = {}           # borrowed memory id -> CAI stream (1: legacy)
        self.dynamic_mode = config.get_str("NUMBA_CUBE_CUDA_DYNAMIC_COUNT", "auto", ("auto", "readback"))

    def __repr__(self) -> str:
        return f"<CudaServer {self.device} ({self.device_name})>"

    def _make_streams(self, device: str, max_tasks: int) -> CudaStreams:
        """The executor: CUDA streams and events, run on the issuing thread (``streams.py``)."""
        return CudaStreams(self.driver, self._fatal, self.ledger, self.channel.lock)

    def known_options(self) -> frozenset:
        """numba-cuda's compile options, and ``boundscheck`` (no numba-cuda equivalent: ignored)."""
        return frozenset(("boundscheck",) + JIT_OPTIONS)

    @property
    def stats(self):
        """The server's counters, with the warm launches (counted apart, as one int, on their
        path) folded in. Under the device lock: a fold racing a warm launch would lose it."""
        with self.channel.lock:
            self._fold_hot_stats(self._stats)
        return self._stats

    @stats.setter
    def stats(self, value) -> None:
        self._stats = value

    # -- context -------------------------------------------------------------------------------------
    def activate(self) -> None:
        """Make this device's primary context current on the calling thread (if it is not)."""
        err, cur = self._get_current()
        if err != self._success:
            raise self.driver.error("cuCtxGetCurrent", err)
        if int(cur) != self._ctx_int:
            self.driver.set_current(self._ctx)

    # -- faults --------------------------------------------------------------------------------------
    def _on_fault(self, exc: BaseException) -> None:
        if isinstance(exc, CudaError) and not exc.sticky:
            log.warning("numba_cube: %s on %s (not a sticky fault)", exc, self.device)
            return
        super()._on_fault(exc)

    def _fatal(self, exc: BaseException) -> None:
        """A driver call of the executor failed (an event record or stream wait): whatever the
        error, ordering can no longer be guaranteed, so the device counts as broken."""
        super()._on_fault(exc)

    def device_fault(self) -> DeviceFault | None:
        """A broken device, as ``sync()`` reports it: a fault seen by any operation, or one the
        context reports now (``cuCtxSynchronize``: this also waits for all work in the context)."""
        if self.fault is None and self.channel.fault is None:
            try:
                self.activate()
                self.driver.ctx_synchronize()
            except CudaError as exc:
                self._on_fault(exc)
        return super().device_fault()

    def _raise_fault(self, exc: CudaError):
        if exc.sticky:
            self._on_fault(exc)
            err = DeviceFault(f"device {self.device} is broken: {exc}")
            err.__cause__ = exc
            return err
        return exc

    # -- memory --------------------------------------------------------------------------------------
    def pool_trim(self) -> None:
        self.pool.trim()

    def op_alloc(self, nbytes: int, stream=None) -> int:
        memory_id = super().op_alloc(nbytes, stream)
        self._ptrs[memory_id] = self.memory[memory_id][1].ptr
        return memory_id

    def _drain_frees(self) -> None:
        if self._to_free:
            for memory_id in list(self._to_free):
                if self._hot:
                    self._forget_hot(memory_id)
                # The pool reuses the memory once its users are done: warm tasks among them
                # must have an event for "done" to become true.
                self.streams.flush_tasks(self.hazards.users_of(memory_id))
                self._ptrs.pop(memory_id, None)
                if memory_id in self._borrowed_ids:
                    # Borrowed bytes belong to another library: never to the pool.
                    self._to_free.remove(memory_id)
                    self._borrowed_ids.discard(memory_id)
                    self.memory.pop(memory_id, None)
                    for pkey in self._plans_by_memory.pop(memory_id, ()):
                        self._launch_plans.pop(pkey, None)
                    self.hazards.forget(memory_id)
                    self.ledger.forget(memory_id)
                    self.borrowed.forget_id(memory_id)
        super()._drain_frees()

    def host_array(self, b: Binding):
        raise TypeError(f"{self.device} memory is device memory: it has no host view "
                        f"(read it with client.read)")

    def _device_ptr(self, b: Binding) -> int:
        return self._ptrs[b.memory_id] + b.offset

    def initial_write(self, b: Binding, data: np.ndarray) -> None:
        """Fill fresh memory (``create``, on the issuing thread), complete when this returns.

        Not ``cuMemcpyHtoD``: from pageable memory it may return before the DMA has landed, and
        it is ordered on the legacy default stream, which our non-blocking streams do not wait
        for; a kernel launched right after ``create`` could read the old bytes. So: an
        asynchronous copy on a private upload stream, and a wait for that stream."""
        if b.strides is None:
            src, dst = np.ascontiguousarray(data, dtype=b.dtype), self._device_ptr(b)
        else:       # an F-ordered handle (create): its bytes as they lie on the device
            src, dst = self._staged_extent(b, data), self._ptrs[b.memory_id] + b.extent[0]
        if src.nbytes == 0:
            return
        self.activate()
        try:
            upload = self._upload_stream()
            self.driver.memcpy_htod_async(dst, src.ctypes.data, src.nbytes, upload)
            self.driver.stream_synchronize(upload)
        except CudaError as exc:
            raise self._raise_fault(exc) from exc

    def _upload_stream(self):
        stream = self._upload
        if stream is None:
            with self._upload_lock:
                if self._upload is None:
                    self._upload = self.driver.stream_create()
                stream = self._upload
        return stream

    def read_binding(self, b: Binding) -> np.ndarray:
        """A host copy of a binding's bytes; the caller waited for its writers' events. A strided
        binding reads the bytes of its extent and views them with its strides (an F-ordered
        handle reads as an F-ordered array)."""
        if b.strides is None:
            out = np.empty(b.shape, b.dtype)
            src = self._device_ptr(b)
        else:
            low, high = b.extent
            out = np.empty(high - low, np.uint8)
            src = self._ptrs[b.memory_id] + low
        if out.nbytes:
            self.activate()
            try:
                self.driver.memcpy_dtoh(out.ctypes.data, src, out.nbytes)
            except CudaError as exc:
                raise self._raise_fault(exc) from exc
        return out if b.strides is None else from_extent(b, out)

    @staticmethod
    def _staged_extent(b: Binding, data) -> np.ndarray:
        """The bytes one copy writes over a strided binding's extent; refused (a typed error,
        nothing copied) where the extent holds bytes that are not the view's elements (a step,
        a column): one copy would overwrite them, and the device holds no host view to copy
        element by element."""
        if not b.compact:
            raise LaunchArgumentError(
                f"a host write into a non-contiguous view (shape {b.shape}, strides {b.strides}) "
                f"of {b.dtype} on a CUDA device: write the whole buffer, or a contiguous view")
        return host_staging(b, data)

    def op_write(self, b: Binding, staged: np.ndarray, stream) -> None:
        """A host write into a handle in stream order: pinned staging, an asynchronous copy."""
        if self._to_free:
            self._drain_frees()
        self.activate()
        if b.strides is None:
            raw = np.ascontiguousarray(staged).reshape(-1).view(np.uint8)
            dst = self._device_ptr(b)
        else:
            raw = self._staged_extent(b, staged)
            dst = self._ptrs[b.memory_id] + b.extent[0]
        nbytes = raw.nbytes
        region = b.region
        pinned = None
        if nbytes:
            pinned = self.pinned.get(nbytes)
            pinned.array[:nbytes] = raw
        ledger = self.ledger
        driver = self.driver
        task = CudaTask(None, stream, "host-write")

        def copy():
            try:
                if nbytes:
                    driver.memcpy_htod_async(dst, pinned.ptr, nbytes, task.cs.handle)
            except CudaError as exc:
                ledger.record((region,), Failure(exc, "host-write", ("host-write",)))
                self._raise_fault(exc)
            else:
                ledger.record((region,), None)

        task.run = copy
        deps = self.hazards.register(task, (), (b.memory_id,))
        self.streams.enqueue(task, deps)
        if pinned is not None:
            self.pinned.lend(task, pinned)

    def op_sync(self) -> list:
        self.activate()
        self.pinned.sweep()
        if self.borrowed:
            self.borrowed.sweep(self.hazards, self.ledger)   # let go of finished foreign arrays
        return super().op_sync()

    # Waiting happens on the calling thread after these return (task.wait: cuEventSynchronize),
    # so they make the context current there first.
    def op_wait_read(self, bindings) -> list:
        self.activate()
        return super().op_wait_read(bindings)

    def op_wait_all_users(self, bindings) -> list:
        self.activate()
        return super().op_wait_all_users(bindings)

    def op_known_failures(self, bindings) -> list:
        self.activate()
        return super().op_known_failures(bindings)

    def op_replay(self, graph) -> None:
        self.activate()
        super().op_replay(graph)

    # -- compile ---------------------------------------------------------------------------------------
    def _kernel_entry(self, kernel, args: tuple, options: tuple, *, py_func=None, kid=None,
                      access=None) -> _KernelEntry:
        kid = kid or kernel.id
        sig = tuple((a.dtype, len(a.shape), a.layout) if type(a) is Binding
                    else a.type_key if type(a) in COMPOSITE_TYPES else type(a) for a in args)
        key = (kid, sig, options)
        entry = self.compile_cache.get(key)
        if entry is not None:
            self.stats["cache_hits"] += 1
            return entry
        self.stats["compiles"] += 1
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
            entry = _KernelEntry(compiled, None, access)
        except CompileError as exc:
            entry = _KernelEntry(None, exc, access)
        except CudaError as exc:
            err = CompileError(f"kernel {kernel.name} could not be loaded on {self.device}: {exc}")
            err.__cause__ = exc
            entry = _KernelEntry(None, err, access)
        except Exception as exc:  # noqa: BLE001 - Numba's own errors are compile failures too
            err = CompileError.wrapping(
                f"kernel {kernel.name} failed to compile for CUDA: {type(exc).__name__}: {exc}", exc)
            entry = _KernelEntry(None, err, access)
        finally:
            self.activate()   # numba-cuda pops its context when it is done
        self.compile_cache[key] = entry
        return entry

    # -- launch ----------------------------------------------------------------------------------------
    def _plan(self, req) -> _Plan:
        """The plan of this launch: one dict lookup when warm (see the module docstring)."""
        args = req.args
        cb = req.count_binding
        pkey = (req.kernel.id, tuple([a if type(a) is Binding
                                      else a.key if type(a) in COMPOSITE_TYPES else type(a)
                                      for a in args]), req.options, cb)
        plan = self._launch_plans.get(pkey)
        if plan is not None:
            self.stats["cache_hits"] += 1
            return plan
        plan = self._build_plan(req)
        self._keep_plan(pkey, plan)
        return plan

    def _build_plan(self, req) -> _Plan:
        args = req.args
        kernel = req.kernel
        entry = self._kernel_entry(kernel, args, req.options)
        plan = _Plan()
        reads, writes = self._regions(req, entry.access)
        plan.reads, plan.writes = reads, writes
        plan.read_mems = frozenset(r[0] for r in reads)
        plan.write_mems = frozenset(w[0] for w in writes)
        plan.foreign = tuple(m for m in plan.read_mems | plan.write_mems if m in self._borrowed_ids)
        if entry.error is not None:
            plan.error = entry.error
            return plan
        plan.launch = LaunchPlan(entry.compiled, self.driver, args, self._device_ptr)
        cb = req.count_binding
        if cb is not None:
            plan.count_ptr = self._device_ptr(cb)
            plan.readback = True
            if self.dynamic_mode == "auto":
                wrapper = self._wrapper_of(kernel)
                if not isinstance(wrapper, Exception):
                    count_arg = Binding(cb.memory_id, cb.offset, (3,), _U32)
                    wargs = (count_arg,) + tuple(args)
                    wentry = self._kernel_entry(kernel, wargs, req.options, py_func=wrapper,
                                                kid=kernel.id + "#device-count",
                                                access=((True, False),) + tuple(entry.access))
                    if wentry.error is None:
                        plan.device_count = LaunchPlan(wentry.compiled, self.driver, wargs, self._device_ptr)
                    else:
                        log.info("numba_cube: device-count form of %s does not compile (%s); "
                                 "dynamic counts are read back", kernel.name, wentry.error)
        return plan

    def _shared_refusal(self, req, plan: _Plan):
        """``refusal_of`` for a launch with dynamic shared memory: also refused (a
        ``LaunchArgumentError`` on its write set) when the kernel's static shared memory and the
        size together exceed what a cube of this device can have. (The client already refused a
        size above the device's limit by itself; the static part is known once compiled.)"""
        refusal = refusal_of(req)
        if refusal is None and plan.launch is not None:
            problem = plan.launch.shared_refusal(req.shared_bytes, self.max_dynamic_shared_bytes,
                                                 self.device)
            if problem is not None:
                refusal = LaunchArgumentError(f"kernel {req.kernel.name} cannot be launched: {problem}")
        return refusal

    # -- the launch hooks of HostServer.op_launch (the policy itself is not repeated here) -------
    def _prepare(self) -> None:
        self.activate()

    def _refusal(self, req, plan: _Plan):
        return refusal_of(req) if not req.shared_bytes else self._shared_refusal(req, plan)

    def _recorded(self, req, plan: _Plan, capturing: bool) -> Recorded:
        """The dispatch on the CUDA stream of the launch's stream id. A dynamic count runs the
        device-count wrapper when the kernel allows it (also inside a capture, which can carry
        it; outside one only while the outputs carry no failure: the wrapper would not repair
        them), else the plain kernel after a read-back of the count (``_dispatch_task``)."""
        kid = req.kernel.id
        reads, writes = plan.reads, plan.writes
        handle = self.streams.stream(req.stream).handle
        report = self._reporter(req, writes)
        dim = req.dim.as_tuple()
        if req.count_binding is None:
            return Recorded(kid, plan.launch, req.count.as_tuple(), dim, (handle, req.args), None,
                            reads, writes, report, req.shared_bytes)
        if plan.device_count is not None and (
                capturing or self.ledger.first_failure(writes) is None):
            return Recorded(kid, plan.device_count, (self._wrapper_grid(plan, dim), 1, 1), dim,
                            (handle, (None,) + tuple(req.args)), None, reads, writes, report,
                            req.shared_bytes)
        return Recorded(kid, plan.launch, (0, 0, 0), dim, (handle, req.args), None, reads, writes,
                        report, req.shared_bytes)

    def launch_plan_of(self, req) -> LaunchPlan | None:
        """The packed kernel launch ``req`` resolves to (None if it does not compile): what the
        warm path hands the driver, for tools that measure the driver's floor under it
        (``benchmarks/bench_cuda.py``)."""
        return self._plan(req).launch

    @staticmethod
    def _reads_back(req, plan: _Plan, rec: Recorded) -> bool:
        """Does this dispatch read its dynamic count back to the host first?"""
        return req.count_binding is not None and rec.artifact is not plan.device_count

    def _not_capturable(self, req, plan: _Plan, rec: Recorded) -> str | None:
        if self._reads_back(req, plan, rec):
            return (f"launch of {req.kernel.id} with a dynamic count read back on the host "
                    f"(a CUDA graph cannot carry the read-back; "
                    f"{self._wrapper_reason(req.kernel)})")
        return None

    def _dispatch_task(self, req, plan: _Plan, rec: Recorded) -> CudaTask:
        """A task that runs at once on its stream's CUDA stream (``CudaStreams``)."""
        task = CudaTask(None, req.stream, rec.kernel_id)
        task.cs = self.streams.stream(req.stream)
        if self._reads_back(req, plan, rec):
            task.run = self._readback_run(task, rec, plan.count_ptr)
        else:
            task.rec = rec
        return task

    def _refused_task(self, req, run) -> CudaTask:
        task = CudaTask(run, req.stream, req.kernel.id)
        task.ran = False            # no kernel ran: observers see no times
        return task

    def _launched(self, req, plan: _Plan) -> None:
        # A launch that writes nothing is never armed: a warm repeat the driver refused would
        # have nowhere to record it (the warm path reports to no outcome or log).
        if req.as_called is not None and plan.writes and req.count_binding is None:
            self._arm(req, plan, self.streams.stream(req.stream))

    def _submit(self, task: CudaTask, plan: _Plan, blocking: bool):
        deps = self.hazards.register(task, plan.read_mems, plan.write_mems)
        task.task_id = next(self._task_ids)
        if blocking:
            task.timing = self.streams.timing_pair()
        if observers.tasks_observed():
            start = time.perf_counter()
            self.streams.enqueue(task, deps)
            self._notify_task(task, deps, start, plan.writes)
        else:
            self.streams.enqueue(task, deps)
        if plan.foreign:
            self._after_foreign(task, plan.foreign)
        self.stats["launched"] += 1
        return task if blocking else None

    def _notify_task(self, task: CudaTask, deps, start: float, rec_writes: tuple) -> None:
        # On the GPU the dispatch runs later on the device: the times are the host enqueue times.
        end = time.perf_counter()
        observers.notify_task(observers.TaskEvent(
            self.device, task.task_id, task.label, task.stream, tuple(d.task_id for d in deps),
            start if task.ran else None, end if task.ran else None,
            self.ledger.first_failure(rec_writes) is not None))

    # -- capture ---------------------------------------------------------------------------------------
    def capture_stream(self):
        if self._capture_stream is None:
            self._capture_stream = self.driver.stream_create()
        return self._capture_stream

    def _graph(self, stream, recorded: list, memory_ids: frozenset):
        """A sealed recording becomes a hardware CUDA graph (``graphs.py``)."""
        from .graphs import CudaGraph

        return CudaGraph(self, stream, recorded, memory_ids)


def make_gpu_server(index: int, name: str = "cuda") -> CudaServer:
    """The server of device ``cuda:<index>`` on a real GPU."""
    return CudaServer(index, name=name)

