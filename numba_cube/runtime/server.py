"""The policy server: one per device, for every backend; the launch path's steps on the server side.

One ``DeviceServer`` owns one device: its memory table and pool, its stream executor, its
dependency state, its capture windows and its failure ledger. What it does to the device it asks
of a *mechanism* it holds (``backends/base.py``'s declared ``DeviceMechanism``: compile and bind a
launch, dispatch it, memory, copies, the executor of streams and events, graphs): the CUDA
backend supplies one (``backends/cuda/mechanism.py``), and a ``HostBackend`` (the CPU backend, the
simulator) is adapted by the runtime's ``HostMechanism`` (``launch/host_mechanism.py``). No backend
subclasses this server. Every ``op_*`` method runs on the device's channel (one at a time, see
``streams/channel.py``); stream work runs later on the executor and touches only the ledger (locked) and
memory it was handed. Its parts that stand on their own are mixed in from their modules: the
memory table (``memory/table.py``), the capture operations (``graphs/capture.py``) and where launch
outcomes go (``ledger/outcomes.py``).

A launch, in the order of CONTRACT.md section 1.2:

1. cache key: the *bound launch* of the request (``bound_launch``) is cached here under the
   mechanism's key and dropped when a buffer it binds is freed; on its miss the mechanism looks
   up its compile cache (kernel id, argument types, alignment, what the backend bakes in);
2. compile or reuse (the mechanism); a compile failure is remembered with the compiled entry;
3. a SKIP launch (dry run) ends here: nothing claimed, no dependency, no memory touched;
4. read and write sets (the bound launch's), dependencies from the hazard tracker, then a task
   that opens the execute scope when it runs. A compile failure, or a geometry beyond CUDA's
   launch limits (``launch/geometry.py``; what the CUDA driver refuses is refused on every backend),
   becomes a task that goes through ``failed_writing`` *in stream order*, so that earlier work
   on the same buffers cannot overwrite it, while ``check`` already knows about it
   (``Task.failure_hint``).

A failure no buffer can carry (the launch writes none) goes to the launch's own outcome when its
caller waits for it, else to the device's log of unrecorded failures (``ledger/outcomes.py``): the
dispatch reports it through ``Recorded.report``, which the mechanism asks of ``reporter``.
"""

from __future__ import annotations

import collections
import itertools
import logging

import numpy as np

from .. import config
from ..backends.base import DeviceMechanism
from ..errors import DeviceFault
from numba_cube.runtime.graphs.capture import CaptureOps
from numba_cube.runtime.streams.channel import ForkedChannel
from numba_cube.runtime.client.exclusive import ExclusiveGate
from numba_cube.runtime.memory.handle import Binding
from numba_cube.runtime.streams.hazards import HazardTracker
from numba_cube.runtime.launch.host_mechanism import HostMechanism
from numba_cube.runtime.ledger.ledger import Failure, Ledger
from numba_cube.runtime.ledger.pending import UNRESOLVED
from numba_cube.runtime.memory.pool import MemoryPool
from numba_cube.runtime.memory.table import MemoryTable
from numba_cube.runtime.client.modes import LaunchMode
from numba_cube.runtime.ledger.outcomes import LaunchRouting, UnrecordedFailures
from numba_cube.runtime.launch.requests import LaunchRequest, refused_launch_text

# LaunchRequest and ExclusiveGate are re-exported: this is where servers' users find them.
__all__ = ["DeviceServer", "LaunchRequest", "ExclusiveGate", "MAX_BOUND_LAUNCHES"]

log = logging.getLogger("numba_cube")

#: Bound launches kept per device: a program that binds ever new buffers clears the cache
#: rather than growing it.
MAX_BOUND_LAUNCHES = 4096


class DeviceServer(MemoryTable, CaptureOps, LaunchRouting):
    """The policy of one device, over the mechanism it holds (see the module docstring)."""

    def __init__(self, device: str, backend, channel, *, max_tasks: int = 32,
                 baseline_rule: bool | None = None):
        """``backend``: a ``DeviceMechanism``, or a ``HostBackend`` that the runtime's
        ``HostMechanism`` adapts (with ``max_tasks`` worker threads at most)."""
        self.device = device
        mechanism = (backend if isinstance(backend, DeviceMechanism)
                     else HostMechanism(backend, max_tasks))
        self.mechanism = mechanism
        self.channel = channel
        self.ledger = Ledger()
        if baseline_rule is None:       # the process's rule (one place reads it, for every backend)
            baseline_rule = config.get_str("NUMBA_CUBE_DEPENDENCY_RULE", "hazard",
                                           ("hazard", "baseline")) == "baseline"
        self.hazards = HazardTracker(baseline=baseline_rule)
        self.fault: BaseException | None = None
        self.memory: dict[int, tuple[int, object]] = {}  # memory id -> (capacity, backend memory)
        #: counters of what the server did (compiles, cache hits, launches...); ``stats`` reads
        #: them with what the mechanism counts apart (its warm launches).
        self.counters = collections.Counter()
        #: the ids of tasks and of memory (public: a mechanism's warm path draws from them).
        self.task_ids = itertools.count(1)
        self.memory_ids = itertools.count(1)
        #: memory ids whose handles were dropped, forgotten at the start of the next operation.
        self.pending_frees: collections.deque = collections.deque()
        self._late_forget: list = []
        self._views: dict = {}                      # memory id -> {Binding: backend view}
        self._bound: dict = {}                      # bound-launch key -> bound launch
        self._bound_by_memory: dict = {}            # memory id -> bound-launch keys that bind it
        self.captures: dict = {}       # stream -> CaptureState
        self.exclusive = ExclusiveGate()
        self.graph_prepared = False
        #: the KeyboardInterrupt of a compile that was interrupted and handled (its launch
        #: failed, nothing cached), on its way to the caller (``op_launch``)
        self.handled_interrupt: BaseException | None = None
        self.unrecorded = UnrecordedFailures(device)   # failures no buffer carries (ledger/outcomes.py)
        self.unrecorded.resolve = self.outcome_of
        self.streams = mechanism.attach(self)
        self.pool = MemoryPool(mechanism.allocate, mechanism.release, settle=self._settle)
        #: the most dynamic shared memory (bytes per cube) a launch may ask for; the client refuses
        #: more before queueing anything. 0: the backend has none.
        self.max_dynamic_shared_bytes = int(mechanism.max_dynamic_shared_bytes)
        self.strided_host_writes = mechanism.strided_host_writes
        #: the warm launch path (``DeviceMechanism.warm_launcher``) or None; the client tries it
        #: first when nothing observes launches. Bound here once: no layer of ours on that path.
        self.fast_launch = mechanism.warm_launcher()
        # Interop seams, where the mechanism has them (the client and handles look them up:
        # ``launch/arguments.py``, ``memory/handle.py``).
        self.synchronize_foreign = mechanism.synchronize_foreign
        if mechanism.adopt_foreign is not None:
            self.adopt_foreign = mechanism.adopt_foreign
        if mechanism.cuda_array_interface is not None:
            self.cuda_array_interface = mechanism.cuda_array_interface

    def __repr__(self) -> str:
        return f"<DeviceServer {self.device} ({type(self.mechanism).__name__})>"

    @property
    def stats(self) -> collections.Counter:
        """The counters, with what the mechanism counts apart (``DeviceMechanism.fold_counts``)."""
        self.mechanism.fold_counts(self.counters)
        return self.counters

    def cache_sizes(self) -> dict:
        """How many entries the per-buffer caches hold (bound launches, views, and the
        mechanism's own: ``DeviceMechanism.cache_sizes``): for tests and benchmarks that check
        that a steady state does not grow them."""
        sizes = {"bound_launches": len(self._bound),
                 "views": sum(len(v) for v in self._views.values())}
        sizes.update(self.mechanism.cache_sizes())
        return sizes

    # -- options -----------------------------------------------------------------------------------
    def known_options(self) -> frozenset:
        """The client options (``cube.client(device, **options)``) this device's compile stage
        understands (``DeviceMechanism.known_options``)."""
        return self.mechanism.known_options()

    # -- faults -----------------------------------------------------------------------------------
    def record_fault(self, exc: BaseException) -> None:
        """A task or driver call raised outside any execute scope: the device is broken if the
        mechanism says so (``DeviceMechanism.is_device_fault``)."""
        if self.mechanism.is_device_fault(exc):
            self.mark_broken(exc)

    def mark_broken(self, exc: BaseException) -> None:
        """The device is broken (the first cause is kept): ``sync()`` raises ``DeviceFault``."""
        if self.fault is None:
            self.fault = exc

    def device_fault(self) -> DeviceFault | None:
        if self.fault is None and self.channel.fault is None:
            self.mechanism.probe_fault()
        cause = self.fault or self.channel.fault
        if cause is None and self.channel.alive:
            return None
        err = DeviceFault(f"device {self.device} is broken: {type(cause).__name__}: {cause}"
                          if cause else f"the device thread of {self.device} died")
        err.__cause__ = cause
        return err

    def _settle(self, tasks: list) -> None:
        """Wait until ``tasks`` are done (the pool's ``settle``: memory they use is wanted back).
        An abandoned task is done too; its fault is the device's, reported by ``sync()``."""
        self.streams.flush_tasks(tasks)
        for task in tasks:
            try:
                task.wait()
            except DeviceFault:
                pass

    def disown_after_fork(self, parent_pid: int) -> None:
        """In a child made by ``os.fork()``: this device's threads stayed in the parent, so every
        later operation raises ``DeviceFault`` (``channel.ForkedChannel``) rather than waiting
        for them; the warm path, which would run on the old lock, is disarmed."""
        self.channel = ForkedChannel(self.device, parent_pid)
        self.fault = self.channel.fault
        warm = getattr(self.mechanism, "warm", None)
        if warm is not None:
            warm.clear()

    # -- launch -------------------------------------------------------------------------------------------
    def op_launch(self, req: LaunchRequest, blocking: bool = False):
        """Steps 1-4 of CONTRACT.md 1.2, for every backend: the one copy of the launch policy.
        With ``blocking`` (a profiled launch, or a caller that waits for its outcome) the task is
        returned so the caller can wait for it. What differs between backends is mechanism, behind
        the ``DeviceMechanism`` hooks called here."""
        try:
            if self.pending_frees:
                self.drain_frees()
            mechanism = self.mechanism
            mechanism.prepare()
            if req.mode is LaunchMode.SKIP:
                return self._skip(req)
            bound = self.bound_launch(req)
            kid = req.kernel.id
            capture = self.captures.get(req.stream) if self.captures else None
            error = bound.error if bound.error is not None else mechanism.refusal(req, bound)
            if error is not None:
                answer = None
                if capture is not None:
                    capture.refuse(refused_launch_text(kid, error))
                else:
                    task = mechanism.refused_task(req, self._refused_run(req, bound.writes, error))
                    task.failure_hint = Failure(error, kid, (kid,))
                    answer = self._submit(task, bound, blocking)
                if isinstance(error, KeyboardInterrupt):
                    # An interrupted compile, now recorded on the write set: the caller's
                    # interrupt again, raised at its call.
                    self.handled_interrupt = error
                    raise error
                return answer
            rec = mechanism.dispatch(req, bound, capture is not None)
            if capture is not None:
                if self.ledger.first_failure(bound.reads) is not None:
                    capture.refuse(f"launch of {kid} (skipped: an input carries a failure)")
                else:
                    reason = mechanism.not_capturable(req, bound, rec)
                    if reason is not None:
                        capture.refuse(reason)
                    else:
                        capture.recorded.append(rec)
                return None
            answer = self._submit(mechanism.dispatch_task(req, bound, rec), bound, blocking)
            mechanism.launched(req, bound)
            return answer
        except KeyboardInterrupt as exc:
            # An interrupted compile was handled (its launch failed, nothing cached). One that
            # landed anywhere else in these few microseconds may have cut a step in half: the
            # device is then broken, said so by sync(), rather than silently inconsistent.
            if exc is not self.handled_interrupt:
                self.mark_broken(exc)
            self.handled_interrupt = None
            raise

    def _submit(self, task, bound, blocking: bool):
        """Queue ``task`` after the tasks the hazard tracker names for the bound launch's buffers."""
        deps = self.hazards.register(task, bound.read_mems, bound.write_mems)
        task.task_id = next(self.task_ids)
        self.mechanism.enqueue(task, deps, bound, blocking)
        self.counters["launched"] += 1
        return task if blocking else None

    def bound_launch(self, req: LaunchRequest):
        """The bound launch of ``req``: cached under the mechanism's key (one dict lookup when
        warm), indexed by the memory it binds so that a free drops it."""
        key = self.mechanism.bound_launch_key(req)
        if key is not None:
            bound = self._bound.get(key)
            if bound is not None:
                self.counters["cache_hits"] += 1
                return bound
        bound = self.mechanism.bind_launch(req)
        if key is not None and not isinstance(bound.error, KeyboardInterrupt):
            if len(self._bound) >= MAX_BOUND_LAUNCHES:
                self._bound.clear()
                self._bound_by_memory.clear()
            self._bound[key] = bound
            for mem in bound.read_mems | bound.write_mems:
                self._bound_by_memory.setdefault(mem, []).append(key)
        return bound

    def bound_launches(self) -> list:
        """The cached bound launches (a read-out for tests and tools: which form a launch took)."""
        return list(self._bound.values())

    def forget_bound_launches(self, memory_id: int | None = None) -> None:
        """Drop the cached bound launches that bind ``memory_id`` (all of them for None): the next
        launch binds afresh (a free does this; tests and benchmarks use it to measure a cold
        launch)."""
        if memory_id is None:
            self._bound.clear()
            self._bound_by_memory.clear()
            return
        for key in self._bound_by_memory.pop(memory_id, ()):
            self._bound.pop(key, None)

    # -- host copies, waiting ------------------------------------------------------------------------
    def op_write(self, b: Binding, staged: np.ndarray, stream) -> None:
        """A host write into a handle, in stream order; a full write repairs a failed buffer."""
        if self.pending_frees:
            self.drain_frees()
        self.mechanism.prepare()
        task = self.mechanism.write_task(b, staged, stream)
        deps = self.hazards.register(task, (), (b.memory_id,))
        self.streams.enqueue(task, deps)

    # Waiting happens on the calling thread after these return (``task.wait``), so the mechanism
    # is prepared first (a CUDA context current there).
    def op_wait_read(self, bindings) -> list:
        """Flush and return the tasks a read of ``bindings`` must wait for (their last writers)."""
        self.mechanism.prepare()
        tasks = [t for t in (self.hazards.writer_of(b.memory_id) for b in bindings) if t is not None]
        self.streams.flush_tasks(tasks)
        return tasks

    def op_wait_all_users(self, bindings) -> list:
        self.mechanism.prepare()
        tasks = [t for b in bindings for t in self.hazards.users_of(b.memory_id)]
        self.streams.flush_tasks(tasks)
        return tasks

    def op_sync(self) -> list:
        self.mechanism.prepare()
        self.mechanism.before_sync()
        self.drain_frees()
        tails = self.streams.flush_all()
        self.hazards.prune_streams()
        return tails

    def op_known_failures(self, bindings) -> list:
        """For ``check``: per binding, a failure already known, without waiting for anything."""
        self.mechanism.prepare()
        out = []
        for b in bindings:
            writer = self.hazards.writer_of(b.memory_id)
            if writer is not None and writer.failure_hint is not None:
                out.append(writer.failure_hint)
                continue
            # A claim in flight is not a known failure: check() does not wait, so it must not
            # report what may still complete (nor a pending state whose launch may still run).
            out.append(self.failure_of(b, waited=False))
        return out

    def failure_of(self, b: Binding, waited: bool = True) -> Failure | None:
        """The failure a reader of ``b`` reports, after waiting for the writers it is ordered
        after (``waited``): claims still in flight belong to launches it is not ordered with, and
        are not failures (yet). ``Pending`` states on ``b`` (``ledger/pending.py``) are resolved here,
        under the device lock (no launch may renew one meanwhile); after a wait they are decided
        (waiting for one whose completion the bookkeeping missed), else they count while their
        launch is not known complete as a claim in flight does."""
        ledger = self.ledger
        failure = ledger.failure_of(b.region)
        if failure is not None and not failure.in_flight:
            return failure
        if ledger.has_pending:
            with self.channel.lock:
                found = ledger.settle(b.region, wait=waited)
            if found is not None:
                return found
        return None

    def outcome_of(self, node, wait: bool = True):
        """The failure of a launch's ``Pending`` state (``ledger/pending.py``), None if clean, or
        ``UNRESOLVED`` (not ``wait``, and its launch not known complete): what a caller that
        waited for the launch (``launch_and_wait``) or a report of the unrecorded log asks."""
        with self.channel.lock:
            got = node.resolve()
            if got is UNRESOLVED and wait:
                node.wait()
                got = node.resolve(complete=True)
        return got
