"""The server of a host-executing device: the launch path's steps on the server side.

One ``HostServer`` owns one device: its compile cache, its memory table and pool, its stream
queues, its dependency state and its failure ledger. Every ``op_*`` method runs on the device's
channel (one at a time, see ``channel.py``); stream work runs later on stream workers
(``host_streams.py``) and touches only the ledger (locked) and memory it was handed. Its parts
that stand on their own are mixed in from their modules: the memory table (``memory_table.py``),
the capture operations (``capture.py``) and where launch outcomes go (``outcomes.py``). Foreign
arrays a backend describes (``HostBackend.foreign_memory``) are adopted as borrowed memory by the
policy of ``borrowed.py``, whose server side (``adopt_foreign``, the free path) is mixed in too.

A launch, in the order of CONTRACT.md section 1.2:

1. cache key: kernel id, argument types, alignment, and what the backend bakes in;
2. compile or reuse; a compile failure is remembered with the cache entry;
3. a SKIP launch (dry run) ends here: nothing claimed, no dependency, no memory touched;
4. read and write sets (three-level fallback), dependencies from the hazard tracker, then a task
   that opens the execute scope when it runs. A compile failure, or a geometry beyond CUDA's
   launch limits (``geometry.py``; what the CUDA driver refuses is refused on every backend),
   becomes a task that goes through ``failed_writing`` *in stream order*, so that earlier work on
   the same buffers cannot overwrite it, while ``check`` already knows about it
   (``Task.failure_hint``).

A failure no buffer can carry (the launch writes none) goes to the launch's own outcome when its
caller waits for it, else to the device's log of unrecorded failures (``outcomes.py``): the
dispatch reports it through ``Recorded.report``, set here per launch (``_reporter``).

This policy has one copy, for every backend: ``op_launch`` and ``op_stop_capture`` are never
overridden. A server over other hardware (``backends/cuda/server.py``) overrides only the
mechanism hooks they call: the plan, the resolved dispatch, its task and how it is queued, the
executor of streams (``_make_streams``) and the graph a capture becomes (``_graph``).
"""

from __future__ import annotations

import collections
import itertools
import logging
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .. import config
from ..errors import CompileError, DeviceFault
from ..kernel.kernel import resolve_access
from . import observers
from .borrowed import BorrowedMemory, BorrowingOps
from .capture import CaptureOps
from .dispatch import Recorded, run_recorded
from .composite import COMPOSITE_TYPES, add_regions, analysis_entry, composite_bindings
from .exclusive import ExclusiveGate
from .handle import Binding
from .hazards import HazardTracker
from .host_streams import HostStreams, Task
from .ledger import Failure, Ledger
from .memory import ALIGNMENT, MemoryPool
from .memory_table import MemoryTable
from .modes import LaunchMode
from .outcomes import LaunchRouting, UnrecordedFailures
from .requests import LaunchRequest, refusal_of, refused_launch_text

# LaunchRequest and ExclusiveGate are re-exported: this is where servers' users find them.
__all__ = ["HostServer", "LaunchRequest", "CacheEntry", "ExclusiveGate"]

log = logging.getLogger("numba_cube")
profile_log = logging.getLogger("numba_cube.profile")


@dataclass
class CacheEntry:
    """One compiled kernel for one key: the artifact or the compile failure, and its IO."""

    artifact: Any
    error: BaseException | None
    access: tuple          # per parameter (read, written)


def alignment_of(bindings) -> int:
    """The strongest alignment every view shares: the pool alignment lowered to the lowest set bit
    of each start offset. Reads descriptors only (CONTRACT.md 1.2 step 1)."""
    align = ALIGNMENT
    for b in bindings:
        if b.offset:
            align = min(align, b.offset & -b.offset)
    return align


class _LaunchPlan(NamedTuple):
    entry: "CacheEntry"
    arrays: list          # backend views of the bindings, scalars as given when the plan was made
    scalars: tuple        # positions of scalar arguments (filled in per launch)
    reads: tuple
    writes: tuple
    read_mems: set
    write_mems: set
    count_view: Any
    composites: tuple = ()  # positions of composite arguments (materialized per launch)

    @property
    def error(self) -> BaseException | None:
        """The compile failure (what ``op_launch`` asks every backend's plan)."""
        return self.entry.error


class HostServer(BorrowingOps, MemoryTable, CaptureOps, LaunchRouting):
    """Policy core of a backend whose kernels run on host worker threads."""

    #: A server may offer a warm launch path (``fast_launch(kernel, count, dim, args, stream,
    #: options, shared_bytes) -> kernel id or None``); the client tries it first when nothing observes launches.
    #: Host servers have none: a launch there is a queue hop anyway.
    fast_launch = None

    def __init__(self, device: str, backend, channel, *, max_tasks: int = 32,
                 baseline_rule: bool | None = None):
        self.device = device
        self.backend = backend
        #: the most dynamic shared memory (bytes per cube) a launch may ask for; the client refuses
        #: more before queueing anything. 0: the backend has none (``HostBackend``'s attribute).
        self.max_dynamic_shared_bytes = int(getattr(backend, "max_dynamic_shared_bytes", 0))
        self.channel = channel
        self.ledger = Ledger()
        if baseline_rule is None:       # the process's rule (one place reads it, for every backend)
            baseline_rule = config.get_str("NUMBA_CUBE_DEPENDENCY_RULE", "hazard",
                                           ("hazard", "baseline")) == "baseline"
        self.hazards = HazardTracker(baseline=baseline_rule)
        self.fault: BaseException | None = None
        self.streams = self._make_streams(device, max_tasks)
        self.pool = MemoryPool(backend.allocate, backend.release)
        self.memory: dict[int, tuple[int, Any]] = {}  # memory id -> (capacity, backend memory)
        self.compile_cache: dict[tuple, CacheEntry] = {}
        self._plans: dict[tuple, CacheEntry] = {}   # launch-plan key -> entry (see _compiled)
        self._views: dict = {}                      # memory id -> {Binding: backend view}
        self._launch_plans: dict = {}               # see _plan
        self._plans_by_memory: dict = {}            # memory id -> plan keys that bind it
        self.stats = collections.Counter()
        self._ids = itertools.count(1)
        self._task_ids = itertools.count(1)
        self._to_free: collections.deque = collections.deque()
        self._late_forget: list = []
        self.captures: dict = {}       # stream -> CaptureState
        self.exclusive = ExclusiveGate()
        self.prepared = False
        self.unrecorded = UnrecordedFailures(device)   # failures no buffer carries (outcomes.py)
        self.borrowed_memory = BorrowedMemory()        # adopted foreign arrays (borrowed.py)

    def _make_streams(self, device: str, max_tasks: int):
        """The executor of this device's streams: worker threads (``host_streams.py``)."""
        return HostStreams(device, max_tasks, self._on_fault)

    # -- options -----------------------------------------------------------------------------------
    def known_options(self) -> frozenset:
        """The client options (``cube.client(device, **options)``) this device's compile stage
        understands: what the backend declares (``HostBackend.compile_options``)."""
        # A backend that declares nothing gets the runtime's portable option only.
        return frozenset(getattr(self.backend, "compile_options", ("boundscheck",)))

    # -- faults -----------------------------------------------------------------------------------
    def _on_fault(self, exc: BaseException) -> None:
        if self.fault is None:
            self.fault = exc

    def device_fault(self) -> DeviceFault | None:
        cause = self.fault or self.channel.fault
        if cause is None and self.channel.alive:
            return None
        err = DeviceFault(f"device {self.device} is broken: {type(cause).__name__}: {cause}"
                          if cause else f"the device thread of {self.device} died")
        err.__cause__ = cause
        return err

    # -- launch -------------------------------------------------------------------------------------------
    def op_launch(self, req: LaunchRequest, blocking: bool = False) -> Task | None:
        """Steps 1-4 of CONTRACT.md 1.2, for every backend: the one copy of the launch policy.
        With ``blocking`` (a profiled launch, or a caller that waits for its outcome) the task is
        flushed and returned so the caller can wait for it.

        What differs between backends is mechanism, behind the hooks below: the plan
        (``_plan``: compiled artifact, read and write sets), a refusal only the backend can see
        (``_refusal``), the resolved dispatch (``_recorded``), what a capture cannot carry
        (``_not_capturable``), the task that runs it (``_dispatch_task``, ``_refused_task``),
        how it is queued (``_submit``) and what follows (``_launched``)."""
        if self._to_free:
            self._drain_frees()
        if self.borrowed_memory:
            self.borrowed_memory.consume(req.args)
        self._prepare()
        if req.mode is LaunchMode.SKIP:
            return self._skip(req)
        plan = self._plan(req)
        kid = req.kernel.id
        capture = self.captures.get(req.stream) if self.captures else None
        error = plan.error if plan.error is not None else self._refusal(req, plan)
        if error is not None:
            if capture is not None:
                capture.refuse(refused_launch_text(kid, error))
                return None
            task = self._refused_task(req, self._refused_run(req, plan.writes, error))
            task.failure_hint = Failure(error, kid, (kid,))
            return self._submit(task, plan, blocking)
        rec = self._recorded(req, plan, capture is not None)
        if capture is not None:
            if self.ledger.first_failure(plan.reads) is not None:
                capture.refuse(f"launch of {kid} (skipped: an input carries a failure)")
            else:
                reason = self._not_capturable(req, plan, rec)
                if reason is not None:
                    capture.refuse(reason)
                else:
                    capture.recorded.append(rec)
            return None
        answer = self._submit(self._dispatch_task(req, plan, rec), plan, blocking)
        self._launched(req, plan)
        return answer

    # -- the mechanism hooks of op_launch (a backend's server overrides these, never op_launch) --
    def _prepare(self) -> None:
        """Before a launch touches the device (a CUDA server makes its context current)."""

    def _refusal(self, req: LaunchRequest, plan) -> BaseException | None:
        """Why this launch cannot run although it compiled (a geometry beyond CUDA's limits:
        ``refusal_of``), or None."""
        return refusal_of(req)

    def _recorded(self, req: LaunchRequest, plan: "_LaunchPlan", capturing: bool) -> Recorded:
        """The resolved dispatch: the plan's arrays with this launch's scalars and composites."""
        arrays = plan.arrays
        if plan.scalars:
            arrays = list(arrays)
            for i in plan.scalars:
                arrays[i] = req.args[i]
        if plan.composites:
            # Tuples, records, enums, dates (composite.py): their numbers change per launch.
            arrays = list(arrays)
            for i in plan.composites:
                arrays[i] = req.args[i].materialize(self.host_array)
        return Recorded(req.kernel.id, plan.entry.artifact, req.count.as_tuple(),
                        req.dim.as_tuple(), arrays, plan.count_view, plan.reads, plan.writes,
                        self._reporter(req, plan.writes), req.shared_bytes)

    def _not_capturable(self, req: LaunchRequest, plan, rec: Recorded) -> str | None:
        """What a capture window must refuse about this dispatch (nothing, on a host backend:
        its graphs re-run recorded dispatches, dynamic counts included)."""
        return None

    def _dispatch_task(self, req: LaunchRequest, plan, rec: Recorded) -> Task:
        task = Task(None, req.stream, rec.kernel_id)
        task.run = self._timed(rec, task)
        return task

    def _refused_task(self, req: LaunchRequest, run) -> Task:
        """The task of a launch that cannot run: ``run`` fails its write set in stream order."""
        return Task(run, req.stream, req.kernel.id)

    def _submit(self, task: Task, plan, blocking: bool) -> Task | None:
        """Queue ``task`` after the tasks the hazard tracker names for the plan's buffers."""
        deps = self.hazards.register(task, plan.read_mems, plan.write_mems)
        task.task_id = next(self._task_ids)
        self.streams.enqueue(task, deps)
        self.stats["launched"] += 1
        if blocking:
            self.streams.flush(task.stream)
            return task
        return None

    def _launched(self, req: LaunchRequest, plan) -> None:
        """After a dispatch was queued (a CUDA server arms its warm path here)."""

    def _plan(self, req: LaunchRequest) -> "_LaunchPlan":
        """What a launch of this kernel on these buffers needs, worked out once.

        Keyed by the kernel, the bindings (scalars by type only: their values change from launch
        to launch and are filled in per launch), the geometry and the options. A plan holds views
        of the memory it binds, so plans are dropped when that memory is freed; dynamic-count
        launches are not cached (their key would hold the count's handle alive).
        """
        args = req.args
        pkey = None
        if req.count_binding is None:
            pkey = (req.kernel.id,
                    tuple(a if type(a) is Binding else a.key if type(a) in COMPOSITE_TYPES
                          else type(a) for a in args),
                    req.count, req.dim, req.options)
            plan = self._launch_plans.get(pkey)
            if plan is not None:
                self.stats["cache_hits"] += 1
                return plan
        arrays = [self.host_array(a) if type(a) is Binding
                  else a.materialize(self.host_array) if type(a) in COMPOSITE_TYPES else a
                  for a in args]
        entry = self._compiled(req, arrays)
        reads, writes = self._regions(req, entry.access)
        count_view = self.host_array(req.count_binding) if req.count_binding is not None else None
        composites = tuple(i for i, a in enumerate(args) if type(a) in COMPOSITE_TYPES)
        for i in composites:
            # Materialized per launch (op_launch); kept, the value would hold views of buffers
            # the plan is not indexed by (a tuple item the kernel never touches).
            arrays[i] = None
        plan = _LaunchPlan(entry, arrays,
                           tuple(i for i, a in enumerate(args)
                                 if type(a) is not Binding and type(a) not in COMPOSITE_TYPES),
                           reads, writes, {r[0] for r in reads}, {w[0] for w in writes}, count_view,
                           composites)
        if pkey is not None and entry.error is None:
            self._keep_plan(pkey, plan)
        return plan

    def _keep_plan(self, pkey, plan) -> None:
        """Cache a launch plan, indexed by the memory it binds so a free drops it (bounded: a
        program that binds ever new buffers clears the cache rather than growing it)."""
        if len(self._launch_plans) >= 4096:
            self._launch_plans.clear()
            self._plans_by_memory.clear()
        self._launch_plans[pkey] = plan
        for mem in plan.read_mems | plan.write_mems:
            self._plans_by_memory.setdefault(mem, []).append(pkey)

    def _timed(self, rec: Recorded, task: Task):
        ledger = self.ledger

        def run():
            start = time.perf_counter()
            task.duration = run_recorded(ledger, rec)
            if task.duration is not None and config.get_bool("NUMBA_CUBE_PROFILE_LOG"):
                profile_log.info("%s on %s: %.3f ms", rec.kernel_id, self.device, task.duration * 1e3)
            if observers.tasks_observed():
                end = time.perf_counter()
                observers.notify_task(observers.TaskEvent(
                    self.device, task.task_id, rec.kernel_id, task.stream,
                    tuple(d.task_id for d in task.deps), start if task.duration is not None else None,
                    end if task.duration is not None else None,
                    ledger.first_failure(rec.writes) is not None))

        return run

    def _compiled(self, req: LaunchRequest, arrays: list) -> CacheEntry:
        """The cache entry for this launch: a two-level lookup.

        The *launch-plan* key is made of plain Python values (dtype and ndim per buffer, the type
        of each scalar) and is cheap to hash, so a warm launch never builds backend types. Only on
        its miss is the real compile-cache key built (CONTRACT.md 1.2: kernel id, argument types,
        alignment, what the backend bakes in), which several plan keys may share.
        """
        bindings = composite_bindings(req.args)
        extras = self.backend.cache_extras(req.count, req.dim)
        plan_key = (req.kernel.id,
                    tuple((a.dtype, len(a.shape), a.layout) if type(a) is Binding
                          else a.type_key if type(a) in COMPOSITE_TYPES else type(a)
                          for a in req.args),
                    alignment_of(bindings), extras, req.options)
        entry = self._plans.get(plan_key)
        if entry is not None:
            self.stats["cache_hits"] += 1
            return entry
        try:
            arg_types = tuple(self.backend.arg_type(a) for a in arrays)
        except Exception as exc:  # noqa: BLE001 - a type the backend cannot type fails the launch,
            # not the device thread (not cached: the key would need the types)
            err = CompileError(f"kernel {req.kernel.name}: the backend has no type for an argument: "
                               f"{type(exc).__name__}: {exc}")
            err.__cause__ = exc
            access = tuple((isinstance(a, np.ndarray) or type(b) in COMPOSITE_TYPES,) * 2
                           for a, b in zip(arrays, req.args))
            return CacheEntry(None, err, access)
        key = (req.kernel.id, arg_types, alignment_of(bindings), extras, req.options)
        entry = self.compile_cache.get(key)
        if entry is not None:
            self.stats["cache_hits"] += 1
            self._plans[plan_key] = entry
            return entry
        self.stats["compiles"] += 1
        ndims = tuple(a.ndim if isinstance(a, np.ndarray)
                      else analysis_entry(b) if type(b) in COMPOSITE_TYPES else None
                      for a, b in zip(arrays, req.args))
        try:
            access = resolve_access(req.kernel, ndims)
        except Exception:  # noqa: BLE001 - the analysis must never break a launch: assume all
            log.debug("IO analysis failed for %s", req.kernel.id, exc_info=True)
            access = tuple((n is not None, n is not None) for n in ndims)
        try:
            artifact = self.backend.compile(req.kernel, arg_types, extras, dict(req.options))
            entry = CacheEntry(artifact, None, access)
        except CompileError as exc:
            entry = CacheEntry(None, exc, access)
        except Exception as exc:  # noqa: BLE001 - Numba's own errors are compile failures too
            err = CompileError.wrapping(
                f"kernel {req.kernel.name} failed to compile: {type(exc).__name__}: {exc}", exc)
            entry = CacheEntry(None, err, access)
        self.compile_cache[key] = entry
        self._plans[plan_key] = entry
        return entry

    def _regions(self, req: LaunchRequest, access: tuple) -> tuple[tuple, tuple]:
        reads, writes = [], []
        for arg, (r, w) in zip(req.args, access):
            if isinstance(arg, Binding):
                if r:
                    reads.append(arg.region)
                if w:
                    writes.append(arg.region)
            elif type(arg) in COMPOSITE_TYPES:
                add_regions(arg, (r, w), reads, writes)
        if req.count_binding is not None:
            reads.append(req.count_binding.region)
        return tuple(reads), tuple(writes)

    # -- host copies, waiting ------------------------------------------------------------------------
    def op_write(self, b: Binding, staged: np.ndarray, stream) -> None:
        """A host write into a handle, in stream order; a full write repairs a failed buffer."""
        self._drain_frees()
        view = self.host_array(b)
        region = b.region

        def copy():
            view[...] = staged
            self.ledger.record((region,), None)

        task = Task(copy, stream, "host-write")
        deps = self.hazards.register(task, (), (b.memory_id,))
        self.streams.enqueue(task, deps)

    def op_wait_read(self, bindings) -> list:
        """Flush and return the tasks a read of ``bindings`` must wait for (their last writers)."""
        tasks = [t for t in (self.hazards.writer_of(b.memory_id) for b in bindings) if t is not None]
        self.streams.flush_tasks(tasks)
        return tasks

    def op_wait_all_users(self, bindings) -> list:
        tasks = [t for b in bindings for t in self.hazards.users_of(b.memory_id)]
        self.streams.flush_tasks(tasks)
        return tasks

    def op_sync(self) -> list:
        self._drain_frees()
        tails = self.streams.flush_all()
        self.hazards.prune_streams()
        return tails

    def op_known_failures(self, bindings) -> list:
        """For ``check``: per binding, a failure already known, without waiting for anything."""
        out = []
        for b in bindings:
            writer = self.hazards.writer_of(b.memory_id)
            if writer is not None and writer.failure_hint is not None:
                out.append(writer.failure_hint)
                continue
            # A claim in flight is not a known failure: check() does not wait, so it must not
            # report what may still complete.
            out.append(self.failure_of(b))
        return out

    def failure_of(self, b: Binding) -> Failure | None:
        """The failure a reader of ``b`` reports, after waiting for the writers it is ordered
        after: claims still in flight belong to launches it is not ordered with, and are not
        failures (yet)."""
        failure = self.ledger.failure_of(b.region)
        return None if failure is not None and failure.in_flight else failure
