"""Launch modes: dry runs and real runs (runtime.md section 2).

``dry_run()`` raises a **process-wide depth**; ``real_run()`` a **thread-local depth**. A launch
executes when no dry run is open, or when the *issuing* thread is inside a real run::

    launch_mode() = EXECUTE  if dry_depth == 0 or this thread's real_depth > 0  else SKIP

Why a depth and not a flag: with a save-and-restore flag, one thread's guard ending would end
another thread's dry run (or leave the process stuck in one when the exits interleave). Counters
commute, so any interleaving of enters and exits from any threads ends where it started.

Why real runs are thread-local: autotune holds one around its measurements. Those launches are the
measurement a dry run exists to provoke, not the work it exists to skip, and only the thread that
issues them knows it; the mode is therefore decided on the issuing thread and passed to the server
as a value (runtime.md section 1).
"""

from __future__ import annotations

import contextlib
import enum
import threading

from .watchers import watch

__all__ = ["LaunchMode", "dry_run", "real_run", "launch_mode"]


class LaunchMode(enum.Enum):
    """What the server does with a launch once it is compiled."""

    EXECUTE = "execute"  #: compile if needed, then run
    SKIP = "skip"        #: compile if needed, fill every cache, then drop the launch


_dry_lock = threading.Lock()
_dry_depth = 0
_local = threading.local()


class _BareDecorator(contextlib.ContextDecorator):
    """Also usable as a bare decorator: ``@cube.dry_run`` as well as ``@cube.dry_run()``."""

    def __new__(cls, func=None):
        self = super().__new__(cls)
        if func is not None:
            return self(func)
        return self

    def __init__(self, func=None):
        pass


class dry_run(_BareDecorator):
    """Inside this block (on every thread), launches compile and cache but do not run.

    Usable as ``with cube.dry_run():`` or as a decorator. Nests, and may be entered from several
    threads at once.
    """

    def __enter__(self):
        global _dry_depth
        with _dry_lock:
            _dry_depth += 1
        watch(1)
        return self

    def __exit__(self, *exc):
        global _dry_depth
        with _dry_lock:
            _dry_depth -= 1
        watch(-1)
        return False


class real_run(_BareDecorator):
    """Launches issued by *this thread* inside this block execute, even inside a dry run."""

    def __enter__(self):
        _local.real_depth = getattr(_local, "real_depth", 0) + 1
        return self

    def __exit__(self, *exc):
        _local.real_depth -= 1
        return False


def launch_mode() -> LaunchMode:
    """The mode a launch issued now, from this thread, would get."""
    # Reading an int is atomic under the GIL; a dry run entered concurrently by another thread is
    # racy by nature (the two calls are unordered), so no lock is needed for the read.
    if _dry_depth == 0 or getattr(_local, "real_depth", 0) > 0:
        return LaunchMode.EXECUTE
    return LaunchMode.SKIP
