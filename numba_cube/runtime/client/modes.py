"""Launch modes: dry runs and real runs (CONTRACT.md section 2).

``dry_run()`` raises a **process-wide depth**; ``real_run()`` and ``thread_dry_run()`` open
**thread-local scopes**. The issuing thread's innermost open scope decides; without one, the
process-wide depth does::

    launch_mode() = EXECUTE  if this thread's innermost scope is a real_run
                    SKIP     if it is a thread_dry_run
                    EXECUTE  if there is none and dry_depth == 0, else SKIP

Why a thread-local dry run besides the process-wide one: autotune compiles its candidates
without running them, and a process-wide window for that would skip, silently, every launch
other threads issue meanwhile (their work, not the tuner's). ``thread_dry_run`` skips only the
launches of the thread that opened it, and only while it is that thread's innermost scope, so a
tuner called inside a real run still only compiles, and a tuner nested in a candidate still
measures. Its skipped launches are the opener's own business: they are not announced to the
process-wide dry runs open meanwhile (``claim_skipped_launch``), whose lists report what *they*
skipped. ``dry_run()`` keeps its process-wide meaning: it is what a user opens to compile a
program's launches wherever they are issued (``numba_cube.dask.precompile`` on every worker).

Why a depth and not a flag: with a save-and-restore flag, one thread's guard ending would end
another thread's dry run (or leave the process stuck in one when the exits interleave). Counters
commute, so any interleaving of enters and exits from any threads ends where it started.

Why real runs are thread-local: autotune holds one around its measurements. Those launches are the
measurement a dry run exists to provoke, not the work it exists to skip, and only the thread that
issues them knows it; the mode is therefore decided on the issuing thread and passed to the server
as a value (CONTRACT.md section 1).

What a dry run found: ``with cube.dry_run() as run:`` then ``run.failures``, one ``DryRunFailure``
(kernel id, exception) per distinct failure a skipped launch would have met before running: its
kernel does not compile, or its geometry is beyond the launch limits. Because the dry run is
process-wide, so is its list: it holds the skipped launches of *every* thread issued while it was
open (another thread's launches were skipped because of it, so it is the one to tell about them).
The list is complete when the block exits: the exit waits until the servers have handled every
launch the dry run skipped (compiles run on a device thread, after the launch returned).

On a terminal, a dry run that compiles more than a few launches (``DRY_RUN_BAR_AFTER``) shows a
counter of them (``progress.DeferredCounter``: tqdm's, never when piped, in CI or without tqdm),
updated where the servers report each one handled (``launch_handled``); only the outermost open
dry run draws one. Launches outside dry runs never reach that code.

Depths and scopes that cannot be corrupted: each ``dry_run``, ``real_run`` or ``thread_dry_run``
object counts its own entries, so an exit without its enter (or a second exit, or a thread
scope's exit on another thread) raises ``LaunchModeError`` and leaves every depth and scope as it
was. Each use of one as a decorator is a fresh object.
"""

from __future__ import annotations

import contextlib
import enum
import threading
from typing import NamedTuple

from numba_cube.errors import DeviceFault, LaunchModeError
from numba_cube.progress import DeferredCounter
from numba_cube.runtime.client.watchers import watch

__all__ = ["LaunchMode", "dry_run", "real_run", "thread_dry_run", "launch_mode", "DryRunFailure",
           "SkippedLaunch", "claim_skipped_launch"]


class LaunchMode(enum.Enum):
    """What the server does with a launch once it is compiled."""

    EXECUTE = "execute"  #: compile if needed, then run
    SKIP = "skip"        #: compile if needed, fill every cache, then drop the launch


class DryRunFailure(NamedTuple):
    """A launch a dry run skipped that would have failed before running, and why."""

    kernel_id: str
    error: BaseException


_dry_lock = threading.Lock()
_dry_depth = 0
_open_runs: list = []      # the dry_run objects open now (under _dry_lock)
_local = threading.local()

#: A dry run draws its counter from the launch after this many (on a terminal): "more than a
#: few", so that the common dry run of a handful of kernels stays quiet.
DRY_RUN_BAR_AFTER = 3

#: How often a dry run's exit, waiting for the servers, looks whether a server's thread died (a
#: launch queued to a dead device thread is never handled).
_LIVENESS_POLL_SECONDS = 0.5


class _BareDecorator(contextlib.ContextDecorator):
    """Also usable as a bare decorator: ``@cube.dry_run`` as well as ``@cube.dry_run()``."""

    def __new__(cls, func=None):
        self = super().__new__(cls)
        if func is not None:
            self.__init__()
            return self(func)
        return self

    def _recreate_cm(self):
        # Each decorated call is its own block: concurrent calls must not share one object's
        # entry count (nor a dry run's list of failures).
        return type(self)()


class dry_run(_BareDecorator):
    """Inside this block (on every thread), launches compile and cache but do not run.

    Usable as ``with cube.dry_run() as run:`` (then ``run.failures``) or as a decorator. Nests,
    and may be entered from several threads at once.
    """

    def __init__(self, func=None):
        self.failures: list[DryRunFailure] = []
        self._entries = 0          # this object's open entries (under _dry_lock)
        self._cond = threading.Condition(threading.Lock())
        self._pending: dict = {}   # server -> skipped launches it has not handled yet
        self._seen: set = set()
        self._progress: DeferredCounter | None = None   # the outermost open dry run's (under _cond)

    def __enter__(self):
        global _dry_depth
        with _dry_lock:
            if self._entries == 0:
                with self._cond:
                    self.failures = []
                    self._seen = set()
                    # One counter on the screen: a nested dry run counts the same launches.
                    self._progress = None if _open_runs else DeferredCounter(
                        "dry run: compiled", DRY_RUN_BAR_AFTER, unit=" launches")
                _open_runs.append(self)
            self._entries += 1
            _dry_depth += 1
        watch(1)
        return self

    def __exit__(self, *exc):
        global _dry_depth
        with _dry_lock:
            if self._entries == 0:
                raise LaunchModeError("dry_run exited without being entered (or exited twice); "
                                      "the dry-run depth is left as it was")
            self._entries -= 1
            _dry_depth -= 1
            last = self._entries == 0
            if last:
                _open_runs.remove(self)   # from now on no launch is claimed for it
        watch(-1)
        if last:
            self._wait_for_servers()
            with self._cond:
                if self._progress is not None:
                    self._progress.close()
                    self._progress = None
        return False

    # -- the skipped launches it waits for ---------------------------------------------------------
    def _claim(self, server) -> None:
        with self._cond:
            self._pending[server] = self._pending.get(server, 0) + 1

    def launch_handled(self, server, kernel_id: str, error: BaseException | None) -> None:
        """The server handled (compiled and dropped) one launch this dry run skipped; ``error``
        is why it would have failed before running, or None (``SkippedLaunch.handled``)."""
        with self._cond:
            if self._progress is not None:
                self._progress.update(kernel_id.rpartition("-")[0] or kernel_id)
            if error is not None:
                key = (kernel_id, type(error), str(error))
                if key not in self._seen:   # a loop of launches of one failing kernel: one entry
                    self._seen.add(key)
                    self.failures.append(DryRunFailure(kernel_id, error))
            left = self._pending.get(server, 0) - 1
            if left > 0:
                self._pending[server] = left
            else:
                self._pending.pop(server, None)
                self._cond.notify_all()

    def _wait_for_servers(self) -> None:
        with self._cond:
            while self._pending:
                if self._cond.wait(_LIVENESS_POLL_SECONDS):
                    continue
                for server in [s for s in self._pending if not _alive(s)]:
                    # Its thread died: the launches queued to it are never handled. Say so.
                    del self._pending[server]
                    self.failures.append(DryRunFailure(
                        "?", DeviceFault(f"the device thread of {getattr(server, 'device', server)} "
                                         f"died before it compiled the launches of this dry run")))


def _alive(server) -> bool:
    channel = getattr(server, "channel", None)
    return bool(getattr(channel, "alive", True))


class SkippedLaunch:
    """One launch skipped while dry runs were open: each of them waits until it was handled."""

    __slots__ = ("runs", "server", "kernel_id", "_handled")

    def __init__(self, runs: tuple, server, kernel_id: str):
        self.runs = runs
        self.server = server
        self.kernel_id = kernel_id
        self._handled = False

    def handled(self, error: BaseException | None) -> None:
        """The server compiled and dropped the launch (``error``: why it would have failed before
        running, or None); or the launch never reached it. Only the first call counts."""
        if self._handled:
            return
        self._handled = True
        for run in self.runs:
            run.launch_handled(self.server, self.kernel_id, error)


def claim_skipped_launch(server, kernel_id: str) -> SkippedLaunch | None:
    """A launch of ``kernel_id`` to ``server`` is being skipped: the token that tells the dry runs
    open now when it was handled (None if none is open any more). Called on the issuing thread
    after the launch mode said SKIP; the server calls ``handled`` once it compiled the launch.
    None too when this thread's own ``thread_dry_run`` skipped it (module docstring)."""
    scopes = getattr(_local, "scopes", None)
    if scopes and scopes[-1][0] is _SKIP:
        return None
    with _dry_lock:
        if not _open_runs:
            return None
        runs = tuple(_open_runs)
        for run in runs:
            run._claim(server)   # under _dry_lock: a run cannot close between listing and claim
    return SkippedLaunch(runs, server, kernel_id)


_REAL, _SKIP = "real", "skip"


class _ThreadScope(_BareDecorator):
    """A scope of the issuing thread (``_local.scopes``, innermost last), entered and exited by
    that thread; each object counts its own entries per thread, so an exit without its enter (or
    on another thread) raises ``LaunchModeError`` and changes nothing."""

    _kind = _REAL

    def __init__(self, func=None):
        self._entries: dict[int, int] = {}   # thread ident -> open entries of this object there

    def __enter__(self):
        ident = threading.get_ident()
        # Only this thread touches its own key and its own list, so no lock is needed.
        self._entries[ident] = self._entries.get(ident, 0) + 1
        scopes = _local.__dict__.setdefault("scopes", [])
        scopes.append((self._kind, self))
        return self

    def __exit__(self, *exc):
        ident = threading.get_ident()
        entries = self._entries.get(ident, 0)
        if entries == 0:
            raise LaunchModeError(f"{type(self).__name__} exited without being entered on this "
                                  "thread (or exited twice); the launch mode is left as it was")
        if entries == 1:
            del self._entries[ident]
        else:
            self._entries[ident] = entries - 1
        scopes = _local.scopes
        # Its own innermost entry (the last one, unless exits were made out of order by hand).
        at = max(i for i, (_, owner) in enumerate(scopes) if owner is self)
        del scopes[at]
        return False


class real_run(_ThreadScope):
    """Launches issued by *this thread* inside this block execute, even inside a dry run."""

    _kind = _REAL


class thread_dry_run(_ThreadScope):
    """Launches issued by *this thread* inside this block compile and are dropped (``SKIP``);
    other threads' launches are not affected (module docstring). A ``real_run`` opened inside
    it executes again."""

    _kind = _SKIP

    # Counted as a watcher (``client/watchers.py``) while open: a warm launch path skips the gates, the
    # launch mode among them, so it must not be taken while any launch may have to be skipped.
    def __enter__(self):
        super().__enter__()
        watch(1)
        return self

    def __exit__(self, *exc):
        super().__exit__(*exc)              # raises (and changes nothing) for a bad exit
        watch(-1)
        return False


def launch_mode() -> LaunchMode:
    """The mode a launch issued now, from this thread, would get."""
    scopes = getattr(_local, "scopes", None)
    if scopes:
        return LaunchMode.EXECUTE if scopes[-1][0] is _REAL else LaunchMode.SKIP
    # Reading an int is atomic under the GIL; a dry run entered concurrently by another thread is
    # racy by nature (the two calls are unordered), so no lock is needed for the read.
    return LaunchMode.EXECUTE if _dry_depth == 0 else LaunchMode.SKIP
