"""The tasks of the CUDA executor (``streams/executor.py``): what the policy server and hazard tracker see.

A ``CudaTask`` is one unit of stream work that ``CudaStreams.enqueue`` runs at once on the CUDA
stream of its stream id and follows with an event; ``done`` and ``wait`` answer from that event
(or from the stream's completion mark). A ``WarmTask`` is a warm launch's (``fast_path.py``): it
has no event of its own until somebody must wait for it, and then it is covered by the stream's
``StreamMark``, one event per stream recorded again whenever a newer position must be waited
for. The tasks have the interface of the runtime's ``host_streams.Task``.

A warm task nobody has been handed yet (its stream's ``CuStream.renewable``) may stand for the
next launch of the same warm entry instead of a new task (``WarmTask.renew``). Every way a task
leaves the device lock clears either that (``CudaStreams``: a new tail, ``flush_all``, an event
asked for) or the hazard tracker's ``last_solo`` (its answers: ``writer_of``, ``users_of``, the
dependencies of a registration), and the warm path renews only with both intact, so no thread
can hold the task while its position moves.
"""

from __future__ import annotations

from numba_cube.backends.cuda.driver.driver import CudaError

__all__ = ["CudaTask", "StreamMark", "WarmTask"]


class CudaTask:
    """One unit of stream work on the GPU: what ``DeviceServer`` and the hazard tracker see.

    It has the interface of the runtime's ``host_streams.Task`` (``run``, ``stream``, ``deps``,
    ``label``, ``failure_hint``, ``duration``, ``task_id``, ``done``, ``wait``).
    """

    __slots__ = ("run", "rec", "stream", "deps", "label", "failure_hint", "task_id", "event", "seq",
                 "cs", "timing", "ran", "_done", "executor", "__weakref__")

    def __init__(self, run, stream, label: str = ""):
        self.run = run                # a callable, or None: then ``rec`` is dispatched
        self.rec = None               # a dispatch.Recorded run through dispatch.run_recorded
        self.stream = stream
        self.deps: list = []
        self.label = label
        self.failure_hint = None
        self.task_id = 0
        self.event = None
        self.seq = 0
        self.cs = None
        self.timing = None            # (start, end) timing events of a profiled task
        self.ran = True               # False when the dispatch did not run (skipped, zero count)
        self._done = False
        self.executor = None          # the CudaStreams that ran it (set when enqueued)

    @property
    def done(self) -> bool:
        if self._done:
            return True
        cs = self.cs
        if cs is None:
            return False              # not enqueued yet
        if self.seq <= cs.done_seq:
            self._done = True
            return True
        event = self.event
        if event is None:
            self._done = True         # nothing was recorded (a broken device): nothing to wait for
            return True
        if self.executor.query(event):
            self._done = True
            cs.done_seq = max(cs.done_seq, self.seq)
            return True
        return False

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the task's work is complete on the device (``cuEventSynchronize``)."""
        if self.done:
            return True
        event = self.event
        if event is not None:
            self.executor.synchronize(event)
        self._done = True
        cs = self.cs
        if cs is not None and cs.done_seq < self.seq:
            cs.done_seq = self.seq
        return True

    @property
    def duration(self) -> float | None:
        """Seconds the dispatch ran on the device (profiled tasks only), once done."""
        if self.timing is None or not self.ran or not self.done:
            return None
        try:
            return self.executor.elapsed(*self.timing)
        except CudaError:
            return None

    def __del__(self):
        streams = self.executor
        if streams is not None:
            if self.event is not None:
                streams.events.put(self.event)
            if self.timing is not None:
                streams.timing_events.extend(self.timing)

    def __repr__(self) -> str:
        return f"<CudaTask {self.label} on {self.stream} {'done' if self._done else 'pending'}>"


class StreamMark:
    """A CUDA stream's own event, recorded again at the stream's current position each time a warm
    task after its last record must be waited for (``CudaStreams._mark_of``): what covers warm
    tasks, without an event (or a task object) per record. ``seq`` is the position of its newest
    record; it only grows, and it is set after the record is enqueued.

    ``done`` and ``wait`` answer for the newest record, which covers every task at or before
    ``seq`` (a stream runs in order): ``seq`` is read *before* asking the driver, so a record made
    meanwhile by another thread (at a later position) cannot make an earlier answer claim more."""

    __slots__ = ("cs", "event", "seq", "executor", "__weakref__")

    def __init__(self, cs, event, streams):
        self.cs = cs
        self.event = event
        self.seq = 0
        self.executor = streams

    @property
    def done(self) -> bool:
        seq = self.seq
        cs = self.cs
        if seq <= cs.done_seq:
            return True
        if self.executor.query(self.event):
            if cs.done_seq < seq:
                cs.done_seq = seq
            return True
        return False

    def wait(self, timeout: float | None = None) -> bool:
        seq = self.seq
        self.executor.synchronize(self.event)
        cs = self.cs
        if cs.done_seq < seq:
            cs.done_seq = seq
        return True

    def __del__(self):
        self.executor.events.put(self.event)


class WarmTask:
    """The task of a warm launch (``fast_path.py``): no event of its own until one is needed.

    Recording an event after every launch costs a driver call (~0.5 us) that nobody needs in a
    loop of launches on one stream. So a warm task is only a position in its stream (``cs``,
    ``seq``). Its event is borrowed when somebody has to wait for it (another stream, a host
    read, a free of its memory, ``sync``): ``CudaStreams.event_of`` then records the stream's own
    event (``StreamMark``) after everything issued so far, and the task waits on that. The mark
    may cover later work of the stream too, so such a wait can be longer than needed: the
    runtime may over-synchronize, never under-synchronize.

    ``done`` answers without an event when it can: from the stream's completion mark
    (``done_seq``) or from any newer task of the stream that has an event (a stream runs in
    order). Otherwise it says *not done*, which again only over-synchronizes.
    """

    __slots__ = ("stream", "seq", "cs", "task_id", "known_done", "mark", "executor", "__weakref__")

    # What a CudaTask carries and a warm launch never has.
    run = None
    rec = None
    deps = ()
    failure_hint = None
    timing = None
    ran = True
    label = "warm-launch"
    duration = None

    def __init__(self, stream, cs, streams, task_id, seq=0):
        self.stream = stream
        self.seq = seq               # its position in ``cs`` (set by the warm path when it is issued)
        self.cs = cs
        self.executor = streams
        self.task_id = task_id
        # Known to be done (public: the warm path reads it in its inlined renewal test).
        self.known_done = False
        self.mark = None             # the CudaTask or StreamMark whose event covers it, once needed

    def renew(self, seq: int) -> bool:
        """Stand for the next launch of the same warm entry, at position ``seq`` of its stream,
        instead of a new task: only while nobody but the hazard tracker's states can hold this
        task (it is its stream's ``renewable``: no reader, sync, free or other stream was handed
        it, so no thread can be asking ``done`` or ``wait`` about the older position) and
        nothing was learnt about it (no event, not known done). Under the device lock. False:
        the caller makes a new task. (``WarmPath.fast_launch`` writes this test out inline: a
        change here is a change there.)"""
        cs = self.cs
        if cs.renewable is not self or self.known_done or self.mark is not None:
            return False
        self.seq = seq
        return True

    @property
    def settled(self) -> bool:
        """Known to be done already (without asking any event)."""
        return self.known_done

    @property
    def event(self):
        mark = self.mark
        return None if mark is None else mark.event

    @property
    def done(self) -> bool:
        if self.known_done:
            return True
        cs = self.cs
        if self.seq <= cs.done_seq:
            self.known_done = True
            return True
        mark = self.mark
        if mark is None:
            mark = cs.evented
            if mark is None or mark.seq < self.seq:
                return False          # no event covers it yet: not known to be done
        if mark.done:
            self.known_done = True
            return True
        return False

    def wait(self, timeout: float | None = None) -> bool:
        if self.done:
            return True
        if self.mark is None:
            self.executor.event_of_locked(self)
        mark = self.mark
        if mark is not None:
            mark.wait()               # also moves the stream's done_seq past this task
        self.known_done = True             # (no mark: done already, or the device is broken)
        return True

    def __repr__(self) -> str:
        return f"<WarmTask #{self.seq} on {self.stream} {'done' if self.known_done else 'pending'}>"
