"""The CUDA executor's tasks (``backends/cuda/streams/tasks.py``): what a ``StreamMark`` may claim.

A stream's mark is one event recorded again, under the device lock, whenever a newer position of
the stream must be waited for, while other threads may be asking it about an older record without
the lock. These tests stand in for the driver with a stub whose query or synchronize records the
mark again *during* the call (the interleaving a second thread produces, which cannot be produced
on purpose otherwise), and check that the stream's completion mark never moves past what the
answered record covered.
"""

from __future__ import annotations

from numba_cube.backends.cuda.streams.tasks import StreamMark


class _Stream:
    done_seq = 0


class _RecordingMeanwhile:
    """Executor stub: the driver call answers 'complete' for the record current when it was
    called, and meanwhile another thread records the mark again at a later position."""

    def __init__(self):
        self.mark = None
        self.events = self
        self.returned = []

    def _record_again(self):
        self.mark.seq += 5

    def query(self, event) -> bool:
        self._record_again()
        return True

    def synchronize(self, event) -> None:
        self._record_again()

    def put(self, event) -> None:
        self.returned.append(event)


def _mark_at(seq: int):
    streams = _RecordingMeanwhile()
    cs = _Stream()
    mark = streams.mark = StreamMark(cs, "event", streams)
    mark.seq = seq
    return mark, cs, streams


def test_done_claims_only_the_record_it_asked_about():
    """``done`` after a query that completed the record at position 3 moves the stream's
    completion mark to 3, not to the position of a record made during the query."""
    mark, cs, _ = _mark_at(3)
    assert mark.done
    assert cs.done_seq == 3


def test_wait_claims_only_the_record_it_waited_for():
    """``wait`` likewise moves the completion mark to the position current when it began."""
    mark, cs, _ = _mark_at(4)
    assert mark.wait()
    assert cs.done_seq == 4


def test_done_answers_from_the_completion_mark_without_the_driver():
    """A mark at or before the stream's completion mark is done without a driver call, and a
    mark dropped gives its event back to the pool."""
    mark, cs, streams = _mark_at(2)
    cs.done_seq = 2
    assert mark.done
    assert mark.seq == 2              # no query was made (it would have recorded again)
    streams.mark = None
    del mark
    assert streams.returned == ["event"]


# -- WarmTask.renew --------------------------------------------------------------------------------
from numba_cube.backends.cuda.streams.stream_state import CuStream  # noqa: E402
from numba_cube.backends.cuda.streams.tasks import WarmTask  # noqa: E402


def _renewable_task():
    cs = CuStream("sid", 7)
    cs.seq = 1
    task = WarmTask("sid", cs, None, 1, 1)
    cs.tail = cs.renewable = task
    return task, cs


def test_a_task_nobody_was_handed_stands_for_the_next_position():
    """``renew`` moves an unseen tail task (its stream's ``renewable``) to the next position,
    after which it is not done until that position is."""
    task, cs = _renewable_task()
    cs.done_seq = 1                   # the first position completed
    assert task.renew(2)
    assert task.seq == 2 and not task.done


def test_a_task_handed_out_known_done_or_evented_is_never_renewed():
    """Once anybody may hold the task (the stream's ``renewable`` is cleared), or something was
    learnt about it (done, an event covers it), ``renew`` refuses and leaves its position: a
    thread asking about the older position must not get an answer about a later one."""
    task, cs = _renewable_task()
    cs.renewable = None
    assert not task.renew(2) and task.seq == 1
    task, cs = _renewable_task()
    cs.done_seq = 1
    assert task.done                  # learnt (and kept) that position 1 is done
    assert not task.renew(2) and task.seq == 1
    task, cs = _renewable_task()
    task.mark = StreamMark(cs, "event", _RecordingMeanwhile())
    assert not task.renew(2) and task.seq == 1
