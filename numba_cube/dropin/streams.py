"""numba.cuda's streams and events over numba_cube streams.

- ``cuda.stream()`` is one numba_cube stream (a fresh ``StreamId``): the launches and copies a
  program issues on it run in issue order. The default streams (``default_stream()``,
  ``legacy_default_stream()``, ``per_thread_default_stream()``, and ``0``) are the issuing
  thread's usual numba_cube stream.
- Across streams numba_cube orders work by the buffers it binds (CONTRACT.md section 3): a launch
  that reads what another stream's launch writes waits for it, whatever the program synchronized.
  So the ordering numba.cuda programs ask for with events and the legacy default stream holds
  already; events add their own guarantees on top (below).
- ``stream.synchronize()``, ``cuda.synchronize()``, ``event.synchronize()`` wait for the device's
  work (all of it: over-synchronizing is allowed, under-synchronizing never) and then raise the
  ``LaunchFailure`` of any launch made since the last synchronize (``state.py``).
- ``event.record(stream)`` waits for the device's work (raising nothing: a failure is raised at
  the next wait, ``event.synchronize()`` included), then takes the time: everything issued
  before the record is complete, so ``event.wait(other)`` has nothing left to order, ``query()``
  is True, and ``elapsed_time`` measures what ran between two records (milliseconds, as numba).
"""

from __future__ import annotations

import contextlib
import itertools
import time

from ..errors import StreamIdError, UnsupportedAPIError
from numba_cube.runtime.streams.identity import StreamId
from .state import layer_client, raise_pending_failures, take_pending

__all__ = ["Stream", "Event", "stream", "default_stream", "legacy_default_stream",
           "per_thread_default_stream", "external_stream", "event", "event_elapsed_time",
           "synchronize", "client_for", "stream_id_of"]

_handles = itertools.count(1)


class Stream:
    """A numba.cuda stream: one numba_cube stream (``stream_id``), or the usual one (``None``)."""

    def __init__(self, stream_id: StreamId | None, kind: str = "stream"):
        self.stream_id = stream_id
        self.kind = kind
        self.handle = 0 if stream_id is None else next(_handles)

    def __int__(self) -> int:
        return self.handle

    def __bool__(self) -> bool:
        # numba tests ``if not stream`` for "the default stream"; a user stream is true.
        return self.stream_id is not None

    def __repr__(self) -> str:
        what = self.kind if self.stream_id is None else f"stream {self.stream_id}"
        return f"<numba_cube {what} on {layer_client().device}>"

    def synchronize(self) -> None:
        """Wait until the work issued on this stream is done (module docstring)."""
        synchronize()

    @contextlib.contextmanager
    def auto_synchronize(self):
        """``with stream.auto_synchronize():`` synchronizes the stream on exit."""
        yield self
        self.synchronize()

    def add_callback(self, callback, arg=None) -> None:
        """Run ``callback(stream, status, arg)`` once the work issued so far is done."""
        self.synchronize()
        callback(self, 0, arg)

    def async_done(self):
        raise UnsupportedAPIError("Stream.async_done (an asyncio future of a stream)",
                                  "call stream.synchronize() instead")


_DEFAULT = {}


def _default(kind: str) -> Stream:
    s = _DEFAULT.get(kind)
    if s is None:
        s = _DEFAULT[kind] = Stream(None, kind)
    return s


def stream() -> Stream:
    """A new stream: its work runs in issue order, concurrently with other streams' work."""
    return Stream(StreamId.new())


def default_stream() -> Stream:
    return _default("default stream")


def legacy_default_stream() -> Stream:
    return _default("legacy default stream")


def per_thread_default_stream() -> Stream:
    return _default("per-thread default stream")


def external_stream(ptr):
    raise UnsupportedAPIError("cuda.external_stream (a stream made by another library)",
                              "use cuda.stream(), or the default stream")


def stream_id_of(s) -> StreamId | None:
    """The numba_cube stream of numba's stream argument: ``0``/``None``/a default stream are the
    usual one; anything but a ``Stream`` of this layer (or a ``StreamId``) is a
    ``StreamIdError``."""
    if s is None or (type(s) is int and s == 0):
        return None
    if isinstance(s, Stream):
        return s.stream_id
    if isinstance(s, StreamId):
        return s
    raise StreamIdError(f"a numba.cuda stream argument is cuda.stream(), cuda.default_stream() "
                        f"or 0; got {type(s).__name__} {s!r}")


def client_for(s):
    """The layer's client, pinned to stream ``s``'s numba_cube stream when it has its own."""
    client = layer_client()
    sid = stream_id_of(s)
    return client if sid is None else client.set_stream(sid)


def synchronize() -> None:
    """``cuda.synchronize()``: wait for all work, then raise a failure of a launch since the last
    synchronize (module docstring)."""
    launched = take_pending()
    layer_client().sync()
    raise_pending_failures(launched)


class Event:
    """A numba.cuda event (module docstring says what record and wait guarantee)."""

    def __init__(self, timing: bool = True):
        self.timing = timing
        self._time: float | None = None

    def record(self, stream=0) -> None:
        stream_id_of(stream)                # refuse a bad stream argument first
        layer_client().sync()               # (failures are raised where numba waits, not here)
        self._time = time.perf_counter()

    def wait(self, stream=0) -> None:
        """Make ``stream``'s later work wait for the work recorded before this event: already
        done when the record returned."""
        stream_id_of(stream)

    def synchronize(self) -> None:
        """Wait for the work recorded before this event (done when the record returned), and
        raise a failure of a launch since the last synchronize, as ``cuda.synchronize()``."""
        raise_pending_failures()

    def query(self) -> bool:
        return True

    def elapsed_time(self, evtend: "Event") -> float:
        """Milliseconds from this event's record to ``evtend``'s."""
        return event_elapsed_time(self, evtend)


def event(timing: bool = True) -> Event:
    return Event(timing)


def event_elapsed_time(evtstart: Event, evtend: Event) -> float:
    """Milliseconds between the records of two timing events."""
    for e in (evtstart, evtend):
        if not e.timing:
            raise ValueError("elapsed_time needs events made with cuda.event(timing=True)")
        if e._time is None:
            raise ValueError("elapsed_time of an event that was never recorded")
    return (evtend._time - evtstart._time) * 1000.0
