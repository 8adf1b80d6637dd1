"""Stream identity: which logical queue a launch goes to (CONTRACT.md section 3).

By default every issuing thread has its own stream, so two threads launching on one client land
on two streams and the runtime orders them by the buffers they share. ``with cube.stream():``
makes a stream current for the thread (a new one if none is given), and a client can be pinned to
a stream (``client.set_stream``), which wins over both.

The stream is taken from the issuing thread, never from the handles: the handles only say which
stream *last* touched them, which is what the scheduler orders against.
"""

from __future__ import annotations

import itertools
import threading

from numba_cube.errors import StreamIdError

__all__ = ["StreamId", "stream", "stream_id_or_none", "thread_streams"]

_ids = itertools.count(1)
#: Per thread: ``current`` (the thread's current stream, kept up to date by ``stream`` blocks;
#: absent until the thread first asks), ``own`` (its own stream) and ``stack`` (open blocks).
#: Public for the client's warm launch, which reads ``thread_streams.current`` directly (one
#: attribute instead of a call of ``StreamId.current``); everything else calls the methods.
thread_streams = threading.local()


class StreamId(int):
    """The name of one logical queue. Cheap, hashable, comparable.

    An ``int`` underneath: every launch looks its stream up in dicts (the CUDA stream of an id,
    the hazard tracker's stream tails), and an int hashes and compares in C, where a dataclass
    pays a Python-level ``__hash__`` per lookup.
    """

    __slots__ = ()

    @property
    def value(self) -> int:
        return int(self)

    @classmethod
    def new(cls) -> "StreamId":
        """A stream no thread has used yet."""
        return cls(next(_ids))

    @classmethod
    def current(cls) -> "StreamId":
        """This thread's current stream: the innermost ``with cube.stream()``, else its own."""
        # ``current`` is kept up to date by ``stream`` blocks, so the launch path reads one
        # attribute; the first call on a thread gives the thread its own stream.
        try:
            return thread_streams.current
        except AttributeError:
            thread_streams.own = thread_streams.current = cls.new()
            return thread_streams.current

    def __repr__(self) -> str:
        return f"StreamId({int(self)})"

    __str__ = __repr__


def stream_id_or_none(value, where: str):
    """``value`` if it is a ``StreamId`` or ``None``; else ``StreamIdError`` naming ``where``.

    Checked on the issuing thread: the server looks stream ids up in dicts, where an unhashable
    one (``[1]``) would raise on the device thread and break the device, and a plain int could
    silently share a stream with the thread whose own stream has that number."""
    if value is not None and not isinstance(value, StreamId):
        raise StreamIdError(f"{where} takes a StreamId (cube.StreamId.new()) or None, got "
                            f"{type(value).__name__} {value!r}")
    return value


class stream:
    """``with cube.stream(stream_id=None) as sid:`` makes ``sid`` this thread's current stream."""

    def __init__(self, stream_id: StreamId | None = None):
        stream_id_or_none(stream_id, "cube.stream()")
        self.stream_id = stream_id if stream_id is not None else StreamId.new()

    def __enter__(self) -> StreamId:
        stack = getattr(thread_streams, "stack", None)
        if stack is None:
            stack = thread_streams.stack = []
            if not hasattr(thread_streams, "own"):
                thread_streams.own = StreamId.new()
        stack.append(self.stream_id)
        thread_streams.current = self.stream_id
        return self.stream_id

    def __exit__(self, *exc):
        thread_streams.stack.pop()
        thread_streams.current = thread_streams.stack[-1] if thread_streams.stack else thread_streams.own
        return False
