"""The device handle: how work reaches the single-owner server (CONTRACT.md section 8).

The server's compile cache, scheduler state and memory table are touched by one thread at a time
and need no locks of their own. Two ways to give it that, behind one interface:

- ``ThreadChannel``: a runner thread per device. ``submit`` is fire-and-forget, ``call`` waits
  for the answer and re-raises a server-side exception on the caller. The issuing thread is free
  while the device thread compiles; every operation costs a hop between threads.
- ``InlineChannel``: the server runs on the issuing thread under the device's lock. Best where a
  thread hop would cost more than the launch: CUDA (the driver call is itself asynchronous) and
  the CPU backend (its warm path runs short kernels right there: ``launch/warm_host.py``).

Either way the server receives everything (stream id, launch mode) as arguments and never reads
the caller's thread-local state. FIFO order of one channel is what makes "launch, then read" from
one thread, or "A's launch returned, then B launches" across threads, see the launch first.

A fire-and-forget operation that raises is a bug or a broken device, not a launch failure (those
live on buffers): the channel keeps the first such error as its ``fault``, and ``sync()`` reports
it as a ``DeviceFault``.
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future

from numba_cube.errors import DeviceFault

__all__ = ["ThreadChannel", "InlineChannel", "ForkedChannel"]

log = logging.getLogger("numba_cube")

_STOP = object()


class ThreadChannel:
    """A runner thread that owns the server; operations are queued to it in FIFO order."""

    def __init__(self, name: str):
        self.name = name
        self.fault: BaseException | None = None
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"numba_cube-{name}", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def submit(self, fn, *args) -> None:
        """Queue ``fn(*args)`` on the device thread and return at once."""
        self._queue.put((fn, args, None))

    def post(self, fn, *args) -> None:
        """Run ``fn(*args)`` after everything submitted before, without ever blocking: what a
        finalizer uses (it runs on whatever thread dropped the object, which may hold a lock of
        its own). Here, the same as ``submit``."""
        self._queue.put((fn, args, None))

    def call(self, fn, *args):
        """Run ``fn(*args)`` on the device thread, wait, and return its result (or raise)."""
        if not self._thread.is_alive():
            raise DeviceFault(f"the device thread of {self.name} is not running") from self.fault
        if threading.current_thread() is self._thread:
            return fn(*args)  # re-entrant use from the server itself (e.g. a finalizer) must not deadlock
        fut: Future = Future()
        self._queue.put((fn, args, fut))
        return fut.result()

    def close(self) -> None:
        self._queue.put((_STOP, (), None))

    def _run(self) -> None:
        while True:
            fn, args, fut = self._queue.get()
            if fn is _STOP:
                return
            try:
                result = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - routed to the caller or kept as the fault
                if fut is not None:
                    fut.set_exception(exc)
                else:
                    log.error("numba_cube: operation %s on %s failed", getattr(fn, "__name__", fn),
                              self.name, exc_info=exc)
                    if self.fault is None:
                        self.fault = exc
            else:
                if fut is not None:
                    fut.set_result(result)


class InlineChannel:
    """Runs server operations on the calling thread, one at a time, under the device lock."""

    def __init__(self, name: str):
        self.name = name
        self.fault: BaseException | None = None
        # Re-entrant: a server operation may drop the last reference to a handle, whose finalizer
        # comes back here on the same thread. Such nested fire-and-forget submissions are deferred
        # until the outer operation returns: the server's state is not re-entrant.
        self.lock = threading.RLock()
        # How deep the lock's owner is in operations. Read and written only by the thread that
        # holds the lock (so a plain attribute, no thread-local lookup on the launch path); other
        # threads ask the lock itself whether they are inside (``_is_owned``).
        self.depth = 0
        # The submissions deferred until the outermost operation ends (public, like ``depth``,
        # for a hot path that inlines ``enter``/``leave``: see ``leave``).
        self.deferred: list = []

    alive = True

    def submit(self, fn, *args) -> None:
        if self.lock._is_owned():
            self.deferred.append((fn, args))   # nested in an operation of this thread
            return
        try:
            self.call(fn, *args)
        except KeyboardInterrupt:
            # The user's Ctrl-C, on the thread that issued the operation: raised at the call.
            # The operation says what it means for the device (server.op_launch).
            raise
        except BaseException as exc:  # noqa: BLE001 - same contract as ThreadChannel.submit
            self._keep_fault(fn, exc)

    def post(self, fn, *args) -> None:
        """Run ``fn(*args)`` after everything submitted before, without ever blocking: what a
        finalizer uses. A finalizer runs on whatever thread dropped the object -- the garbage
        collector may run it on a stream worker holding its pool's lock, or inside the ledger's
        lock -- and waiting there for the device lock, whose holder may be waiting for that same
        lock, would deadlock. So when the lock is not free at once the operation is deferred to
        the end of the operation in progress, or of the next one (a release of memory, the one
        user, may come late, never early)."""
        if not self.lock._is_owned() and self.lock.acquire(blocking=False):
            try:
                self.depth += 1
                try:
                    fn(*args)
                except BaseException as exc:  # noqa: BLE001 - same contract as submit
                    self._keep_fault(fn, exc)
                finally:
                    self.leave()
            finally:
                self.lock.release()
            return
        self.deferred.append((fn, args))

    def call(self, fn, *args):
        with self.lock:
            self.depth += 1
            try:
                return fn(*args)
            finally:
                self.leave()

    def enter(self) -> None:
        """Begin an operation the calling thread runs itself, holding ``lock``: what ``call``
        does around its function, for a hot path that inlines ``call`` (the CUDA warm launch:
        a call frame less). Pair it with ``leave`` in a ``finally``."""
        self.depth += 1

    def leave(self) -> None:
        """End an operation begun by ``enter`` (or ``call``): the outermost one runs what
        finalizers submitted meanwhile. A hot path may inline the pair as ``channel.depth += 1``
        and ``channel.depth -= 1; if not channel.depth and channel.deferred:
        channel.run_deferred()`` (two method calls less), which is exactly this."""
        self.depth -= 1
        if self.depth == 0 and self.deferred:
            self.run_deferred()

    def run_deferred(self) -> None:
        """Run the submissions deferred during the outermost operation (the lock is held)."""
        while self.deferred:
            fn, args = self.deferred.pop(0)
            self.depth = 1
            try:
                fn(*args)
            except BaseException as exc:  # noqa: BLE001
                self._keep_fault(fn, exc)
            finally:
                self.depth = 0

    def _keep_fault(self, fn, exc) -> None:
        log.error("numba_cube: operation %s on %s failed", getattr(fn, "__name__", fn),
                  self.name, exc_info=exc)
        if self.fault is None:
            self.fault = exc

    def close(self) -> None:
        pass


class ForkedChannel:
    """What a device made before ``os.fork()`` has in the child: no thread of its stream workers
    survived the fork, and its locks may be held by threads that do not exist there, so every
    operation raises ``DeviceFault`` saying so, at once, instead of waiting for ever. A finalizer's
    ``post`` (a handle dropped in the child) does nothing: the bytes are the child's copy."""

    alive = False

    def __init__(self, name: str, parent_pid: int):
        self.name = name
        self.fault = DeviceFault(
            f"device {name} was started by process {parent_pid}, which forked this one: its "
            "worker threads and locks do not survive fork(). Make the client in this process "
            f"(cube.client({name.split(':')[0]!r}) here gives a fresh device), or start worker "
            "processes with the 'spawn' or 'forkserver' method")

    def submit(self, fn, *args) -> None:
        raise self.fault

    def call(self, fn, *args):
        raise self.fault

    def post(self, fn, *args) -> None:
        """Nothing to release: the device's memory is this process's copy, freed with it."""

    def close(self) -> None:
        pass
