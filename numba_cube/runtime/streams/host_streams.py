"""Streams that execute on host worker threads (the CPU backend's queues).

Each logical stream has a *pending* list, filled by the server thread, and work that has been
*flushed* to a bounded pool of worker threads (``streams/worker_pool.py``), which runs it in order. Work
is flushed:

- when the stream's pending list reaches ``max_tasks`` (CONTRACT.md section 3);
- when a task of another stream depends on it: the producer is flushed first, so "another
  thread's launch that binds a buffer of this stream makes this stream execute";
- when a reader waits for it (``read``, ``sync_buffers``, ``sync``, a dynamic count).

Workers are not per stream: at most ``NUMBA_CUBE_STREAM_WORKERS`` threads per device (default
twice the CPUs, at least 4) serve every stream, so a program that makes thousands of short-lived
issuing threads (each with its own stream) does not make thousands of workers. A stream is held by
at most one worker at a time and runs its tasks in submission order; different streams run on
different workers at the same time (kernels are ``nogil`` Numba functions). Idle workers exit
after a while and are started again on demand.

Deadlock freedom, walked through. The only waits are (a) a *stream* waiting for a dependency and
(b) a runnable stream waiting for a free worker. (a) never occupies a worker: a stream whose next
task has an unfinished dependency is parked on that task, off every worker, and becomes runnable
when it finishes. So a worker only runs tasks whose dependencies have finished, each runs to its
end, and the worker comes back to the run queue; while the queue is not empty some worker lives
to take it (one exits only when the queue is empty, and a flush starts one if none lives). Then
every flushed task runs, by induction on registration order: every dependency was registered
*before* its dependent (the server thread sees launches in one order), and ``enqueue`` flushes the
dependency's stream before the dependent is queued, so each dependency is flushed, and is either
earlier on the same stream or earlier on another; by induction it finishes, which unparks the
dependent's stream (or the dependent is first on its stream, runnable), and a worker runs it. The
waits-for relation follows registration order and has no cycle, however few the workers.

When no worker can be started at all (the process is out of threads) and none lives, the work
that could never run is abandoned with a ``DeviceFault`` instead of waiting for ever: it is
reported through ``on_fault`` (``sync()`` raises it) and waiting for an abandoned task raises it
(``read``, ``sync``). Work that depends on abandoned work, and later work on its stream, is
abandoned too: it would read what was never written (``streams/worker_pool.py``).
"""

from __future__ import annotations

import itertools
from _thread import allocate_lock as _allocate_lock
from typing import Callable

from numba_cube import config
from numba_cube.errors import DeviceFault
from numba_cube.runtime.streams.worker_pool import StreamQueue, WorkerPool, default_max_workers

__all__ = ["Task", "HostStreams"]


class Task:
    """One unit of stream work: a callable, the stream it runs on, what it waits for."""

    __slots__ = ("run", "stream", "deps", "label", "failure_hint", "duration", "task_id", "parked_streams",
                 "inline", "_done", "_fault", "__weakref__")
    _counter = itertools.count()

    def __init__(self, run: Callable[[], None], stream, label: str = ""):
        self.run = run
        self.stream = stream
        self.deps: list = []
        self.label = label
        # Set when the task is known to fail before it runs (a compile failure): check() reports it
        # without waiting (CONTRACT.md 4.3).
        self.failure_hint = None
        self.duration: float | None = None  # seconds the dispatch ran (None: it did not run)
        self.task_id = 0
        self.parked_streams: list | None = None   # streams waiting for this task (the pool's)
        # May run on the enqueuing thread when it has nothing to wait for (``enqueue``): set by a
        # mechanism for short work, on a server whose channel holds the device lock meanwhile.
        self.inline = False
        # A raw lock held until the task is finished: cheaper to make than an Event (a launch
        # makes one), and any number of waiters can pass it one after the other.
        self._done = _allocate_lock()
        self._done.acquire()
        self._fault: DeviceFault | None = None

    @property
    def done(self) -> bool:
        """Finished and ran: an abandoned task is never done, so readers keep waiting for it
        (and get its fault) instead of reading what it never wrote."""
        return not self._done.locked() and self._fault is None

    @property
    def finished(self) -> bool:
        """Ran or was abandoned: nothing more will happen to it."""
        return not self._done.locked()

    @property
    def fault(self) -> DeviceFault | None:
        """Why the task was abandoned (no worker could run it), or None."""
        return self._fault

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the task finished: True, or False on timeout. Raises ``DeviceFault`` if it
        was abandoned."""
        if self._done.acquire(timeout=-1 if timeout is None else timeout):
            self._done.release()
            if self._fault is not None:
                # A fresh exception per waiter: several threads may raise it at once.
                err = DeviceFault(str(self._fault))
                err.__cause__ = self._fault.__cause__
                raise err
            return True
        return False

    def park(self, stream) -> None:
        """Keep ``stream`` until this task finishes (``finish`` hands it back)."""
        if self.parked_streams is None:
            self.parked_streams = []
        self.parked_streams.append(stream)

    def finish(self, fault: DeviceFault | None = None) -> list:
        """Mark the task finished (ran, or abandoned with ``fault``); return the parked streams."""
        # The deps are needed only until the task ran (a task observer reads them). Kept, they
        # would chain every finished task to the ones it waited for, and a stream's tail (or the
        # hazard tracker's last writer) would keep a cross-stream history alive.
        self.deps = []
        self._fault = fault
        parked, self.parked_streams = self.parked_streams, None
        self._done.release()
        return parked or []

    def __repr__(self) -> str:
        state = "abandoned" if self._fault is not None else "done" if self.done else "pending"
        return f"<Task {self.label} on {self.stream} {state}>"


#: The fewest streams before idle ones are looked for (``HostStreams._forget_idle``).
_MIN_FORGET = 64


class HostStreams:
    """Per-stream pending lists and a bounded worker pool. ``enqueue``/``flush`` run on the server
    thread."""

    def __init__(self, name: str, max_tasks: int, on_fault: Callable[[BaseException], None],
                 max_workers: int | None = None):
        if max_tasks < 1:
            raise ValueError("max_tasks must be at least 1")
        if max_workers is None:
            max_workers = config.get_int("NUMBA_CUBE_STREAM_WORKERS", default_max_workers(), 1)
        self.name = name
        self.max_tasks = max_tasks
        self._pool = WorkerPool(name, max_workers, on_fault)
        self._streams: dict = {}
        # Past this many streams, idle ones are forgotten (``_forget_idle``): a program that makes
        # ever new streams keeps those with work only, sync() or not.
        self._forget_idle_at = _MIN_FORGET

    @property
    def max_workers(self) -> int:
        return self._pool.max_workers

    def workers(self) -> list:
        """The live worker threads of this device (a snapshot)."""
        return self._pool.workers()

    def _stream(self, sid) -> StreamQueue:
        st = self._streams.get(sid)
        if st is None:
            if len(self._streams) >= self._forget_idle_at:
                self._forget_idle()
            st = self._streams[sid] = StreamQueue(sid)
        return st

    def _forget_idle(self) -> None:
        """Forget the streams with nothing pending or running (a later task on one of those ids
        makes a new entry, as after ``flush_all``); a poisoned stream is kept. Work still pending
        is flushed (it may run at any time), so that a stream its thread left behind is idle,
        and forgotten, by a later look. Looked for again when twice as many are left."""
        for sid, st in list(self._streams.items()):
            if st.pending:
                self.flush(sid)
        self._streams = {sid: st for sid, st in self._streams.items()
                         if st.scheduled or st.fault is not None
                         or (st.tail is not None and not st.tail.done)}
        self._forget_idle_at = max(_MIN_FORGET, 2 * len(self._streams))

    def enqueue(self, task: Task, deps: list) -> None:
        """Queue ``task`` after ``deps`` (tasks of other streams), flushing what it needs; or,
        for a task marked ``inline`` whose stream is idle and whose dependencies are all done,
        run it now, on this thread (``run_inline``)."""
        if task.inline and self.idle(task.stream) and all(d.done for d in deps):
            self.run_inline(task)
            return
        task.deps = deps
        for dep in deps:
            self.flush(dep.stream)
        st = self._stream(task.stream)
        st.pending.append(task)
        st.tail = task
        if len(st.pending) >= self.max_tasks:
            self.flush(task.stream)

    def flush(self, sid) -> None:
        """Hand every pending task of stream ``sid`` to the worker pool."""
        st = self._streams.get(sid)
        if st is None or not st.pending:
            return
        tasks, st.pending = st.pending, []
        self._pool.submit(st, tasks)

    def flush_tasks(self, tasks) -> None:
        for sid in {t.stream for t in tasks}:
            self.flush(sid)

    def flush_all(self) -> list[Task]:
        """Flush every stream; return each stream's last task (waiting on them waits for all)."""
        tails = []
        for sid, st in list(self._streams.items()):
            self.flush(sid)
            if st.tail is not None and not st.tail.done:
                tails.append(st.tail)
            elif not st.pending:
                # Its last task ran, so all of its work did: forget the stream (short-lived threads
                # each have one). A later task on the same id simply makes a new entry. A stream
                # whose tail was abandoned is kept: it stays poisoned.
                del self._streams[sid]
        return tails

    def stream_ids(self) -> list:
        return list(self._streams)

    def idle(self, sid) -> bool:
        """Has stream ``sid`` no work that is not done (nothing pending, its last task done)? Then
        a task may run on the issuing thread without overtaking work of its own stream."""
        st = self._streams.get(sid)
        return st is None or (not st.pending and (st.tail is None or st.tail.done))

    @staticmethod
    def run_inline(task: Task) -> None:
        """Run ``task`` on the calling thread, now: on an idle stream, with nothing to wait for,
        while the caller holds the device lock (``launch/warm_host.py``). Nothing can be parked on it:
        a task of another stream registers a dependency only under the same lock."""
        try:
            task.run()
        finally:
            task.finish()
