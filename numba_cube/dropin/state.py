"""Which client the drop-in layer serves numba.cuda with, and what it launched since a sync.

``numba_cube.install(device)`` sets the client here; every room of the layer (device arrays,
memory, streams, the dispatcher) asks ``layer_client()`` for it, so one process has one
numba.cuda "device" at a time, as a numba.cuda program with one selected GPU has.

numba.cuda reports a kernel's failure where the program next waits for it (a copy to the host,
``cuda.synchronize()``, ``stream.synchronize()``). numba_cube records it on the buffers the launch
should have written. So asynchronous launches note their buffers here (weakly: noting keeps no
memory alive), and a synchronize checks those still alive after waiting
(``raise_pending_failures``). The list is bounded: past ``MAX_PENDING`` launches the oldest are
dropped, whose failures still surface at the copy to the host that reads their buffers (never
silently: a failed buffer cannot be read).
"""

from __future__ import annotations

import threading
from weakref import ref as _ref

from numba_cube.runtime.memory.handle import Handle

__all__ = ["layer_client", "set_layer_client", "note_launched", "take_pending",
           "raise_pending_failures", "MAX_PENDING", "INSTALLED"]

#: how many asynchronous launches' buffers a synchronize checks at most
MAX_PENDING = 4096

_client = None
#: ``[the installed client or None]``: what a warm launch compares its cached client with (one
#: list read, cheaper than a call)
INSTALLED: list = [None]
_pending: list = []
_lock = threading.Lock()


def set_layer_client(client) -> None:
    """The client numba.cuda calls go to (``None``: the layer is not installed)."""
    global _client
    _client = INSTALLED[0] = client
    with _lock:
        _pending.clear()


def layer_client():
    """The installed client; ``RuntimeError`` when the layer is not installed."""
    client = _client
    if client is None:
        raise RuntimeError("numba_cube's numba.cuda layer is not installed: call "
                           "numba_cube.install('cpu') first (or run the program with "
                           "python -m numba_cube run)")
    return client


def note_launched(args) -> None:
    """Remember the buffers among an asynchronous launch's arguments for the next synchronize,
    by weak reference: a buffer the program drops is freed as usual (and nobody can read it)."""
    refs = [_ref(a) for a in args if isinstance(a, Handle)]
    if refs:
        _pending.append(refs)
        if len(_pending) > MAX_PENDING:
            with _lock:
                del _pending[:MAX_PENDING // 2]


def take_pending() -> list:
    """The buffers noted since the last synchronize that are still alive; the notes are cleared
    (a synchronize takes them *before* it waits, so a launch another thread issues meanwhile is
    left for the next one)."""
    with _lock:
        refs = [r for group in _pending for r in group]
        _pending.clear()
    return [h for h in (r() for r in refs) if h is not None]


def raise_pending_failures(launched: list | None = None) -> None:
    """After a wait: raise the ``LaunchFailure`` of a buffer an asynchronous launch should have
    written (``launched``: what ``take_pending`` took before the wait; None takes it now)."""
    if launched is None:
        launched = take_pending()
    if launched:
        layer_client().check(*launched)
