"""The runtime's default mechanism: a ``HostBackend`` adapted to the declared ``DeviceMechanism``.

A backend whose kernels run on host threads (the CPU backend, the CUDA-simulator plugin) writes
only the small ``HostBackend`` interface (``backends/base.py``); this module supplies the rest of
the mechanism the policy server (``server.py``) drives, the same for all of them:

- the executor: per-stream worker threads (``streams/host_streams.py``);
- memory: the backend's bytes, viewed as NumPy arrays (host copies are array assignments);
- binding a launch (``HostBoundLaunch``): views of the bound buffers, the read and write sets,
  and the compiled artifact from a two-level compile cache (``_compiled``): a *signature key* of
  plain Python values (dtype, ndim, layout per buffer, the type of each scalar, alignment) is
  looked up first, and only on its miss the *compile key* of the backend's own argument types
  (CONTRACT.md 1.2), which several signature keys may share;
- dispatch: the bound launch's views with this launch's scalars, run by a task inside the
  execute scope (``dispatch.run_recorded``); graphs are software graphs (``capture.Graph``);
- on a server whose channel is an ``InlineChannel`` (the CPU backend), the warm path
  (``launch/warm_host.py``): a repeated launch is one match and the kernel call, and any short dispatch
  or host write with nothing to wait for runs on the issuing thread instead of hopping to a worker;
- borrowed memory: another library's arrays a backend describes (``HostBackend.foreign_memory``),
  adopted by the policy of ``memory/borrowed.py``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from numba_cube import config
from numba_cube.backends.base import DeviceMechanism, HostBackend
from numba_cube.errors import CompileError
from numba_cube.kernel.kernel import resolve_access
from numba_cube.runtime.client import observers, profiling
from numba_cube.runtime.memory.borrowed import BorrowedMemory
from numba_cube.runtime.streams.channel import InlineChannel
from numba_cube.runtime.graphs.capture import Graph
from numba_cube.runtime.launch.composite import COMPOSITE_TYPES, analysis_entry, composite_bindings
from numba_cube.runtime.launch.dispatch import Recorded, regions_of, run_recorded
from numba_cube.runtime.memory.handle import Binding
from numba_cube.runtime.streams.host_streams import HostStreams, Task
from numba_cube.runtime.client.interrupts import deferred_interrupt
from numba_cube.runtime.memory.pool import ALIGNMENT
from numba_cube.runtime.launch.requests import refusal_of
from numba_cube.runtime.launch.warm_host import WarmLaunches

__all__ = ["HostMechanism", "HostBoundLaunch", "CacheEntry", "alignment_of"]

log = logging.getLogger("numba_cube")


@dataclass
class CacheEntry:
    """One compiled kernel for one compile key: the artifact or the compile failure, and its IO."""

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


class HostBoundLaunch(NamedTuple):
    """A launch bound to its buffers on a host backend (see ``DeviceMechanism``)."""

    entry: CacheEntry
    arrays: list          # backend views of the bindings, scalars as given when it was bound
    scalars: tuple        # positions of scalar arguments (filled in per launch)
    reads: tuple
    writes: tuple
    read_mems: set
    write_mems: set
    count_view: Any
    composites: tuple = ()  # positions of composite arguments (materialized per launch)

    @property
    def error(self) -> BaseException | None:
        """The compile failure (what the server asks every backend's bound launch)."""
        return self.entry.error


class HostMechanism(DeviceMechanism):
    """``DeviceMechanism`` over a ``HostBackend`` (see the module docstring)."""

    def __init__(self, backend, max_tasks: int = 32):
        self.backend = backend
        self.name = getattr(backend, "name", "?")
        self.max_tasks = max_tasks
        self.max_dynamic_shared_bytes = int(getattr(backend, "max_dynamic_shared_bytes", 0))
        self.compile_cache: dict[tuple, CacheEntry] = {}       # compile key -> entry
        self._by_signature: dict[tuple, CacheEntry] = {}       # signature key -> entry
        self.server = None
        #: another library's arrays bound without a copy (``memory/borrowed.py``), for a backend that
        #: describes them (``HostBackend.foreign_memory``); the seam exists only for such a one
        self.borrowed_memory = BorrowedMemory()
        #: the warm path (``launch/warm_host.py``), made in ``attach`` when the server's channel allows it
        self.warm: WarmLaunches | None = None
        if type(backend).foreign_memory is not HostBackend.foreign_memory:
            self.adopt_foreign = self._adopt_foreign

    def attach(self, server) -> HostStreams:
        self.server = server
        self.counters = server.counters
        streams = HostStreams(server.device, self.max_tasks, server.record_fault)
        # The warm path needs the device lock of an InlineChannel (launch/warm_host.py): on a device
        # thread every operation is a hop anyway.
        if type(server.channel) is InlineChannel:
            self.warm = WarmLaunches(channel=server.channel, ledger=server.ledger,
                                     hazards=server.hazards, streams=streams,
                                     drain=server.drain_frees, captures=server.captures,
                                     task_ids=server.task_ids, stats=server.counters)
        return streams

    def known_options(self) -> frozenset:
        # A backend that declares nothing gets the runtime's portable option only.
        return frozenset(getattr(self.backend, "compile_options", ("boundscheck",)))

    def warm_launcher(self):
        return self.warm.fire if self.warm is not None else None

    def fold_counts(self, counters) -> None:
        """Everything is counted in the server's counters already."""

    def cache_sizes(self) -> dict:
        return {"warm_launches": len(self.warm)} if self.warm is not None else {}

    def is_device_fault(self, exc: BaseException) -> bool:
        return True     # a worker thread that raised outside a scope is a broken device

    def probe_fault(self) -> None:
        """Nothing to ask: host faults are reported as they happen."""

    # -- memory and copies ---------------------------------------------------------------------------
    def allocate(self, nbytes: int):
        return self.backend.allocate(nbytes)

    def release(self, memory) -> None:
        self.backend.release(memory)

    def before_free(self, memory_id: int) -> bool:
        if self.warm is not None:
            self.warm.forget(memory_id)
        # Borrowed bytes belong to another library: never to the pool.
        return not (self.borrowed_memory and self.borrowed_memory.release_id(memory_id))

    def _adopt_foreign(self, obj):
        """``obj`` (no ``Handle``) as a borrowed handle when the backend describes it, else None
        (the argument is then refused as unsupported). Described on the issuing thread, adopted
        on the server's channel."""
        foreign = self.backend.foreign_memory(obj)
        if foreign is None:
            return None
        return self.server.channel.call(self.borrowed_memory.adopt, self.server, foreign, obj)

    def view(self, memory, b: Binding) -> np.ndarray:
        if b.strides is None:
            return self.backend.array(memory, b.offset, b.shape, b.dtype)
        # an F-ordered, transposed, strided or broadcast view (memory/handle.py)
        return self.backend.strided_array(memory, b.offset, b.shape, b.dtype, b.strides)

    def initial_write(self, b: Binding, data: np.ndarray) -> None:
        """No task can refer to a memory id that was just made, so no ordering is needed."""
        self.server.host_array(b)[...] = data

    def read_binding(self, b: Binding) -> np.ndarray:
        return self.server.host_array(b).copy(order="K")

    def write_task(self, b: Binding, staged: np.ndarray, stream) -> Task:
        view = self.server.host_array(b)
        region = b.region
        ledger = self.server.ledger

        def copy():
            view[...] = staged
            ledger.record((region,), None)

        task = Task(copy, stream, "host-write")
        # With nothing to wait for, it may copy at once, on the issuing thread (the caller
        # already paid one copy of these bytes to stage them): HostStreams.enqueue decides.
        task.inline = self.warm is not None
        return task

    def before_sync(self) -> None:
        """Nothing held for finished work."""

    # -- launches ------------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Host memory needs no context."""

    def bound_launch_key(self, req):
        """Kernel, bindings (scalars by type only: their values are filled in per launch),
        geometry and options; None for a dynamic count (the key would hold its handle alive)."""
        if req.count_binding is not None:
            return None
        return (req.kernel.id,
                tuple(a if type(a) is Binding else a.key if type(a) in COMPOSITE_TYPES else type(a)
                      for a in req.args),
                req.count, req.dim, req.options)

    def bind_launch(self, req) -> HostBoundLaunch:
        host_array = self.server.host_array
        args = req.args
        arrays = [host_array(a) if type(a) is Binding
                  else a.materialize(host_array) if type(a) in COMPOSITE_TYPES else a
                  for a in args]
        entry = self._compiled(req, arrays)
        reads, writes = regions_of(req, entry.access)
        count_view = host_array(req.count_binding) if req.count_binding is not None else None
        composites = tuple(i for i, a in enumerate(args) if type(a) in COMPOSITE_TYPES)
        for i in composites:
            # Materialized per launch (dispatch); kept, the value would hold views of buffers
            # the bound launch is not indexed by (a tuple item the kernel never touches).
            arrays[i] = None
        return HostBoundLaunch(entry, arrays,
                               tuple(i for i, a in enumerate(args)
                                     if type(a) is not Binding and type(a) not in COMPOSITE_TYPES),
                               reads, writes, {r[0] for r in reads}, {w[0] for w in writes},
                               count_view, composites)

    def refusal(self, req, bound) -> BaseException | None:
        return refusal_of(req)

    def dispatch(self, req, bound: HostBoundLaunch, capturing: bool) -> Recorded:
        """The bound launch's arrays with this launch's scalars and composites."""
        if self.borrowed_memory:
            # From now on the launch, a user of the borrowed ids, keeps them from being swept.
            self.borrowed_memory.consume(req.args)
        arrays = bound.arrays
        if bound.scalars:
            arrays = list(arrays)
            for i in bound.scalars:
                arrays[i] = req.args[i]
        if bound.composites:
            # Tuples, records, enums, dates (launch/composite.py): their numbers change per launch.
            arrays = list(arrays)
            for i in bound.composites:
                arrays[i] = req.args[i].materialize(self.server.host_array)
        return Recorded(req.kernel.id, bound.entry.artifact, req.count.as_tuple(),
                        req.dim.as_tuple(), arrays, bound.count_view, bound.reads, bound.writes,
                        self.server.reporter(req, bound.writes), req.shared_bytes)

    def not_capturable(self, req, bound, rec: Recorded) -> str | None:
        return None     # software graphs re-run recorded dispatches, dynamic counts included

    def dispatch_task(self, req, bound, rec: Recorded) -> Task:
        task = Task(None, req.stream, rec.kernel_id)
        task.run = self._timed(rec, task)
        warm = self.warm
        if warm is not None:
            # A short kernel with nothing to wait for runs on the issuing thread at once
            # (HostStreams.enqueue), so its stream stays idle for the next, warm, launch.
            task.inline = warm.may_inline(rec.artifact)
            if req.as_called is not None and rec.report is None:
                warm.arm(req, bound, rec)
        return task

    def refused_task(self, req, run) -> Task:
        return Task(run, req.stream, req.kernel.id)

    def enqueue(self, task: Task, deps: list, bound, blocking: bool) -> None:
        streams = self.server.streams
        streams.enqueue(task, deps)
        if blocking:
            streams.flush(task.stream)

    def launched(self, req, bound) -> None:
        """No warm path to arm."""

    def graph(self, stream, recorded: list, memory_ids: frozenset) -> Graph:
        return Graph(self.server, stream, recorded, memory_ids)

    # -- internals -----------------------------------------------------------------------------------
    def _timed(self, rec: Recorded, task: Task):
        ledger = self.server.ledger
        device = self.server.device

        warm = self.warm

        def run():
            start = time.perf_counter()
            task.duration = run_recorded(ledger, rec)
            if warm is not None:
                warm.note_duration(rec.artifact, task.duration)
            if task.duration is not None and config.get_bool("NUMBA_CUBE_PROFILE_LOG"):
                profiling.log_duration(rec.kernel_id, device, task.duration)
            if observers.tasks_observed():
                end = time.perf_counter()
                observers.notify_task(observers.TaskEvent(
                    device, task.task_id, rec.kernel_id, task.stream,
                    tuple(d.task_id for d in task.deps), start if task.duration is not None else None,
                    end if task.duration is not None else None,
                    ledger.first_failure(rec.writes) is not None))

        return run

    def _compiled(self, req, arrays: list) -> CacheEntry:
        """The cache entry for this launch: signature key first, compile key on its miss (see
        the module docstring)."""
        backend = self.backend
        counters = self.counters
        bindings = composite_bindings(req.args)
        extras = backend.cache_extras(req.count, req.dim)
        signature_key = (req.kernel.id,
                         tuple((a.dtype, len(a.shape), a.layout) if type(a) is Binding
                               else a.type_key if type(a) in COMPOSITE_TYPES else type(a)
                               for a in req.args),
                         alignment_of(bindings), extras, req.options)
        entry = self._by_signature.get(signature_key)
        if entry is not None:
            counters["cache_hits"] += 1
            return entry
        try:
            arg_types = tuple(backend.arg_type(a) for a in arrays)
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
            counters["cache_hits"] += 1
            self._by_signature[signature_key] = entry
            return entry
        counters["compiles"] += 1
        ndims = tuple(a.ndim if isinstance(a, np.ndarray)
                      else analysis_entry(b) if type(b) in COMPOSITE_TYPES else None
                      for a, b in zip(arrays, req.args))
        # Until the analysis answers, an interrupt fails every array argument (section 4.2).
        access = tuple((n is not None, n is not None) for n in ndims)
        try:
            with deferred_interrupt():
                try:
                    access = resolve_access(req.kernel, ndims)
                except Exception:  # noqa: BLE001 - the analysis must never break a launch
                    log.debug("IO analysis failed for %s", req.kernel.id, exc_info=True)
                artifact = backend.compile(req.kernel, arg_types, extras, dict(req.options))
            entry = CacheEntry(artifact, None, access)
        except CompileError as exc:
            entry = CacheEntry(None, exc, access)
        except KeyboardInterrupt as exc:
            # Ctrl-C during the compile (taken at its end: client/interrupts.py): the launch fails with
            # it (server.op_launch records it on the write set, then raises it at the call) and
            # nothing is cached, here or by the backend, so the next launch compiles afresh
            # (CONTRACT.md section 4.1).
            backend.forget(req.kernel)
            return CacheEntry(None, exc, access)
        except Exception as exc:  # noqa: BLE001 - Numba's own errors are compile failures too
            err = CompileError.wrapping(
                f"kernel {req.kernel.name} failed to compile: {type(exc).__name__}: {exc}", exc)
            entry = CacheEntry(None, err, access)
        self.compile_cache[key] = entry
        self._by_signature[signature_key] = entry
        return entry
