"""Graph capture and replay (CONTRACT.md section 6).

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

``record_launches`` makes the same graph from launch requests that already ran eagerly, without a
window: what an automatic graph replays (``graphs/auto_graph.py``).

What ``replay`` checks: every buffer the recording used is still allocated (else
``CaptureError``); the replay is ordered against other streams' work on those buffers like a
launch. What it cannot check: that a buffer freed and re-created reads as the *same* data — the
recording holds the old memory, so the user must keep the handles alive for the graph's life.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from numba_cube.errors import CaptureError
from numba_cube.runtime.launch.dispatch import Recorded, run_recorded
from numba_cube.runtime.streams.host_streams import Task
from numba_cube.runtime.launch.requests import refused_launch_text

__all__ = ["CaptureState", "Graph", "CaptureOps", "record_launches"]


@dataclass
class CaptureState:
    stream: Any
    recorded: list = field(default_factory=list)
    doomed: str | None = None  # the first refused operation

    def refuse(self, what: str) -> CaptureError:
        if self.doomed is None:
            self.doomed = what
        return CaptureError(f"{what} is not allowed inside a capture window")


class Graph:
    """A sealed recording; ``replay()`` re-runs it on the stream it was captured on."""

    def __init__(self, server, stream, recorded: list[Recorded], memory_ids: frozenset):
        self._server = server
        self.stream = stream
        self._recorded = tuple(recorded)
        self._memory_ids = memory_ids
        # what a replay is ordered by, worked out once (an automatic graph replays it per iteration)
        self._read_mems = frozenset(r[0] for rec in self._recorded for r in rec.reads)
        self._write_mems = frozenset(w[0] for rec in self._recorded for w in rec.writes)
        self.replays = 0

    def __len__(self) -> int:
        return len(self._recorded)

    @property
    def recorded(self) -> tuple:
        """The recorded dispatches, in order."""
        return self._recorded

    @property
    def memory_ids(self) -> frozenset:
        """The memory ids of every buffer the recording uses."""
        return self._memory_ids

    def replay(self) -> None:
        """Queue one run of every recorded dispatch, in order, as one task (asynchronous)."""
        self._server.channel.call(self._server.op_replay, self)
        self.replays += 1

    # called on the server thread
    def _task(self, server) -> tuple[Task, set, set]:
        if not server.memory.keys() >= self._memory_ids:    # (one C-level subset test)
            missing = [m for m in self._memory_ids if m not in server.memory]
            raise CaptureError(f"graph replay: {len(missing)} buffer(s) used by the recording were freed")
        ledger = server.ledger
        recorded = self._recorded

        def run():
            for rec in recorded:
                run_recorded(ledger, rec)

        return Task(run, self.stream, "graph-replay"), self._read_mems, self._write_mems


class CaptureOps:
    """The capture operations of ``DeviceServer`` (mixed in; they run on the device's channel)."""

    def op_graph_prepare(self) -> None:
        """Keep what the warm-up frees in the pool, the window may only reuse it: until the next
        capture window closes (``_close_capture``), then the pool gives idle memory back again."""
        self.pool.hold_idle()
        self.graph_prepared = True

    def op_start_capture(self, stream) -> None:
        if stream in self.captures:
            raise CaptureError(f"a capture is already open on {stream}; stop it first")
        if not self.graph_prepared:
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

    def op_stop_capture(self, stream):
        """Seal the window into a graph (the mechanism's ``graph``: a software graph on host
        backends, a CUDA graph on a GPU). Refused when something inside the window was refused,
        and when a buffer the recording uses was freed before this (the graph would hold memory
        the pool may reuse)."""
        capture = self._close_capture(stream)
        if capture.doomed is not None:
            raise CaptureError(f"the capture failed: {capture.doomed} was refused inside the window")
        memory_ids = frozenset(r[0] for rec in capture.recorded for r in rec.reads + rec.writes)
        missing = [m for m in memory_ids if m not in self.memory]
        if missing:
            raise CaptureError(f"{len(missing)} buffer(s) used inside the window were freed "
                               "before stop_capture")
        return self.mechanism.graph(stream, capture.recorded, memory_ids)

    def op_refuse(self, stream, what: str) -> CaptureError | None:
        """If ``stream`` is capturing, doom the capture and return the error to raise."""
        capture = self.captures.get(stream)
        return None if capture is None else capture.refuse(what)

    def op_replay(self, graph: Graph) -> None:
        self.drain_frees()
        self.mechanism.prepare()
        task, reads, writes = graph._task(self)
        hazards = self.hazards
        if hazards.baseline:
            deps = hazards.register(task, reads, writes)
        else:
            # ``register``'s effect and answer, the warm launch's way (streams/hazards.py): an automatic
            # graph replays every iteration, almost always on buffers that only its own stream
            # uses, and then there is no walk to make. (No owner: a replay is never renewed.)
            write_states = hazards.states(writes)
            read_states = hazards.states(reads - writes)
            if hazards.register_solo(task, read_states, write_states):
                deps = []
            else:
                deps = hazards.register_states(task, read_states, write_states)
        self.streams.enqueue(task, deps)
        self.counters["replays"] += 1


def record_launches(server, stream, requests: tuple):
    """The graph of ``requests`` (launch requests already made once, eagerly), recorded without
    running anything: what an automatic graph replays (``graphs/auto_graph.py``). Runs on the device's
    channel. None when the sequence cannot be a graph that
    behaves as its eager launches: a capture window is open on ``stream`` (the two must not
    interfere), a launch does not compile or is refused, writes no buffer (the graph could not
    report its failure), or cannot be captured by the mechanism (a read-back dynamic count, a
    debug kernel on CUDA: ``CaptureError`` from ``mechanism.graph``).

    Unlike a capture window, an input failed *now* does not refuse the recording: the replay
    runs the eager launches instead while one is (``auto_graph_channel.replay_or_launch``)."""
    if stream in server.captures:
        return None
    if server.pending_frees:
        server.drain_frees()
    mechanism = server.mechanism
    mechanism.prepare()
    recorded = []
    for req in requests:
        bound = server.bound_launch(req)
        error = bound.error if bound.error is not None else mechanism.refusal(req, bound)
        if error is not None or not bound.writes:
            return None
        rec = mechanism.dispatch(req, bound, True)
        if rec.report is not None or mechanism.not_capturable(req, bound, rec) is not None:
            return None
        recorded.append(rec)
    memory_ids = frozenset(r[0] for rec in recorded for r in rec.reads + rec.writes)
    if not all(m in server.memory for m in memory_ids):
        return None
    try:
        return mechanism.graph(stream, recorded, memory_ids)
    except CaptureError:
        return None
