"""The bounded pool of worker threads that runs host streams' flushed work (see ``streams/host_streams.py``).

A fixed maximum of worker threads serves any number of streams. Each stream with flushed work is
in exactly one of four places, changed only under the pool's lock:

- *runnable*: in the run queue; its first task's dependencies have all finished;
- *held*: a worker is running its tasks, one at a time, in order;
- *parked*: its first task waits for an unfinished task of another stream, and the stream is on
  that task's ``parked_streams`` list; finishing the task puts the stream back in its place;
- *idle*: nothing flushed is left (``scheduled`` is false).

A stream is in one place at a time, so two of its tasks never run at once, and it always runs its
first task first, so they run in submission order. A worker never waits for a dependency: a
stream whose next task cannot run yet is parked and the worker takes another runnable stream.

Workers are started when runnable streams outnumber the workers that will come for them (up to
the maximum) and exit after ``_IDLE_EXIT_SECONDS`` with nothing to do. A worker that cannot be
started is harmless while another worker lives (it will come back to the run queue). When none
lives, nothing could ever run the runnable streams: their tasks are *abandoned* with a
``DeviceFault`` (reported through ``on_fault``; waiting for such a task raises it), and so is
every task that depends on an abandoned one. An abandoned task's stream stays *poisoned*: its
later tasks are abandoned too, because they may read what the abandoned task never wrote (the
hazard tracker leaves same-stream orderings to the stream itself).
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import threading
from _thread import allocate_lock as _allocate_lock
from typing import Callable

from numba_cube.errors import DeviceFault

__all__ = ["StreamQueue", "WorkerPool", "default_max_workers"]

log = logging.getLogger("numba_cube")

_IDLE_EXIT_SECONDS = 2.0


def default_max_workers() -> int:
    """Twice the CPUs this process may use (at least 4): kernels release the GIL and parallelise
    internally, so more workers than that only add threads, while a few spare ones keep a stream
    whose task is long from holding up the others."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    return max(4, 2 * cpus)


class StreamQueue:
    """One stream's work: ``pending`` (not yet flushed; the server thread's alone), ``ready``
    (flushed, not yet run; the pool's, under its lock), and where the stream is (module docs)."""

    __slots__ = ("id", "pending", "tail", "ready", "scheduled", "fault")

    def __init__(self, sid):
        self.id = sid
        self.pending: list = []
        self.tail = None                 # last task queued on this stream
        self.ready: collections.deque = collections.deque()
        self.scheduled = False           # runnable, held or parked (not idle)
        self.fault: DeviceFault | None = None   # poisoned: every later task is abandoned


class WorkerPool:
    """At most ``max_workers`` threads running the flushed work of any number of streams."""

    def __init__(self, name: str, max_workers: int, on_fault: Callable[[BaseException], None]):
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.name = name
        self.max_workers = max_workers
        self._on_fault = on_fault
        self._lock = threading.Lock()
        self._runnable: collections.deque = collections.deque()
        # One wake-up lock per sleeping worker (held while it sleeps). Waking pops it: a woken
        # worker is accounted for at once, so two flushes in a row wake two workers, not one twice.
        self._idle: list = []
        self._coming = 0              # workers woken or started that have not reached the run queue
        self._threads: set = set()    # live workers
        self._numbers = itertools.count(1)
        self._start_error: BaseException | None = None

    # -- the server thread's side -----------------------------------------------------------------
    def submit(self, st: StreamQueue, tasks: list) -> None:
        """Append flushed ``tasks`` to ``st`` and make sure a worker will run them."""
        with self._lock:
            st.ready.extend(tasks)
            if not st.scheduled:
                st.scheduled = True
                self._settle([st])
            fault = self._dispatch(taking=0)
        if fault is not None:
            self._on_fault(fault)

    def workers(self) -> list:
        """The live worker threads (a snapshot)."""
        with self._lock:
            return list(self._threads)

    # -- placing streams (the pool's lock is held) ------------------------------------------------
    @staticmethod
    def _blocking_dep(task):
        """The first dependency of ``task`` that is unfinished or abandoned, or None."""
        for dep in task.deps:
            if not dep.finished or dep.fault is not None:
                return dep
        return None

    def _settle(self, work: list) -> None:
        """Put each stream of ``work`` (none of them held) in its place: runnable, parked, or, if
        poisoned, drained by abandoning its tasks. Abandoning a task releases the streams parked
        on it, which are settled in turn (a list, not recursion: chains can be long)."""
        while work:
            st = work.pop()
            while st.ready:
                head = st.ready[0]
                if st.fault is None:
                    dep = self._blocking_dep(head)
                    if dep is None:
                        self._runnable.append(st)
                        break
                    if dep.fault is None:
                        dep.park(st)
                        break
                    st.fault = dep.fault     # it depends on work that will never run
                st.ready.popleft()
                work.extend(head.finish(st.fault))
            else:
                st.scheduled = False

    def _dispatch(self, taking: int) -> DeviceFault | None:
        """Wake or start workers for the runnable streams nobody comes for (``taking``: 1 when the
        caller is a worker about to take one itself). If no worker lives to run them, abandon
        them and return the fault to report once the lock is released."""
        wanted = len(self._runnable) - self._coming - taking
        while wanted > 0 and self._idle:
            self._idle.pop().release()
            self._coming += 1
            wanted -= 1
        while wanted > 0 and len(self._threads) < self.max_workers and self._start_worker():
            wanted -= 1
        fault = None
        while self._runnable and not self._threads:
            fault = self._abandon_runnable()
        return fault

    def _start_worker(self) -> bool:
        thread = threading.Thread(target=self._work, name=f"numba_cube-{self.name}-worker{next(self._numbers)}",
                                  daemon=True)
        self._threads.add(thread)
        self._coming += 1
        try:
            # Under the lock: start() only waits for the thread to exist, not for it to run (it
            # blocks on this lock first), and the count of live workers stays exact.
            thread.start()
        except Exception as exc:  # noqa: BLE001 - typically RuntimeError: can't start new thread
            self._threads.discard(thread)
            self._coming -= 1
            # Once as a warning: out of threads, every later flush may try (and fail) again.
            log.log(logging.DEBUG if self._start_error is not None else logging.WARNING,
                    "numba_cube: could not start a stream worker of %s (%d live): %s: %s",
                    self.name, len(self._threads), type(exc).__name__, exc)
            self._start_error = exc
            return False
        return True

    def _abandon_runnable(self) -> DeviceFault:
        cause = self._start_error
        streams = ", ".join(str(st.id) for st in itertools.islice(self._runnable, 4))
        if len(self._runnable) > 4:
            streams += f" and {len(self._runnable) - 4} more streams"
        fault = DeviceFault(
            f"device {self.name}: no stream worker thread could be started ({type(cause).__name__}: "
            f"{cause}), so the work flushed to {streams} can never run; it is abandoned, with every "
            f"task that depends on it. The process is out of threads: keep fewer threads alive, or "
            f"raise the process's thread limit (ulimit -u, the container's pids limit)")
        fault.__cause__ = cause
        log.error("numba_cube: %s", fault)
        work = list(self._runnable)
        self._runnable.clear()
        for st in work:
            st.fault = fault
        self._settle(work)
        return fault

    # -- workers ------------------------------------------------------------------------------------
    def _work(self) -> None:
        with self._lock:
            self._coming -= 1
            try:
                while True:
                    st = self._take()
                    if st is None:
                        return
                    self._run_stream(st)
                    self._dispatch(taking=1)   # a worker lives (this one): never a fault
            finally:
                self._threads.discard(threading.current_thread())

    def _take(self) -> StreamQueue | None:
        """The next runnable stream, sleeping for it if there is none; None: idle too long."""
        while not self._runnable:
            wake = _allocate_lock()
            wake.acquire()
            self._idle.append(wake)
            self._lock.release()
            try:
                wake.acquire(timeout=_IDLE_EXIT_SECONDS)
            finally:
                self._lock.acquire()
            if wake in self._idle:           # nobody woke it: it timed out
                self._idle.remove(wake)
                if not self._runnable:
                    return None
            else:                            # woken (perhaps just as it timed out)
                self._coming -= 1
        return self._runnable.popleft()

    def _run_stream(self, st: StreamQueue) -> None:
        """Run ``st``'s tasks in order while it may keep this worker; then put it in its place."""
        while True:
            task = st.ready.popleft()
            self._lock.release()
            try:
                task.run()
            except BaseException as exc:  # noqa: BLE001 - a runtime bug, not a launch failure
                log.error("numba_cube: stream task %s failed", task.label, exc_info=exc)
                self._on_fault(exc)
            finally:
                self._lock.acquire()
            self._settle(task.finish())
            if not st.ready:
                st.scheduled = False
                return
            if self._blocking_dep(st.ready[0]) is not None:
                self._settle([st])           # parks on its dependency; this worker moves on
                return
            # The next task can run. What the finished task unparked gets other workers; if some
            # runnable stream still gets none (the pool is at its bound), take turns: this
            # stream goes to the back of the queue.
            self._dispatch(taking=0)
            if len(self._runnable) > self._coming:
                self._settle([st])
                return
