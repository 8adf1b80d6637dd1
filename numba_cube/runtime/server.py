"""The server of a host-executing device: the launch path's steps on the server side.

One ``HostServer`` owns one device: its compile cache, its memory table and pool, its stream
queues, its dependency state and its failure ledger. Every ``op_*`` method runs on the device's
channel (one at a time, see ``channel.py``); stream work runs later on stream workers
(``host_streams.py``) and touches only the ledger (locked) and memory it was handed.

A launch, in the order of runtime.md section 1.2:

1. cache key: kernel id, argument types, alignment, and what the backend bakes in;
2. compile or reuse; a compile failure is remembered with the cache entry;
3. a SKIP launch (dry run) ends here: nothing claimed, no dependency, no memory touched;
4. read and write sets (three-level fallback), dependencies from the hazard tracker, then a task
   that opens the execute scope when it runs. A compile failure becomes a task that goes through
   ``failed_writing`` *in stream order*, so that earlier work on the same buffers cannot overwrite
   it, while ``check`` already knows about it (``Task.failure_hint``).
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .. import config
from ..errors import CaptureError, CompileError, DeviceFault
from ..kernel.kernel import resolve_access
from . import observers
from .capture import CaptureState, Graph, Recorded, run_recorded
from .handle import Binding
from .hazards import HazardTracker
from .host_streams import HostStreams, Task
from .ledger import Failure, Ledger, failed_writing
from .memory import ALIGNMENT, MemoryPool
from .modes import LaunchMode

__all__ = ["HostServer", "LaunchRequest", "CacheEntry"]

log = logging.getLogger("numba_cube")
profile_log = logging.getLogger("numba_cube.profile")


class LaunchRequest(NamedTuple):
    """Everything a launch needs, decided on the issuing thread and passed as a value.

    A NamedTuple: one is made per launch, and it is the cheapest immutable record Python has."""

    kernel: Any
    count: Any            # CubeCount (static or dynamic)
    dim: Any              # CubeDim
    args: tuple           # Binding or scalar, in parameter order
    count_binding: Binding | None
    stream: Any           # StreamId
    mode: LaunchMode
    options: tuple        # client compile options, as sorted (key, value) pairs
    # (kernel as passed, count, dim, args) as the caller passed them, when the server may arm a
    # warm path for the next identical launch (see backends/cuda/fast_path.py); else None.
    raw: tuple | None = None


@dataclass
class CacheEntry:
    """One compiled kernel for one key: the artifact or the compile failure, and its IO."""

    artifact: Any
    error: BaseException | None
    access: tuple          # per parameter (read, written)


def alignment_of(bindings) -> int:
    """The strongest alignment every view shares: the pool alignment lowered to the lowest set bit
    of each start offset. Reads descriptors only (runtime.md 1.2 step 1)."""
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


class ExclusiveGate:
    """Exclusive use of a device by one thread (``client.exclusive``): other threads' launches
    wait at the gate while it is held. The hot path reads one attribute when nobody holds it."""

    def __init__(self):
        self._lock = threading.RLock()
        self._depth = 0
        self.owner: int | None = None

    def __enter__(self):
        self._lock.acquire()
        self._depth += 1
        self.owner = threading.get_ident()
        return self

    def __exit__(self, *exc):
        self._depth -= 1
        if self._depth == 0:
            self.owner = None
        self._lock.release()
        return False

    def wait_if_held(self) -> None:
        owner = self.owner
        if owner is not None and owner != threading.get_ident():
            with self._lock:
                pass


class HostServer:
    """Policy core of a backend whose kernels run on host worker threads."""

    #: A server may offer a warm launch path (``fast_launch(kernel, count, dim, args, stream,
    #: options) -> kernel id or None``); the client tries it first when nothing observes launches.
    #: Host servers have none: a launch there is a queue hop anyway.
    fast_launch = None

    def __init__(self, device: str, backend, channel, *, max_tasks: int = 32, baseline_rule: bool = False):
        self.device = device
        self.backend = backend
        self.channel = channel
        self.ledger = Ledger()
        self.hazards = HazardTracker(baseline=baseline_rule)
        self.fault: BaseException | None = None
        self.streams = HostStreams(device, max_tasks, self._on_fault)
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

    # -- memory ---------------------------------------------------------------------------------------
    def op_alloc(self, nbytes: int, stream=None) -> int:
        self._drain_frees()
        capture = self.captures.get(stream)
        if capture is not None:
            # Nothing may be allocated inside a window: only what the warm-up left in the pool.
            self.pool.frozen = True
            try:
                cap, mem = self.pool.allocate(nbytes)
            except MemoryError:
                capture.refuse(f"allocation of {nbytes} bytes (the pool holds no free block that fits; "
                               f"run the warm-up after graph_prepare())")
                self.pool.frozen = False
                cap, mem = self.pool.allocate(nbytes)
            finally:
                self.pool.frozen = False
        else:
            cap, mem = self.pool.allocate(nbytes)
        memory_id = next(self._ids)
        self.memory[memory_id] = (cap, mem)
        return memory_id

    def release_memory(self, memory_id: int) -> None:
        """A handle's finalizer sends this through the channel, so it runs after every operation
        submitted before the handle was dropped (a launch that binds the handle registers as a user
        of the memory first, and the free then waits for it).

        Frees are drained at the start of operations rather than wherever a finalizer happens to
        fire: the garbage collector can run in the middle of a server operation, and the server's
        state is not re-entrant (the channels defer such nested submissions, see channel.py).
        """
        self._to_free.append(memory_id)
        self._drain_frees()

    def _drain_frees(self) -> None:
        while self._to_free:
            memory_id = self._to_free.popleft()
            cap, mem = self.memory.pop(memory_id)
            self._views.pop(memory_id, None)
            for pkey in self._plans_by_memory.pop(memory_id, ()):
                self._launch_plans.pop(pkey, None)
            users = self.hazards.users_of(memory_id)
            self.hazards.forget(memory_id)
            self.pool.free(cap, mem, users)
            self.ledger.forget(memory_id)
            if users:
                # A task still running may close its scope on this id after the forget above; ids
                # are never reused, so that entry is harmless, but forget it again once they end
                # so a loop of failing launches into dropped buffers does not grow the ledger.
                self._late_forget.append((memory_id, users))
        if self._late_forget:
            still = []
            for memory_id, users in self._late_forget:
                if all(t.done for t in users):
                    self.ledger.forget(memory_id)
                else:
                    still.append((memory_id, users))
            self._late_forget = still

    def host_array(self, b: Binding) -> np.ndarray:
        """The backend's view of a binding's bytes (a NumPy view on host backends).

        Views are cached per binding while the memory lives: a loop that launches on the same
        handles makes each view once (dropped with the memory in ``_drain_frees``)."""
        views = self._views.get(b.memory_id)
        if views is None:
            views = self._views[b.memory_id] = {}
        view = views.get(b)
        if view is None:
            cap, mem = self.memory[b.memory_id]
            view = self.backend.array(mem, b.offset, b.shape, b.dtype)
            if len(views) < 64:   # bounded: a program that makes many distinct views of one buffer
                views[b] = view
        return view

    def initial_write(self, b: Binding, data: np.ndarray) -> None:
        """Fill fresh memory (called on the issuing thread by ``create``): no task can refer to a
        memory id that was just made, so no ordering is needed."""
        self.host_array(b)[...] = data

    def read_binding(self, b: Binding) -> np.ndarray:
        """A host copy of a binding's bytes, once the caller has waited for its writers."""
        return self.host_array(b).copy()

    # -- launch -------------------------------------------------------------------------------------------
    def op_launch(self, req: LaunchRequest, blocking: bool = False) -> Task | None:
        """Steps 1-4 of runtime.md 1.2. With ``blocking`` (a profiled launch) the task is flushed
        and returned so the caller can wait for it and read its duration."""
        if self._to_free:
            self._drain_frees()
        plan = self._plan(req)
        entry = plan.entry
        if req.mode is LaunchMode.SKIP:
            self.stats["skipped"] += 1
            return None
        reads, writes = plan.reads, plan.writes
        kid = req.kernel.id
        capture = self.captures.get(req.stream)
        if entry.error is not None:
            if capture is not None:
                capture.refuse(f"launch of {kid} (its kernel does not compile: {entry.error})")
                return None
            task = Task(lambda: failed_writing(self.ledger, kid, writes, entry.error), req.stream, kid)
            task.failure_hint = Failure(entry.error, kid, (kid,))
        else:
            arrays = plan.arrays
            if plan.scalars:
                arrays = list(arrays)
                for i in plan.scalars:
                    arrays[i] = req.args[i]
            rec = Recorded(kid, entry.artifact, req.count.as_tuple(), req.dim.as_tuple(), arrays,
                           plan.count_view, reads, writes)
            if capture is not None:
                if self.ledger.first_failure(reads) is not None:
                    capture.refuse(f"launch of {kid} (skipped: an input carries a failure)")
                else:
                    capture.recorded.append(rec)
                return None
            task = Task(None, req.stream, kid)
            task.run = self._timed(rec, task)
        deps = self.hazards.register(task, plan.read_mems, plan.write_mems)
        task.task_id = next(self._task_ids)
        self.streams.enqueue(task, deps)
        self.stats["launched"] += 1
        if blocking:
            self.streams.flush(req.stream)
            return task
        return None

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
            pkey = (req.kernel.id, tuple(a if type(a) is Binding else type(a) for a in args),
                    req.count, req.dim, req.options)
            plan = self._launch_plans.get(pkey)
            if plan is not None:
                self.stats["cache_hits"] += 1
                return plan
        arrays = [self.host_array(a) if type(a) is Binding else a for a in args]
        entry = self._compiled(req, arrays)
        reads, writes = self._regions(req, entry.access)
        count_view = self.host_array(req.count_binding) if req.count_binding is not None else None
        plan = _LaunchPlan(entry, arrays, tuple(i for i, a in enumerate(args) if type(a) is not Binding),
                           reads, writes, {r[0] for r in reads}, {w[0] for w in writes}, count_view)
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
        its miss is the real compile-cache key built (runtime.md 1.2: kernel id, argument types,
        alignment, what the backend bakes in), which several plan keys may share.
        """
        bindings = [a for a in req.args if type(a) is Binding]
        extras = self.backend.cache_extras(req.count, req.dim)
        plan_key = (req.kernel.id,
                    tuple((a.dtype, len(a.shape)) if type(a) is Binding else type(a) for a in req.args),
                    alignment_of(bindings), extras, req.options)
        entry = self._plans.get(plan_key)
        if entry is not None:
            self.stats["cache_hits"] += 1
            return entry
        arg_types = tuple(self.backend.arg_type(a) for a in arrays)
        key = (req.kernel.id, arg_types, alignment_of(bindings), extras, req.options)
        entry = self.compile_cache.get(key)
        if entry is not None:
            self.stats["cache_hits"] += 1
            self._plans[plan_key] = entry
            return entry
        self.stats["compiles"] += 1
        ndims = tuple(a.ndim if isinstance(a, np.ndarray) else None for a in arrays)
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
            err = CompileError(f"kernel {req.kernel.name} failed to compile: {type(exc).__name__}: {exc}")
            err.__cause__ = exc
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

    # -- capture ------------------------------------------------------------------------------------------
    def op_graph_prepare(self) -> None:
        """Keep what the warm-up frees in the pool: the window may only reuse it."""
        self.pool.max_idle_bytes = max(self.pool.max_idle_bytes, 1 << 62)
        self.prepared = True

    def op_start_capture(self, stream) -> None:
        if stream in self.captures:
            raise CaptureError(f"a capture is already open on {stream}; stop it first")
        if not self.prepared:
            raise CaptureError("start_capture() needs graph_prepare() first, before the warm-up run")
        self.captures[stream] = CaptureState(stream)

    def op_stop_capture(self, stream) -> Graph:
        capture = self.captures.pop(stream, None)
        if capture is None:
            raise CaptureError(f"no capture is open on {stream}")
        if capture.doomed is not None:
            raise CaptureError(f"the capture failed: {capture.doomed} was refused inside the window")
        memory_ids = frozenset(r[0] for rec in capture.recorded for r in rec.reads + rec.writes)
        return Graph(self, stream, capture.recorded, memory_ids)

    def op_refuse(self, stream, what: str) -> CaptureError | None:
        """If ``stream`` is capturing, doom the capture and return the error to raise."""
        capture = self.captures.get(stream)
        return None if capture is None else capture.refuse(what)

    def op_replay(self, graph: Graph) -> None:
        self._drain_frees()
        task, reads, writes = graph._task(self)
        deps = self.hazards.register(task, reads, writes)
        self.streams.enqueue(task, deps)
        self.stats["replays"] += 1
