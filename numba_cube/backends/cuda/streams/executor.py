"""The CUDA executor: stream work enqueued on the issuing thread, ordered by events.

The runtime's ``DeviceServer`` hands each task (``tasks.py``) to an executor (``enqueue(task,
deps)``). On the CPU that executor queues it for a worker thread. On a GPU the work is itself
asynchronous (a launch is an enqueue into a CUDA stream that costs a few microseconds), and a
thread hop would cost more than the launch, so ``CudaStreams`` runs the task *immediately*, on the
issuing thread, under the device's lock (the server's channel is an ``InlineChannel``):

1. the task's stream id is mapped to a CUDA stream (one per ``StreamId``, created lazily,
   non-blocking: no implicit ordering with the legacy default stream);
2. for each dependency (an unfinished task of another stream, from the hazard tracker) the CUDA
   stream waits on that task's event with ``cuStreamWaitEvent``: ordering happens on the device,
   **never by blocking the host**. A wait already implied by an earlier wait on a later event of
   the same producer stream is skipped;
3. the task runs (it enqueues its CUDA work: a kernel, a copy, a graph launch);
4. an event is recorded on the stream after it. The event is how everyone else learns about the
   task: ``done`` is ``cuEventQuery``, ``wait()`` is ``cuEventSynchronize``, and a consumer on
   another stream waits on it.

Events come from a pool (``EventPool``, ``stream_state.py``): a task gives its event back when it
is garbage (nobody can ask about it any more), so a long loop records into a handful of events
instead of creating and destroying one per launch. Warm launches (``fast_path.py``) record
nothing: when another stream must wait for one, the producer stream's own event
(``tasks.StreamMark``) is recorded again at its current position and waited on, both in one
call (``Driver.stream_waiter``), and a consumer that already waited on a record at or after the
position it needs waits no more. Re-recording an event that another stream already waited on is
safe: a ``cuStreamWaitEvent`` binds to the record that was current when it was called.

Completion is also tracked per stream: when a task is found done, every earlier task of its stream
is done too (``done_seq``), so pruning old tasks in the hazard tracker rarely calls the driver.

CUDA streams are pooled as well: a program that makes many short-lived ``StreamId``s (one per
thread, one per ``with cube.stream()``) reuses idle CUDA streams instead of creating one each.

A failing driver call while recording or waiting is a broken device (a sticky error): it is
reported to the server (``on_fault``, then ``DeviceFault`` from ``sync()``) and the task is
treated as done, so nothing waits forever on an event that will never complete.
"""

from __future__ import annotations

import logging
from typing import Callable

from numba_cube.runtime.launch.dispatch import run_recorded
from numba_cube.backends.cuda.driver.driver import CudaError
from numba_cube.backends.cuda.streams.stream_state import CuStream, EventPool
from numba_cube.backends.cuda.streams.tasks import CudaTask, StreamMark, WarmTask

__all__ = ["CudaStreams", "EventPool"]

log = logging.getLogger("numba_cube")

#: Idle CUDA streams kept for reuse beyond which streams of finished stream ids are recycled.
STREAM_POOL_LIMIT = 32


class CudaStreams:
    """StreamId -> CUDA stream, and the inline enqueue. Called under the device lock."""

    def __init__(self, driver, on_fault: Callable[[BaseException], None], ledger=None, lock=None):
        self.driver = driver
        self.lock = lock              # the device lock (a WarmTask's wait borrows an event under it)
        self.ledger = ledger
        self.events = EventPool(driver)
        self.timing_events: list = []
        self._on_fault = on_fault
        self._streams: dict = {}      # StreamId -> CuStream
        self._idle_handles: list = []
        api = driver.api
        self._wait = api.cuStreamWaitEvent
        self._record = api.cuEventRecord
        self._success = driver.SUCCESS

    # -- streams ------------------------------------------------------------------------------------
    def stream(self, sid) -> CuStream:
        """The CUDA stream of ``sid``, created (or recycled) on first use."""
        cs = self._streams.get(sid)
        if cs is None:
            cs = self._streams[sid] = CuStream(sid, self._new_handle())
        return cs

    def _new_handle(self):
        if self._idle_handles:
            return self._idle_handles.pop()
        if len(self._streams) >= STREAM_POOL_LIMIT:
            self._recycle()
            if self._idle_handles:
                return self._idle_handles.pop()
        return self.driver.stream_create()

    def _recycle(self) -> None:
        """Give the CUDA streams of finished stream ids back to the pool. Safe: everything that
        ran on such a stream is complete, so a later task of that id on another CUDA stream is
        ordered after it trivially."""
        for sid, cs in list(self._streams.items()):
            cs.renewable = None           # its tail is handed to event_of: seen
            if cs.tail is not None:
                self.event_of(cs.tail)    # a warm tail says "not done" until it has an event
            if cs.tail is None or cs.tail.done:
                del self._streams[sid]
                cs.retired = True
                self._idle_handles.append(cs.handle)

    def handle_of(self, sid):
        return self.stream(sid).handle

    def stand_for_foreign(self, task: CudaTask, handle, event) -> None:
        """Make ``task`` stand for work another library queued on its own CUDA stream
        (``handle``): done when ``event`` (recorded there) is (``interop.py``)."""
        cs = CuStream(task.stream, handle)
        cs.seq = 1
        task.cs, task.seq, task.event, task.executor = cs, 1, event, self

    def serving(self, sid) -> CuStream | None:
        """The CUDA stream that serves ``sid`` now, or None (never used, or recycled since):
        the warm path checks that its armed stream still serves its stream id."""
        return self._streams.get(sid)

    def stream_ids(self) -> list:
        return list(self._streams)

    def live(self) -> list:
        """The CUDA streams serving a stream id now (``error_slots.py`` fences them)."""
        return list(self._streams.values())

    # -- the executor interface used by DeviceServer ------------------------------------------------
    def enqueue(self, task: CudaTask, deps: list) -> None:
        """Run ``task`` now on its stream's CUDA stream, after device-side waits on ``deps``.

        A task with ``run`` calls it; one with only ``rec`` is a dispatch: ``run_recorded`` (the
        execute scope around the packed launch's call), without a closure per launch."""
        cs = task.cs
        if cs is None:
            cs = self.stream(task.stream)
        task.executor = self
        task.deps = deps
        handle = cs.handle
        if deps:
            self.wait_for(cs, deps)
        cs.seq += 1
        task.seq = cs.seq
        task.cs = cs
        cs.tail = task
        cs.renewable = None           # the warm tail is no longer the tail (WarmTask.renew)
        timing = task.timing
        ledger = self.ledger
        try:
            if timing is not None:
                self._record_checked(timing[0], handle)
            # The position of what is dispatched now, for a pending state the execute scope
            # leaves (runtime/ledger/pending.py) and a launch's error word (error_slots.py).
            if ledger is not None:
                ledger.dispatching = task
            run = task.run
            if run is None:
                if run_recorded(ledger, task.rec) is None:
                    task.ran = False
            else:
                run()
        finally:
            if ledger is not None:
                ledger.dispatching = None
            task.deps = []            # only needed until the waits are enqueued
            if timing is not None:
                self._record_checked(timing[1], handle)
            try:
                event = self.events.get()
            except CudaError as exc:
                self._fail(exc)
            else:
                err = self._record(event, handle)[0]
                if err != self._success:
                    self.events.put(event)
                    self._fail(self.driver.error("cuEventRecord", err))
                else:
                    task.event = event
                    cs.evented = task

    def wait_for(self, cs: CuStream, deps) -> None:
        """Make ``cs`` wait on the device for each task of ``deps`` (tasks of other streams), through
        their events. A wait already implied by an earlier wait of ``cs`` on a record at or after
        the dependency's position in the same producer stream is skipped."""
        waited = cs.waited
        for dep in deps:
            dcs = dep.cs
            if dcs is None:
                continue              # not a GPU task (cannot happen)
            if waited.get(dcs, 0) >= dep.seq:
                continue              # an earlier wait already covers it
            if type(dep) is WarmTask:
                mark = dep.mark
                if mark is None:
                    if dep.known_done:
                        continue      # known done
                    mark = dcs.evented
                    if mark is None or mark.seq < dep.seq or mark.event is None:
                        # No event covers it yet (a chain alternating streams, every launch):
                        # the producer's own event, recorded now and waited on, in one call of
                        # the pair's waiter. ``_record_and_wait`` written out for its usual case
                        # (the mark and the pair's waiter made already): a call less per launch.
                        mark = dcs.own_mark
                        pair = cs.waiters.get(dcs) if mark is not None else None
                        if pair is None:
                            self._record_and_wait(cs, dcs, dep)
                            continue
                        err = pair[0]()
                        if err and self._waiter_failed(err) == "cuEventRecord":
                            continue  # nothing recorded (a broken device): nothing to wait on
                        # After the record (StreamMark): a reader of seq then sees a record at it.
                        seq = mark.seq = dcs.seq
                        dcs.evented = mark
                        dep.mark = mark
                        if not err:
                            waited[dcs] = seq
                        continue
                    dep.mark = mark
                event = mark.event
                if mark is dcs.own_mark:   # the pair's own block: the wait in one call
                    err = self._waiter(cs, dcs)[1]()
                    if err:
                        self._waiter_failed(err)
                    else:
                        waited[dcs] = mark.seq
                    continue
            else:
                mark = dep
                event = dep.event
            if event is None:
                continue              # nothing recorded (a broken device)
            # The wait binds to the event's current record, made at ``mark.seq`` of the producer
            # (records are made under the device lock, which we hold): that is what it covers.
            covered = mark.seq
            err = self._wait(cs.handle, event, 0)[0]
            if err != self._success:
                self._fail(self.driver.error("cuStreamWaitEvent", err))
                continue
            waited[dcs] = covered

    def _record_and_wait(self, cs: CuStream, dcs: CuStream, task: WarmTask) -> None:
        """Record producer ``dcs``'s own event now and make ``cs`` wait on it: what covers warm
        ``task`` from now on (``_mark_of`` without the separate driver calls). ``wait_for``
        writes the usual case of this out inline: a change here is a change there."""
        mark = dcs.own_mark
        if mark is None:
            mark = self._own_mark(dcs)
            if mark is None:
                return
        err = self._waiter(cs, dcs)[0]()
        if err and self._waiter_failed(err) == "cuEventRecord":
            return                    # nothing recorded (a broken device): nothing to wait on
        mark.seq = dcs.seq            # after the record (StreamMark)
        dcs.evented = mark
        task.mark = mark
        if not err:
            cs.waited[dcs] = mark.seq

    def _waiter_failed(self, err: int) -> str:
        """Report a stream waiter's failure (``launch_call.failed_call``); the call that failed."""
        from numba_cube.backends.cuda.driver.launch_call import failed_call

        call, code = failed_call(err)
        self._fail(self.driver.error(call, code))
        return call

    def _waiter(self, cs: CuStream, dcs: CuStream) -> tuple:
        """``cs``'s ``(record_and_wait, wait)`` on ``dcs``'s own event (``Driver.stream_waiter``),
        made once per pair of streams. Bounded: a program that makes streams forever rebuilds
        a pair now and then rather than keeping every dead stream's."""
        pair = cs.waiters.get(dcs)
        if pair is None:
            if len(cs.waiters) >= STREAM_POOL_LIMIT:
                cs.waiters.clear()
            def install(compiled):
                cs.waiters[dcs] = compiled
            pair = cs.waiters[dcs] = self.driver.stream_waiter(dcs.own_mark.event, dcs.handle, cs.handle,
                                                               install)
        return pair

    def _own_mark(self, cs: CuStream):
        """``cs``'s own event (``StreamMark``), made on first need; None on a broken device."""
        try:
            event = self.events.get()
        except CudaError as exc:
            self._fail(exc)
            return None
        mark = cs.own_mark = StreamMark(cs, event, self)
        return mark

    def event_of(self, task):
        """The event that tells when ``task`` is done, or None if there is none (a broken device,
        or a task that is done). A warm task (``WarmTask``) not covered by an event yet gets one
        (``_mark_of``). Called under the device lock."""
        if type(task) is not WarmTask:
            return task.event
        mark = task.mark
        if mark is None:
            mark = self._mark_of(task)
            if mark is None:
                return None
        return mark.event

    def _mark_of(self, task: WarmTask):
        """What covers warm ``task`` from now on: the stream's newest task with an event if it is
        at or after the task, else the stream's own event (``StreamMark``) recorded again now,
        after everything issued on the stream so far. None: the task is known done, or the
        device is broken. One event per stream serves every such record: a wait binds to the
        record current when it is enqueued, and an answer about a later record than the one a
        task needs can only make somebody wait longer."""
        cs = task.cs
        if cs.renewable is task:
            cs.renewable = None       # somebody asks about it: it may no longer be renewed
        if task.settled:
            return None
        mark = cs.evented
        if mark is None or mark.seq < task.seq or mark.event is None:
            mark = cs.own_mark or self._own_mark(cs)
            if mark is None:
                return None
            err = self._record(mark.event, cs.handle)[0]
            if err != self._success:
                self._fail(self.driver.error("cuEventRecord", err))
                return None
            mark.seq = cs.seq         # after the record: a reader of seq then sees a record at it
            cs.evented = mark
        task.mark = mark
        return mark

    def event_of_locked(self, task):
        """``event_of`` from a thread that may not hold the device lock (``WarmTask.wait``)."""
        with self.lock:
            return self.event_of(task)

    def _record_checked(self, event, handle) -> None:
        err = self._record(event, handle)[0]
        if err != self._success:
            self._fail(self.driver.error("cuEventRecord", err))

    def timing_pair(self) -> tuple:
        """Two timing-enabled events for a profiled task (pooled too)."""
        te = self.timing_events
        start = te.pop() if te else self.driver.event_create(timing=True)
        end = te.pop() if te else self.driver.event_create(timing=True)
        return (start, end)

    def flush(self, sid) -> None:
        """Nothing to flush: work is enqueued on the device as it is issued."""

    def flush_tasks(self, tasks) -> None:
        """Work is on the device already; warm tasks among ``tasks`` get an event to wait on."""
        for task in tasks:
            if type(task) is WarmTask:
                self.event_of(task)

    def flush_all(self) -> list:
        """The last task of every stream that is not done yet (waiting on them waits for all)."""
        streams = self._streams.values()
        for cs in streams:
            cs.renewable = None           # the tails are handed out (WarmTask.renew)
        tails = [cs.tail for cs in streams if cs.tail is not None and not cs.tail.done]
        self.flush_tasks(tails)
        return tails

    # -- driver calls made for tasks ----------------------------------------------------------------
    def query(self, event) -> bool:
        try:
            return self.driver.event_query(event)
        except CudaError as exc:
            self._fail(exc)
            return True

    def synchronize(self, event) -> None:
        try:
            self.driver.event_synchronize(event)
        except CudaError as exc:
            self._fail(exc)

    def elapsed(self, start, end) -> float:
        return self.driver.event_elapsed_ms(start, end) / 1e3

    def _fail(self, exc: BaseException) -> None:
        log.error("numba_cube: %s", exc)
        self._on_fault(exc)
