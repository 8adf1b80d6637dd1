"""Streams that execute on host worker threads (the CPU backend's queues).

Each logical stream has a *pending* list, filled by the server thread, and a worker thread that
runs what has been *flushed* to it, in order. Work is flushed (handed to the worker):

- when the stream's pending list reaches ``max_tasks`` (runtime.md section 3);
- when a task of another stream depends on it: the producer is flushed first, so "another
  thread's launch that binds a buffer of this stream makes this stream execute";
- when a reader waits for it (``read``, ``sync_buffers``, ``sync``, a dynamic count).

Deadlock freedom, walked through: a worker only ever blocks on the ``done`` event of a dependency.
Every dependency was registered *before* its dependent (the server thread sees launches in one
order), and ``enqueue`` flushes the dependency's stream before the dependent is queued, so every
task a worker waits for is already on some worker's queue, and the waits-for graph follows
registration order: it has no cycle.

Workers release the GIL while kernels run (they are ``nogil`` Numba functions), so different
streams' work runs at the same time. An idle worker exits after a while and is restarted on
demand, so a program that makes many short-lived streams does not accumulate threads.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from _thread import allocate_lock as _allocate_lock
from typing import Callable

__all__ = ["Task", "HostStreams"]

log = logging.getLogger("numba_cube")

_IDLE_EXIT_SECONDS = 2.0


class Task:
    """One unit of stream work: a callable, the stream it runs on, what it waits for."""

    __slots__ = ("run", "stream", "deps", "label", "failure_hint", "duration", "task_id", "_done", "__weakref__")
    _counter = itertools.count()

    def __init__(self, run: Callable[[], None], stream, label: str = ""):
        self.run = run
        self.stream = stream
        self.deps: list = []
        self.label = label
        # Set when the task is known to fail before it runs (a compile failure): check() reports it
        # without waiting (runtime.md 4.3).
        self.failure_hint = None
        self.duration: float | None = None  # seconds the dispatch ran (None: it did not run)
        self.task_id = 0
        # A raw lock held until the task is done: cheaper to make than an Event (a launch makes
        # one), and any number of waiters can pass it one after the other.
        self._done = _allocate_lock()
        self._done.acquire()

    @property
    def done(self) -> bool:
        return not self._done.locked()

    def wait(self, timeout: float | None = None) -> bool:
        if self._done.acquire(timeout=-1 if timeout is None else timeout):
            self._done.release()
            return True
        return False

    def set_done(self) -> None:
        self._done.release()

    def __repr__(self) -> str:
        return f"<Task {self.label} on {self.stream} {'done' if self.done else 'pending'}>"


class _Stream:
    __slots__ = ("id", "pending", "queue", "worker", "lock", "tail")

    def __init__(self, sid):
        self.id = sid
        self.pending: list[Task] = []
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.worker: threading.Thread | None = None
        self.lock = threading.Lock()
        self.tail: Task | None = None  # last task queued on this stream


class HostStreams:
    """Per-stream pending lists and worker threads. ``enqueue``/``flush`` run on the server thread."""

    def __init__(self, name: str, max_tasks: int, on_fault: Callable[[BaseException], None]):
        if max_tasks < 1:
            raise ValueError("max_tasks must be at least 1")
        self.name = name
        self.max_tasks = max_tasks
        self._on_fault = on_fault
        self._streams: dict = {}

    def _stream(self, sid) -> _Stream:
        st = self._streams.get(sid)
        if st is None:
            st = self._streams[sid] = _Stream(sid)
        return st

    def enqueue(self, task: Task, deps: list) -> None:
        """Queue ``task`` after ``deps`` (tasks of other streams), flushing what it needs."""
        task.deps = deps
        for dep in deps:
            self.flush(dep.stream)
        st = self._stream(task.stream)
        st.pending.append(task)
        st.tail = task
        if len(st.pending) >= self.max_tasks:
            self.flush(task.stream)

    def flush(self, sid) -> None:
        """Hand every pending task of stream ``sid`` to its worker."""
        st = self._streams.get(sid)
        if st is None or not st.pending:
            return
        tasks, st.pending = st.pending, []
        with st.lock:
            for t in tasks:
                st.queue.put(t)
            if st.worker is None:
                st.worker = threading.Thread(target=self._work, args=(st,),
                                             name=f"numba_cube-{self.name}-stream{getattr(sid, 'value', sid)}",
                                             daemon=True)
                st.worker.start()

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
            elif st.worker is None and not st.pending:
                # Idle and finished: forget the stream (its thread may be long gone). A later task
                # on the same id simply makes a new entry.
                del self._streams[sid]
        return tails

    def stream_ids(self) -> list:
        return list(self._streams)

    def _work(self, st: _Stream) -> None:
        while True:
            try:
                task = st.queue.get(timeout=_IDLE_EXIT_SECONDS)
            except queue.Empty:
                with st.lock:
                    # Exit only if nothing arrived between the timeout and taking the lock; flush
                    # holds the same lock while it puts and checks for a worker.
                    if st.queue.empty():
                        st.worker = None
                        return
                continue
            for dep in task.deps:
                dep.wait()
            try:
                task.run()
            except BaseException as exc:  # noqa: BLE001 - a runtime bug, not a launch failure
                log.error("numba_cube: stream task %s failed", task.label, exc_info=exc)
                self._on_fault(exc)
            finally:
                # The deps are needed only until the task ran (a task observer reads them). Kept,
                # they would chain every finished task to the ones it waited for, and a stream's
                # tail (or the hazard tracker's last writer) would keep a cross-stream history alive.
                task.deps = []
                task.set_done()
