"""Ctrl-C during a compile is taken when it ends (``runtime/client/interrupts.py``), with real signals
sent to this process (``os.kill(os.getpid(), SIGINT)``: the handler runs on the main thread at
its next bytecode). Pinned: the block runs to its end and ``KeyboardInterrupt`` is raised after
it; a second Ctrl-C inside the block is raised at once; the default handler is back afterwards;
another thread's block, or a program's own SIGINT handler, is left as it is."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from numba_cube.runtime.client.interrupts import deferred_interrupt

pytestmark = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread()
    or signal.getsignal(signal.SIGINT) is not signal.default_int_handler,
    reason="needs the main thread with Python's default SIGINT handler")


def _ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def test_a_ctrl_c_inside_is_raised_when_the_block_ends():
    """The block finishes what it does, then ``KeyboardInterrupt``; the default handler is
    installed again."""
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            _ctrl_c()
            steps.extend(range(1000))       # bytecodes after the signal: the handler has run
            steps.append("end")
    assert steps[-1] == "end"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_ctrl_c_is_raised_at_once():
    """Two Ctrl-C inside the block: the second one interrupts it where it is."""
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            _ctrl_c()
            steps.append("after the first")
            _ctrl_c()
            steps.extend(range(1000))
            steps.append("end")
    assert steps[0] == "after the first" and "end" not in steps
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_a_ctrl_c_nothing_is_raised_and_nothing_changed():
    with deferred_interrupt():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_programs_own_handler_and_other_threads_are_left_alone():
    """With a handler of the program's own, the block changes nothing (its handler sees the
    Ctrl-C at once); on another thread the block changes nothing either."""
    seen = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        with deferred_interrupt():
            _ctrl_c()
            for _ in range(1000):
                pass
            assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)
    handlers = []

    def in_thread():
        with deferred_interrupt():
            handlers.append(signal.getsignal(signal.SIGINT))

    worker = threading.Thread(target=in_thread)
    worker.start()
    worker.join()
    assert handlers == [signal.default_int_handler]
