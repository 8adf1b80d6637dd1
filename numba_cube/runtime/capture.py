"""Graph capture and replay (runtime.md section 6).

``graph_prepare()`` -> warm-up run -> ``start_capture()`` -> launches -> ``stop_capture()`` ->
``graph.replay()``, as often as wanted.

A capture belongs to one stream (the client's stream when it starts). Launches issued on that
stream inside the window are *recorded*, not run. Inside the window these are refused on that
stream: reading a buffer, ``sync``, profiling, host writes into a handle (a recorded graph cannot
carry a host copy: fresh inputs are written between replays), and any allocation the pool cannot
serve from what the warm-up left. The refused operation raises ``CaptureError`` on the spot (it
did not happen, and returning garbage from a read would be worse) *and* dooms the recording, so
``stop_capture`` raises ``CaptureError`` naming the first refused operation instead of returning a
graph that silently skips it. A launch recorded with an input already known to be failed, or whose
kernel does not compile, dooms it too (the graph would miss that launch).

A ``start_capture`` refused on the spot (a capture already open on that stream, no
``graph_prepare``) leaves the existing capture as it was.

``graph_prepare()`` makes the pool keep every block the warm-up frees (``MemoryPool.hold_idle``),
so the window finds them; once no window is open any more (the next ``stop_capture``, refused or
not), the pool goes back to giving idle memory above its limit back.

On this (host) backend a ``Graph`` is a software graph: the resolved dispatches (compiled
entry point, arrays, geometry) are re-run by one stream task per replay, without the launch path's
per-launch work (no channel hop, no cache lookup, no dependency registration per launch). Each
dispatch still runs inside an execute scope, so a failure during a replay is recorded on buffers
like any other.

What ``replay`` checks: every buffer the recording used is still allocated (else
``CaptureError``); the replay is ordered against other streams' work on those buffers like a
launch. What it cannot check: that a buffer freed and re-created reads as the *same* data — the
recording holds the old memory, so the user must keep the handles alive for the graph's life.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import CaptureError
from .geometry import count_beyond_limits
from .host_streams import Task
from .ledger import ExecuteScope, Failure, failed_writing

__all__ = ["CaptureState", "Recorded", "Graph", "CaptureOps"]


@dataclass
class Recorded:
    """One resolved dispatch of a recording."""

    kernel_id: str
    artifact: Any
    count: tuple
    dim: tuple
    arrays: list
    count_view: Any
    reads: tuple
    writes: tuple
    # ``report(failure, inherited)``: told the dispatch's failure when the write set cannot carry
    # it alone (a launch that writes nothing, or one whose caller waits for it: outcomes.py).
    report: Any = None
    # Dynamic shared memory per cube: a recording replays with the size it was launched with.
    shared_bytes: int = 0


@dataclass
class CaptureState:
    stream: Any
    recorded: list = field(default_factory=list)
    doomed: str | None = None  # the first refused operation

    def refuse(self, what: str) -> CaptureError:
        if self.doomed is None:
            self.doomed = what
        return CaptureError(f"{what} is not allowed inside a capture window")


def resolve_count(view) -> tuple:
    """Three uint32 (x, y, z) from a count buffer's bytes; ``ValueError`` past CUDA's grid limits
    (``geometry.MAX_CUBE_COUNT``: a count one backend refuses is refused by all of them)."""
    count = tuple(int(v) for v in view.reshape(-1).view(np.uint32)[:3])
    problem = count_beyond_limits(count)
    if problem is not None:
        raise ValueError(f"dynamic {problem}")
    return count


def run_recorded(ledger, rec: Recorded) -> float | None:
    """Run one resolved dispatch inside an execute scope: the body of every launch task and of
    every replayed graph node. Returns the seconds the dispatch ran, or None if it did not run."""
    count = rec.count
    report = rec.report
    if rec.count_view is not None and ledger.first_failure(rec.reads) is None:
        try:
            count = resolve_count(rec.count_view)
        except Exception as exc:  # noqa: BLE001 - an unresolvable count
            failure = failed_writing(ledger, rec.kernel_id, rec.writes, exc)
            if report is not None:
                report(failure, False)
            return None
        if 0 in count:
            return None  # a count of zero dispatches nothing and claims nothing new
    with ExecuteScope(ledger, rec.kernel_id, rec.reads, rec.writes) as scope:
        if scope.entered:
            start = time.perf_counter()
            try:
                if rec.shared_bytes:
                    # Only then: an artifact of a backend without dynamic shared memory takes
                    # three arguments (HostBackend.compile), and is never asked for any.
                    rec.artifact(count, rec.dim, rec.arrays, rec.shared_bytes)
                else:
                    rec.artifact(count, rec.dim, rec.arrays)
            except Exception as exc:  # noqa: BLE001 - the kernel's own failure
                scope.fail(exc)
                if report is not None:
                    report(Failure(exc, rec.kernel_id, (rec.kernel_id,)), False)
            return time.perf_counter() - start
    if report is not None:
        report(scope.inherited.through(rec.kernel_id), True)
    return None


class Graph:
    """A sealed recording; ``replay()`` re-runs it on the stream it was captured on."""

    def __init__(self, server, stream, recorded: list[Recorded], memory_ids: frozenset):
        self._server = server
        self.stream = stream
        self._recorded = tuple(recorded)
        self._memory_ids = memory_ids
        self.replays = 0

    def __len__(self) -> int:
        return len(self._recorded)

    def replay(self) -> None:
        """Queue one run of every recorded dispatch, in order, as one task (asynchronous)."""
        self._server.channel.call(self._server.op_replay, self)
        self.replays += 1

    # called on the server thread
    def _task(self, server) -> tuple[Task, set, set]:
        missing = [m for m in self._memory_ids if m not in server.memory]
        if missing:
            raise CaptureError(f"graph replay: {len(missing)} buffer(s) used by the recording were freed")
        ledger = server.ledger
        recorded = self._recorded

        def run():
            for rec in recorded:
                run_recorded(ledger, rec)

        reads = {r[0] for rec in recorded for r in rec.reads}
        writes = {w[0] for rec in recorded for w in rec.writes}
        return Task(run, self.stream, "graph-replay"), reads, writes


class CaptureOps:
    """The capture operations of ``HostServer`` (mixed in; they run on the device's channel)."""

    def op_graph_prepare(self) -> None:
        """Keep what the warm-up frees in the pool, the window may only reuse it: until the next
        capture window closes (``_close_capture``), then the pool gives idle memory back again."""
        self.pool.hold_idle()
        self.prepared = True

    def op_start_capture(self, stream) -> None:
        if stream in self.captures:
            raise CaptureError(f"a capture is already open on {stream}; stop it first")
        if not self.prepared:
            raise CaptureError("start_capture() needs graph_prepare() first, before the warm-up run")
        self.captures[stream] = CaptureState(stream)

    def _close_capture(self, stream) -> CaptureState:
        """End the window on ``stream`` (``CaptureError`` if none is open). Once no window is open
        any more, graph_prepare's hold on idle memory ends: the graph needs no allocation."""
        capture = self.captures.pop(stream, None)
        if capture is None:
            raise CaptureError(f"no capture is open on {stream}")
        if not self.captures:
            self.pool.release_idle_hold()
        return capture

    def op_stop_capture(self, stream) -> Graph:
        capture = self._close_capture(stream)
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
