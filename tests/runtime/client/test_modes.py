"""Launch modes: dry runs and real runs (CONTRACT.md section 2), as units with real threads."""

from __future__ import annotations

import threading

import pytest

import numba_cube as cube
from numba_cube import LaunchMode, dry_run, launch_mode, real_run

from .._util import run_in_thread

TIMEOUT = 10.0


@pytest.fixture(autouse=True)
def _no_dry_run_leaks():
    assert launch_mode() is LaunchMode.EXECUTE
    yield
    assert launch_mode() is LaunchMode.EXECUTE


def test_two_values_and_default():
    """2: LaunchMode has EXECUTE and SKIP; with no dry run open a launch executes."""
    assert {m.name for m in LaunchMode} == {"EXECUTE", "SKIP"}
    assert launch_mode() is LaunchMode.EXECUTE


def test_dry_run_skips_and_nests_as_a_depth():
    """2: dry_run() is a depth: nested blocks keep skipping until the outermost one exits."""
    with dry_run():
        assert launch_mode() is LaunchMode.SKIP
        with dry_run():
            assert launch_mode() is LaunchMode.SKIP
        assert launch_mode() is LaunchMode.SKIP
    assert launch_mode() is LaunchMode.EXECUTE


def test_dry_run_is_process_wide():
    """2: the dry-run depth is process-wide: another thread's launches skip too."""
    with dry_run():
        assert run_in_thread(launch_mode) is LaunchMode.SKIP
    assert run_in_thread(launch_mode) is LaunchMode.EXECUTE


def test_exits_after_an_exception_restore_the_depth():
    """2: leaving a dry run or real run by an exception restores the depth."""
    with pytest.raises(KeyError):
        with dry_run():
            raise KeyError
    assert launch_mode() is LaunchMode.EXECUTE
    with dry_run():
        with pytest.raises(KeyError):
            with real_run():
                raise KeyError
        assert launch_mode() is LaunchMode.SKIP


def test_interleaved_enters_and_exits_from_two_threads():
    """2: with a save-and-restore flag one thread's guard ending would end another's dry run; with
    a depth, A enters, B enters, A exits -> still a dry run; B exits -> over."""
    a_entered, b_entered, a_exited, b_may_exit = (threading.Event() for _ in range(4))
    seen = {}

    def thread_a():
        with dry_run():
            a_entered.set()
            assert b_entered.wait(TIMEOUT)
        a_exited.set()
        seen["a_after_exit"] = launch_mode()
        b_may_exit.set()

    def thread_b():
        assert a_entered.wait(TIMEOUT)
        with dry_run():
            b_entered.set()
            assert a_exited.wait(TIMEOUT)
            seen["b_after_a_exit"] = launch_mode()
            assert b_may_exit.wait(TIMEOUT)
        seen["b_after_exit"] = launch_mode()

    ts = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(TIMEOUT)
    assert seen == {"a_after_exit": LaunchMode.SKIP,       # B's dry run is still open
                    "b_after_a_exit": LaunchMode.SKIP,
                    "b_after_exit": LaunchMode.EXECUTE}


def test_exit_order_crossing_threads_ends_where_it_started():
    """2: counters commute: overlapping (not nested) dry runs of several threads, closed in
    whatever order the threads reach their exits, skip while open and end at depth 0."""
    n = 8
    barrier = threading.Barrier(n)
    inside = []

    def worker():
        with dry_run():
            barrier.wait(TIMEOUT)
            inside.append(launch_mode())
            barrier.wait(TIMEOUT)

    ts = [threading.Thread(target=worker) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(TIMEOUT)
    assert inside == [LaunchMode.SKIP] * n
    assert launch_mode() is LaunchMode.EXECUTE


def test_many_threads_hammering_enter_exit_leave_depth_zero():
    """2: concurrent enters and exits from many threads (the depth update is atomic) end at 0."""
    def worker():
        for _ in range(2000):
            with dry_run():
                pass

    ts = [threading.Thread(target=worker) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(TIMEOUT * 3)
    assert launch_mode() is LaunchMode.EXECUTE


def test_real_run_executes_inside_a_dry_run():
    """2: launch_mode() is EXECUTE when this thread is inside a real run, even in a dry run."""
    with dry_run():
        with real_run():
            assert launch_mode() is LaunchMode.EXECUTE
            with dry_run():                    # a nested dry run does not undo the real run
                assert launch_mode() is LaunchMode.EXECUTE
        assert launch_mode() is LaunchMode.SKIP


def test_real_run_is_thread_local():
    """2: a real run counts only for the thread that holds it: another thread inside the same
    dry run still skips."""
    holding = threading.Event()
    done = threading.Event()
    seen = {}

    def holder():
        with real_run():
            seen["holder"] = launch_mode()
            holding.set()
            assert done.wait(TIMEOUT)

    with dry_run():
        t = threading.Thread(target=holder)
        t.start()
        try:
            assert holding.wait(TIMEOUT)
            seen["other"] = run_in_thread(launch_mode)
            seen["main"] = launch_mode()
        finally:
            done.set()
            t.join(TIMEOUT)
    assert seen == {"holder": LaunchMode.EXECUTE, "other": LaunchMode.SKIP,
                    "main": LaunchMode.SKIP}


def test_real_run_nests_as_a_thread_local_depth():
    """2: the real-run depth nests: the inner exit keeps the outer real run."""
    with dry_run():
        with real_run():
            with real_run():
                pass
            assert launch_mode() is LaunchMode.EXECUTE
        assert launch_mode() is LaunchMode.SKIP


def test_decorator_forms():
    """API.md: dry_run() and real_run() are also usable as decorators, re-entered per call."""
    @dry_run()
    def dry():
        return launch_mode()

    @real_run()
    def real():
        return launch_mode()

    assert dry() is LaunchMode.SKIP
    assert dry() is LaunchMode.SKIP
    assert launch_mode() is LaunchMode.EXECUTE

    @dry_run()
    def dry_then_real():
        return launch_mode(), real()

    assert dry_then_real() == (LaunchMode.SKIP, LaunchMode.EXECUTE)
    assert launch_mode() is LaunchMode.EXECUTE


def test_top_level_names():
    """API.md: the modes are importable from the top-level package."""
    assert cube.dry_run is dry_run and cube.real_run is real_run
    assert cube.launch_mode is launch_mode and cube.LaunchMode is LaunchMode


def test_unbalanced_exits_raise_and_leave_the_depths():
    """2: an exit without its enter, or a second exit, raises LaunchModeError (a RuntimeError)
    and leaves the depths as they were: a later launch is not skipped."""
    for mode in (dry_run, real_run):
        with pytest.raises(cube.LaunchModeError):
            mode().__exit__(None, None, None)
        guard = mode()
        with guard:
            pass
        with pytest.raises(RuntimeError):
            guard.__exit__(None, None, None)
    assert launch_mode() is LaunchMode.EXECUTE
    with dry_run():
        assert launch_mode() is LaunchMode.SKIP


def test_real_run_exit_on_another_thread_is_refused():
    """2: a real run is entered and exited by one thread; another thread's exit of it raises and
    changes neither thread's depth."""
    guard = real_run()
    with dry_run():
        guard.__enter__()
        with pytest.raises(cube.LaunchModeError):
            run_in_thread(guard.__exit__, None, None, None)
        assert launch_mode() is LaunchMode.EXECUTE
        assert run_in_thread(launch_mode) is LaunchMode.SKIP
        guard.__exit__(None, None, None)
        assert launch_mode() is LaunchMode.SKIP


def test_one_guard_may_be_entered_again_and_nested():
    """2: the same dry_run object nests and can be entered again after it exited; each opening
    starts a new list of failures."""
    guard = dry_run()
    with guard:
        with guard:
            assert launch_mode() is LaunchMode.SKIP
        assert launch_mode() is LaunchMode.SKIP
    assert launch_mode() is LaunchMode.EXECUTE
    guard.failures.append("stale")
    with guard as again:
        assert again is guard and guard.failures == []
