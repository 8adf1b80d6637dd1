"""The issuing thread's log of the kernel ids it launched (gate 3 of a launch, ``client/launch.py``).

Cheap, always on, and per thread so that parallel tests do not see each other's launches. The
client writes it on every launch; ``numba_cube.testing`` offers it to tests (``launched()``) and
autotune reads it to learn which kernels a candidate launches (``record_launches``). It lives
here, below the client, so that the client does not depend on the test helpers.
"""

from __future__ import annotations

import collections
import contextlib
import threading

__all__ = ["note_launch", "launched", "clear_launched", "record_launches", "THREAD_LOG"]

_local = threading.local()

#: Where this thread's log is, as ``THREAD_LOG.log`` (an ``AttributeError`` before the thread's
#: first launch): a launch path that must save a call appends to it itself and calls
#: ``note_launch`` only on that error (the warm launch, ``client/launch.py``).
THREAD_LOG = _local
_LOG_LENGTH = 1024  # bounded: a long-running program must not grow a log nobody reads


def _log() -> collections.deque:
    log = getattr(_local, "log", None)
    if log is None:
        log = _local.log = collections.deque(maxlen=_LOG_LENGTH)
    return log


def note_launch(kernel_id: str) -> None:
    """Append ``kernel_id`` to this thread's log (the client, at every launch)."""
    try:
        _local.log.append(kernel_id)      # every launch comes here: the short way first
    except AttributeError:
        _log().append(kernel_id)


def launched() -> list[str]:
    """The kernel ids this thread launched (most recent last, the last 1024)."""
    return list(_log())


def clear_launched() -> None:
    _log().clear()


@contextlib.contextmanager
def record_launches():
    """``with record_launches() as ids:``: on exit, ``ids`` lists every kernel id this thread
    launched inside the block, in order (not only the last 1024), and ``launched()`` shows them
    too, as if nothing had watched. Costs nothing per launch (the block gets its own unbounded
    log, appended to the outer one on exit); blocks nest. Autotune uses it to learn which
    kernels a candidate launches."""
    outer = _log()
    inner = _local.log = collections.deque()
    ids: list[str] = []
    try:
        yield ids
    finally:
        ids.extend(inner)
        outer.extend(inner)
        _local.log = outer
