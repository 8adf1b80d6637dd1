"""The CUDA executor's per-stream state and event pool (``backends/cuda/streams/stream_state.py``)."""

from __future__ import annotations

from numba_cube.backends.cuda.streams.stream_state import CuStream, EventPool


class _Driver:
    """Makes numbered events: what ``EventPool`` asks a driver for."""

    def __init__(self):
        self.made = 0

    def event_create(self, timing: bool = False):
        self.made += 1
        return f"event{self.made}"


def test_event_pool_reuses_events_given_back():
    """An event given back is handed out again before a new one is created; ``created`` counts
    only the driver's creations."""
    driver = _Driver()
    pool = EventPool(driver)
    first = pool.get()
    pool.put(first)
    assert pool.get() == first
    assert pool.get() == "event2"
    assert (pool.created, driver.made) == (2, 2)


def test_a_new_stream_has_done_nothing_and_waited_for_nothing():
    """A fresh CuStream is at position 0, complete up to 0, serving its stream id, with no event,
    no own mark and no waits on other streams."""
    cs = CuStream("sid", 77)
    assert (cs.seq, cs.done_seq, cs.ptr, cs.retired) == (0, 0, 77, False)
    assert (cs.tail, cs.evented, cs.own_mark, cs.waited, cs.waiters) == (None, None, None, {}, {})
