"""The per-stream state of the CUDA executor (``streams/executor.py``) and its pool of events.

A ``CuStream`` is one CUDA stream serving one ``StreamId`` (until recycled) and what the executor
knows about its work: positions (``seq``, ``done_seq``), the last task, the newest event
recorded on it, what it already waited for on every other stream, and its own reusable event
(``tasks.StreamMark``) with the compiled waits on it (``Driver.stream_waiter``).
"""

from __future__ import annotations

__all__ = ["CuStream", "EventPool"]


class EventPool:
    """Reusable CUDA events (timing disabled: cheaper to record)."""

    def __init__(self, driver):
        self._driver = driver
        self._free: list = []
        self.created = 0

    def get(self):
        free = self._free
        if free:
            return free.pop()
        self.created += 1
        return self._driver.event_create(timing=False)

    def put(self, event) -> None:
        self._free.append(event)


class CuStream:
    """One CUDA stream serving one ``StreamId`` (until recycled)."""

    __slots__ = ("sid", "handle", "ptr", "seq", "done_seq", "tail", "waited", "evented", "own_mark",
                 "retired", "waiters", "renewable")

    def __init__(self, sid, handle):
        self.sid = sid
        self.handle = handle          # CUstream object (what the driver calls take)
        self.ptr = int(handle)        # its value (what __cuda_array_interface__ exports)
        self.seq = 0                  # tasks enqueued so far
        self.done_seq = 0             # every task with seq <= done_seq is known to be done
        self.tail = None              # the last task enqueued
        self.waited: dict = {}        # producer CuStream -> the highest position a wait of this stream on it covered
        self.evented = None           # the newest task (or own_mark) of this stream with an event
        self.own_mark = None          # the stream's reusable event for warm tasks (StreamMark)
        self.retired = False          # recycled: no longer serves ``sid`` (the warm path checks it)
        self.waiters: dict = {}       # producer CuStream -> its (record_and_wait, wait) for this one
        # The warm task at this stream's tail that nobody but the hazard tracker's states has
        # seen (``tasks.WarmTask.renew``); None as soon as anything hands the tail out.
        self.renewable = None
