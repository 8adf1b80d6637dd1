"""Thunks (``backends/cuda/driver/thunks.py``): slots lent to zero-argument compiled calls, and given back.

No GPU is needed: the calls' entry points are Numba ``cfunc``s that note what they were called
with (a launch: its arguments, into the buffer its ``kernelParams`` points to; a stream pair: the
handles, into the buffer its "event" points to), so each test compares what the C side saw with
the words the thunk was made over.
"""

from __future__ import annotations

import gc
import threading

import numpy as np
from numba import cfunc, types

from numba_cube.backends.cuda.driver import call_ir, thunks

_U32, _U64, _OUT = types.uint32, types.uint64, types.CPointer(types.uint64)


@cfunc(types.int32(_U64, _U32, _U32, _U32, _U32, _U32, _U32, _U32, _U64, _OUT, _U64))
def _note_launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
    params[0], params[1], params[2], params[3] = f, gx, bx, stream
    params[4] += 1
    return gz           # the result the test asks for, passed as gridZ


@cfunc(types.int32(_OUT, _U64))
def _note_record(event, stream):
    event[0] = stream
    return 0


@cfunc(types.int32(_U64, _OUT, _U32))
def _note_wait(stream, event, flags):
    event[1] = stream
    return 3           # a failed wait: it comes back shifted (call_ir.WAIT_SHIFT)


def _launch(seen, function, result=0):
    """A launch thunk whose call notes ``function`` and returns ``result``."""
    words = (_note_launch.address, function, 7, 1, result, 32, 1, 1, 0, 2**40 + function,
             seen.ctypes.data, 0)
    (call,) = thunks.make("launch", words)
    return call


def _address(thunk) -> int:
    import ctypes

    return ctypes.addressof(thunk.words)


def test_a_launch_thunk_calls_its_entry_point_with_its_words():
    """The thunk calls word 0 with the block's other words at their widths, every call, and
    returns the entry point's result; its ``words`` are the slot it reads."""
    seen = np.zeros(5, np.uint64)
    call = _launch(seen, 2**41 + 9, result=17)
    assert isinstance(call, thunks.Thunk)
    for k in range(3):
        assert call() == 17
        np.testing.assert_array_equal(seen, [2**41 + 9, 7, 32, 2**40 + 2**41 + 9, k + 1])
    assert list(call.words)[1] == 2**41 + 9


def test_live_thunks_never_share_a_slot_across_batches():
    """More live thunks than one batch has slots: each keeps its own slot (its own words), so each
    call still passes the function it was made for."""
    n = 3 * thunks.SLOTS + 1
    seen = [np.zeros(5, np.uint64) for _ in range(n)]
    calls = [_launch(seen[i], 1000 + i) for i in range(n)]
    assert len({_address(c) for c in calls}) == n
    for i in reversed(range(n)):
        assert calls[i]() == 0
    assert [int(s[0]) for s in seen] == [1000 + i for i in range(n)]


def test_a_collected_thunks_slot_is_lent_again():
    """A thunk's slot goes back to its kind's free list when the thunk is collected: the next
    thunk of that kind gets it (written with its own words), and calls only its own function."""
    seen = np.zeros(5, np.uint64)
    first = _launch(seen, 11)
    address = _address(first)
    del first
    gc.collect()
    second = _launch(seen, 12)
    assert _address(second) == address
    assert second() == 0 and seen[0] == 12


def test_a_waiter_slot_lives_while_either_of_its_calls_does():
    """A stream pair's two calls share one slot: dropping the record-and-wait keeps the slot
    while the wait is held (another pair gets another slot), and the wait still waits on its own
    consumer; once both are gone the slot is lent again."""
    seen = np.zeros(2, np.uint64)
    record_and_wait, wait = thunks.make(
        "waiter", (_note_record.address, _note_wait.address, seen.ctypes.data, 2**45 + 1, 2**46 + 2))
    assert record_and_wait() == 3 << call_ir.WAIT_SHIFT and list(seen) == [2**45 + 1, 2**46 + 2]
    address = _address(wait)
    del record_and_wait
    gc.collect()
    other = thunks.make("waiter", (_note_record.address, _note_wait.address, seen.ctypes.data, 5, 6))
    assert _address(other[0]) != address
    seen[:] = 0
    assert wait() == 3 << call_ir.WAIT_SHIFT and list(seen) == [0, 2**46 + 2]
    del wait
    gc.collect()
    again = thunks.make("waiter", (_note_record.address, _note_wait.address, seen.ctypes.data, 8, 9))
    assert _address(again[0]) == address


def test_threads_making_and_dropping_thunks_each_call_their_own():
    """Threads making, calling and dropping thunks at once (slots lent and given back while a
    batch may be compiling): every call passes the function its own thunk was made for."""
    errors = []

    def work(t):
        seen = np.zeros(5, np.uint64)
        for i in range(200):
            function = t * 10_000 + i
            call = _launch(seen, function)
            call()
            if seen[0] != function:
                errors.append((t, i, int(seen[0])))
            del call

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []


def test_no_engine_means_no_thunk():
    """Where LLVM cannot make an engine (here its construction fails), ``make`` returns None,
    and keeps returning it without trying again: the caller keeps its trampolines."""
    pool = thunks._Pool()
    tries = []

    def refuse():
        tries.append(1)
        raise RuntimeError("no executable memory")
    pool._new_engine = refuse
    assert pool.make("launch", (0,) * 12) is None
    assert pool.make("waiter", (0,) * 5) is None
    assert tries == [1]
