"""CUDA graphs from capture windows and automatic graphs (CONTRACT.md sections 6 and 6.1).

The runtime's capture state machine (``runtime/graphs/capture.py``) is shared with the CPU backend: it
records, between ``start_capture`` and ``stop_capture``, the *resolved* dispatches (``Recorded``:
packed launch, geometry, arguments, read and write sets) and enforces the window's refusals
(reads, sync, profiling, host writes, allocations the pool cannot serve, launches skipped for a
failed input; each dooms the recording, and ``stop_capture`` raises ``CaptureError``).

On the GPU, ``stop_capture`` then turns the recording into a hardware graph by *stream capture*:
``cuStreamBeginCapture`` on a private stream of the device, every recorded launch replayed onto
it through its packed launch (the driver records kernel nodes instead of running them; parameters
are copied at that point), ``cuStreamEndCapture``, ``cuGraphInstantiate``. ``graph.replay()`` is
one ``cuGraphLaunch`` on the CUDA stream of the stream id the capture was made on: one dispatch
for the whole recording, ordered against other streams' work on its buffers like a launch.

An automatic graph (``runtime/graphs/auto_graph.py``) is the same object, made from a traced sequence's
dispatches by ``runtime/capture.record_launches`` and replayed once per matched iteration; its
read and write unions are therefore worked out once, at construction.

What ``replay`` does with the ledger: the recording's buffers are checked first. If no buffer it
reads carries a failure, the whole graph runs inside one execute scope over the union of the read
and write sets (a refused ``cuGraphLaunch`` fails the write set; a replay that runs rewrites it,
so a failure there is repaired). If one does, the hardware graph (which is all or nothing) is not
launched; each recorded dispatch goes through its own execute scope instead, launched eagerly
through its packed launch, so skipping and propagation are exactly those of the same launches
made one by one.

While nothing failed anywhere (the ledger is empty: nothing to inherit, nothing to repair), the
execute scope is left out, for the reason the warm launch leaves it out (``fast_path.py``): its
claim would be made and released under the device lock around one asynchronous driver call,
where nobody can see it (a reader ordered after the replay waits for its task, long after the
lock's holder released the claim; one not ordered after it does not report a claim in flight),
so the claim would change no answer. A refused ``cuGraphLaunch`` then fails the write set through
``failed_writing``, as the general path records work that never started, and a call that raises
(an interrupt) leaves it failed as the scope's abandoned claim would. Automatic graphs replay
every iteration, and the scope was a third of a replay's host time on the fake driver.

A debug kernel (``debug=True``: its exceptions are read back after each launch) cannot be
recorded: ``CaptureError``; nor can a kernel that can raise (each launch gets its own error word,
``error_slots.py``, which a replayed graph's baked parameters cannot give it). A graph that reads
a buffer still pending on such a launch leaves its write set pending on it (the execute scope's
rule, ``runtime/ledger/pending.py``). A dynamic-count launch can be recorded only in its device-count form (``dynamic.py``): the
read-back form needs the host in the middle of the graph, so recording it dooms the capture.
"""

from __future__ import annotations

import weakref

from numba_cube.errors import CaptureError
from numba_cube.runtime.graphs.capture import Graph
from numba_cube.runtime.launch.dispatch import Recorded, run_recorded
from numba_cube.runtime.ledger.ledger import ExecuteScope, IncompleteLaunch, failed_writing
from numba_cube.backends.cuda.driver.errors import CudaError
from numba_cube.backends.cuda.streams.tasks import CudaTask

__all__ = ["CudaGraph"]


def _destroy(driver, graph, graph_exec) -> None:
    try:
        if graph_exec is not None:
            driver.graph_exec_destroy(graph_exec)
        if graph is not None:
            driver.graph_destroy(graph)
    except Exception:  # noqa: BLE001 - at exit, or after a device fault: nothing to give back
        pass


class CudaGraph(Graph):
    """A sealed recording, instantiated as a CUDA graph; ``replay()`` launches it."""

    def __init__(self, server, mechanism, stream, recorded: list, memory_ids: frozenset):
        """``server``: the policy server (replays go through its channel); ``mechanism``: the
        CUDA mechanism (its driver, context and capture stream)."""
        super().__init__(server, stream, recorded, memory_ids)
        self._driver = mechanism.driver
        self._graph = None
        self._exec = None
        self.nodes = 0
        # The union of the read and write sets, worked out once: a replay (an automatic graph
        # replays every iteration) only looks them up.
        self._regions = (tuple({r: None for rec in self._recorded for r in rec.reads}),
                         tuple({w: None for rec in self._recorded for w in rec.writes}))
        self._read_mems = {r[0] for r in self._regions[0]}
        self._write_mems = {w[0] for w in self._regions[1]}
        self._label = f"graph of {len(self._recorded)} launch(es)"   # its execute scope's
        if recorded:
            self._build(mechanism)

    def _build(self, mechanism) -> None:
        for rec in self._recorded:
            # A debug kernel's exception flag is cleared before and read back after each launch
            # (kernel_exceptions.py): inside a graph nobody would read it, and a raised exception
            # would be lost.
            if getattr(getattr(rec.artifact, "kernel", None), "exceptions", None) is not None:
                raise CaptureError(f"launch of {rec.kernel_id}: a debug=True kernel cannot be "
                                   "recorded into a CUDA graph (its exceptions are read back "
                                   "after each launch)")
            # (the mechanism refuses these before, ``not_capturable``: the check stays here so
            # that no graph is ever built with an error word baked into its parameters)
            if getattr(rec.artifact, "checks", None) is not None:
                raise CaptureError(f"launch of {rec.kernel_id}: a kernel that can raise cannot be "
                                   "recorded into a CUDA graph (each launch needs its own error "
                                   "word)")
        driver = self._driver
        mechanism.activate()
        capture_stream = mechanism.capture_stream()
        try:
            driver.begin_capture(capture_stream)
        except CudaError as exc:
            raise CaptureError(f"cannot start a CUDA stream capture: {exc}") from exc
        failure = None
        for rec in self._recorded:
            try:
                rec.artifact(rec.count, rec.dim, (capture_stream, rec.arrays[1]), rec.shared_bytes)
            except Exception as exc:  # noqa: BLE001 - reported below, after the capture is closed
                failure = (rec.kernel_id, exc)
                break
        try:
            graph = driver.end_capture(capture_stream)
        except CudaError as exc:
            if failure is None:
                failure = ("the capture", exc)
            graph = None
        if failure is not None:
            _destroy(driver, graph, None)
            what, exc = failure
            raise CaptureError(f"recording {what} into a CUDA graph failed: {exc}") from exc
        try:
            graph_exec = driver.graph_instantiate(graph)
        except CudaError as exc:
            _destroy(driver, graph, None)
            raise CaptureError(f"cuGraphInstantiate refused the recording: {exc}") from exc
        self._graph, self._exec = graph, graph_exec
        self.nodes = len(self._recorded)
        weakref.finalize(self, _destroy, driver, graph, graph_exec)

    # called on the server (under the device lock) by DeviceServer.op_replay
    def _task(self, server):
        if not server.memory.keys() >= self._memory_ids:    # (one C-level subset test)
            missing = [m for m in self._memory_ids if m not in server.memory]
            raise CaptureError(f"graph replay: {len(missing)} buffer(s) used by the recording were freed")
        ledger = server.ledger
        recorded = self._recorded
        reads, writes = self._regions
        graph_exec = self._exec
        launched = self._launched
        label = self._label
        task = CudaTask(None, self.stream, "graph-replay")

        def run():
            stream = task.cs.handle
            if graph_exec is None:
                return
            if not ledger.failed_memories:
                # Nothing failed anywhere (first_failure's own test): no execute scope, see the
                # module docstring. Read under the device lock, as the warm launch reads it.
                try:
                    refused = launched(server, stream)
                except BaseException:
                    failed_writing(ledger, label, writes, IncompleteLaunch(label))
                    raise
                if refused is not None:
                    failed_writing(ledger, label, writes, refused)
                return
            if ledger.first_failure(reads) is None:
                with ExecuteScope(ledger, label, reads, writes) as scope:
                    if scope.entered:
                        refused = launched(server, stream)
                        if refused is not None:
                            scope.fail(refused)
                return
            # An input carries a failure: per-dispatch scopes, eager launches (see docstring).
            for rec in recorded:
                run_recorded(ledger, Recorded(rec.kernel_id, rec.artifact, rec.count, rec.dim,
                                              (stream, rec.arrays[1]), None, rec.reads, rec.writes,
                                              shared_bytes=rec.shared_bytes))

        task.run = run
        return task, self._read_mems, self._write_mems

    def _launched(self, server, stream):
        """One ``cuGraphLaunch`` on ``stream``: None, or the driver's refusal (a sticky one marks
        the device broken)."""
        driver = self._driver
        err = driver.api.cuGraphLaunch(self._exec, stream)[0]
        if err == driver.SUCCESS:
            return None
        exc = driver.error("cuGraphLaunch", err)
        if exc.sticky:
            server.mark_broken(exc)
        return exc
