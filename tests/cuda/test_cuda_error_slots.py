"""The error words of GPU launches (``backends/cuda/launch/error_slots.py``), over stand-ins.

Each launch of a kernel that can raise gets its own word in a ring of pinned host memory; the
kernel stores its exception id there (here the test stores it, as the kernel would). The ring is
reused half by half, once the launches that used a half are known complete (an event per stream
recorded when the ring left the half). Nothing here needs a device: the driver and the executor
are stubs that count what they are asked.
"""

from __future__ import annotations

import ctypes

from numba_cube.backends.cuda.launch.error_slots import ErrorSlots, SlotRun
from numba_cube.runtime.ledger.pending import UNRESOLVED


class _Api:
    def __init__(self, log):
        self.log = log

    def cuEventRecord(self, event, handle):
        self.log.append(("record", event, handle))
        return (0,)


class _Driver:
    SUCCESS = 0

    def __init__(self):
        self.log = []
        self.api = _Api(self.log)
        self._keep = []

    def mem_alloc_host(self, nbytes):
        buf = (ctypes.c_char * nbytes)()
        self._keep.append(buf)
        self.log.append(("alloc", nbytes))
        return ctypes.addressof(buf)

    def host_device_pointer(self, ptr):
        return ptr


class _Events:
    def __init__(self):
        self.made = 0

    def get(self):
        self.made += 1
        return f"ev{self.made}"

    def put(self, event):
        pass


class _Streams:
    """The executor's event calls: ``query`` answers from ``done``; ``synchronize`` completes."""

    def __init__(self):
        self.events = _Events()
        self.done = set()
        self.synced = []
        self.streams = []

    def live(self):
        return self.streams

    def query(self, event):
        return event in self.done

    def synchronize(self, event):
        self.synced.append(event)
        self.done.add(event)


class _Stream:
    def __init__(self, handle=1):
        self.handle = handle
        self.seq = 0
        self.done_seq = 0
        self.retired = False


class _Errors:
    def exception(self, code):
        return ValueError(f"code {code}")


def _ring(size=8):
    driver, streams = _Driver(), _Streams()
    return ErrorSlots(driver, streams, None, lambda: None, size), driver, streams


def _launch(ring, run, cs):
    """One launch on ``cs``: its word's address (what the kernel gets)."""
    if cs not in ring._streams.streams:
        ring._streams.streams.append(cs)
    cs.seq += 1
    return ring.take(run, cs, cs.seq)


def _renew(ring, run, cs):
    """One more launch of a run that goes on, as the warm path makes it: the next word of the
    run's chunk (``SlotRun.step``), or a word the ring hands out when the chunk is used up."""
    if cs not in ring._streams.streams:
        ring._streams.streams.append(cs)
    cs.seq += 1
    if run.last + 1 != run.chunk_end:
        return run.step()
    return ring.take(run, cs, cs.seq)


def _raise(address, code):
    ctypes.c_int32.from_address(address).value = code


def test_nothing_is_allocated_or_called_before_a_launch_needs_a_word():
    """A device whose kernels cannot raise never pays for the ring."""
    _, driver, _ = _ring()
    assert driver.log == []


def test_two_launches_in_flight_are_told_apart():
    """Two launches of one kernel (two runs, two streams) get two words: only the one that
    raised reports, each once its launch is complete."""
    ring, _, _ = _ring()
    a, b = _Stream(1), _Stream(2)
    ra, rb = SlotRun(ring, _Errors(), False), SlotRun(ring, _Errors(), False)
    wa, wb = _launch(ring, ra, a), _launch(ring, rb, b)
    assert wa != wb
    _raise(wb, 7)
    assert ra.outcome(False) is UNRESOLVED
    assert ra.outcome(True) is None
    exc, after = rb.outcome(True)
    assert str(exc) == "code 7" and after == 0


def test_a_pure_run_counts_its_last_launch_a_self_reading_one_its_first_raise():
    """Repeats into buffers the kernel only writes: an earlier raise is rewritten by the next
    launch. Repeats of a kernel that reads what it writes: the first raise is the root and the
    launches after it inherited it."""
    ring, _, _ = _ring(16)
    cs = _Stream()
    pure, reading = SlotRun(ring, _Errors(), False), SlotRun(ring, _Errors(), True)
    _raise(_launch(ring, pure, cs), 3)
    _launch(ring, pure, cs)
    assert pure.outcome(True) is None
    words = [_launch(ring, reading, cs) for _ in range(5)]
    _raise(words[1], 4)
    _raise(words[3], 5)
    exc, after = reading.outcome(True)
    assert str(exc) == "code 4" and after == 3 and reading.inheriting() == 5


def test_words_are_reused_once_their_launches_are_known_complete():
    """Past a half of the ring, leaving it records an event on each stream with work not known
    complete; coming back to it asks that event (done: no wait), hands the raised words to
    their runs and clears them, so each launch starts from zero and a run still answers after
    its word was reused."""
    ring, driver, streams = _ring(8)
    cs = _Stream()
    first = SlotRun(ring, _Errors(), False)
    _raise(_launch(ring, first, cs), 9)
    others = [SlotRun(ring, _Errors(), False) for _ in range(7)]
    for run in others[:3]:
        _launch(ring, run, cs)
    assert [entry[0] for entry in driver.log] == ["alloc"]
    _launch(ring, others[3], cs)                       # the first word of the second half
    assert [entry[0] for entry in driver.log] == ["alloc", "record"]   # left the first half
    fence = driver.log[-1][1]
    streams.done.add(fence)
    for run in others[4:]:
        _launch(ring, run, cs)
    again = SlotRun(ring, _Errors(), False)
    address = _launch(ring, again, cs)                 # back at word 0: the half is reused
    assert ctypes.c_int32.from_address(address).value == 0
    assert ring.waits == 0 and streams.synced == []
    assert cs.done_seq == 4                            # what the event covered
    exc, _ = first.outcome(False)                      # consumed: known without a wait
    assert str(exc) == "code 9"
    assert again.outcome(False) is UNRESOLVED


def test_a_half_still_in_use_is_waited_for_and_counted():
    """A ring too small for the launches in flight waits for the oldest (``waits``)."""
    ring, _, streams = _ring(4)
    cs = _Stream()
    for _ in range(5):
        _launch(ring, SlotRun(ring, _Errors(), False), cs)
    assert ring.waits == 1 and len(streams.synced) == 1


def test_a_long_self_reading_run_stays_bounded():
    """A loop of one self-reading launch never read: the words the ring consumed clean are
    dropped from the run, which keeps about one ring of them."""
    ring, driver, streams = _ring(8)
    cs = _Stream()
    run = SlotRun(ring, _Errors(), True)
    for _ in range(200):
        _launch(ring, run, cs)
        streams.done.update(entry[1] for entry in driver.log if entry[0] == "record")
    assert len(run.seqs) <= 2 * ring.size and run.launches == 200
    assert run.outcome(True) is None


def test_a_run_that_goes_on_steps_through_a_chunk_of_its_own():
    """A renewed run's first launch takes one word, its second a chunk; the launches after
    step through the chunk (consecutive words, the ring not asked) and each is told apart."""
    ring, _, _ = _ring(64)                             # halves of 32 words, chunks of 8
    cs = _Stream()
    run = SlotRun(ring, _Errors(), False)
    first = _renew(ring, run, cs)
    second = _renew(ring, run, cs)
    assert ring.next == 16 and (second - ring.base) // 4 == 8   # aligned on a chunk
    stepped = [_renew(ring, run, cs) for _ in range(7)]
    assert stepped == [second + 4 * k for k in range(1, 8)] and ring.next == 16
    assert first != second
    _raise(stepped[-1], 6)
    exc, _ = run.outcome(True)
    assert str(exc) == "code 6"
    _renew(ring, run, cs)                              # the chunk is used up: a new one
    assert ring.next == 24 and run.outcome(True) is None


def test_leaving_a_half_ends_its_chunks_and_their_raises_are_kept():
    """A chunk never outlives its half: when the ring leaves it, the run holding the chunk
    takes its next word in the new half, after the events that cover every launch so far. A
    raise stored in a stepped word is handed to its run when the half is reused, and a frozen
    copy of that launch still answers."""
    ring, driver, streams = _ring(16)                  # halves of 8 words, chunks of 2
    cs = _Stream()
    run = SlotRun(ring, _Errors(), False)
    _renew(ring, run, cs)
    _renew(ring, run, cs)                              # a chunk: words 2 and 3
    _raise(_renew(ring, run, cs), 5)                   # word 3
    frozen = run.frozen()
    for _ in range(5):                                 # other launches fill the half
        _launch(ring, SlotRun(ring, _Errors(), False), cs)
    _launch(ring, SlotRun(ring, _Errors(), False), cs)  # word 8: the ring leaves half 0
    assert run.chunk_end == run.last + 1
    address = _renew(ring, run, cs)
    assert (address - ring.base) // 4 >= 8             # its next word is in the new half
    streams.done.update(entry[1] for entry in driver.log if entry[0] == "record")
    while ring.next < 16:
        _launch(ring, SlotRun(ring, _Errors(), False), cs)
    _launch(ring, SlotRun(ring, _Errors(), False), cs)  # word 16: half 0 is reused
    assert ring.consumed(3) and ring.waits == 0
    exc, _ = frozen.outcome(False)
    assert str(exc) == "code 5"
    assert run.outcome(True) is None                   # its last launch did not raise
