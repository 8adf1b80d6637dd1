"""A dry run of one thread (``modes.thread_dry_run``, CONTRACT.md section 2): it skips only the
launches of the thread that opened it, while it is that thread's innermost scope; autotune
compiles its candidates under one (section 7), so tuning never skips another thread's work."""

from __future__ import annotations

import threading
import time
import uuid

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube import LaunchMode, dry_run, launch_mode, real_run
from numba_cube.runtime.client.modes import thread_dry_run

from .._util import run_in_thread

N = 256


@cube.kernel
def increment(acc):
    i = cuda.grid(1)
    if i < acc.size:
        acc[i] += 1.0


@cube.kernel
def does_not_compile(acc):
    i = cuda.grid(1)
    if i < acc.size:
        acc[i] = acc.no_such_attribute


def test_only_the_opening_thread_skips_and_its_innermost_scope_decides():
    """Inside ``thread_dry_run`` this thread's launches are SKIP, another thread's EXECUTE; a
    ``real_run`` inside it executes, a ``thread_dry_run`` inside a real run skips; a bad exit
    raises ``LaunchModeError`` and changes nothing."""
    with thread_dry_run():
        assert launch_mode() is LaunchMode.SKIP
        assert run_in_thread(launch_mode) is LaunchMode.EXECUTE
        with real_run():
            assert launch_mode() is LaunchMode.EXECUTE
            with thread_dry_run():
                assert launch_mode() is LaunchMode.SKIP
            assert launch_mode() is LaunchMode.EXECUTE
        assert launch_mode() is LaunchMode.SKIP
    assert launch_mode() is LaunchMode.EXECUTE
    guard = thread_dry_run()
    guard.__enter__()
    with pytest.raises(cube.LaunchModeError):
        run_in_thread(guard.__exit__, None, None, None)
    assert launch_mode() is LaunchMode.SKIP
    guard.__exit__(None, None, None)
    with pytest.raises(cube.LaunchModeError):
        guard.__exit__(None, None, None)
    assert launch_mode() is LaunchMode.EXECUTE


def test_skipped_launches_compile_never_run_and_stay_out_of_a_process_dry_run():
    """A launch skipped by this thread's dry run runs nothing, even once the kernel is warm (the
    warm path must not take it), and is not listed by a process-wide dry run open meanwhile (it
    was the thread's own, not that dry run's)."""
    client = cube.client("cpu")
    acc = client.create(np.zeros(N))
    for _ in range(3):                      # warm: later launches may take the warm path
        client.launch(increment, 2, 128, acc)
    client.sync()
    with thread_dry_run():
        for _ in range(5):
            client.launch(increment, 2, 128, acc)
    with dry_run() as run:
        with thread_dry_run():
            client.launch(does_not_compile, 2, 128, acc)
    np.testing.assert_array_equal(client.read(acc), np.full(N, 3.0))
    assert run.failures == []


def test_a_tuner_compiling_never_skips_another_threads_launches():
    """One thread launches ``increment`` continuously while another thread's tuner tunes a new
    key (its compile step, under ``thread_dry_run``, waits until the launching thread has issued
    50 more launches, so the window is never empty). Every launch of the launching thread runs:
    the buffer holds exactly as many increments as it issued launches (NumPy's ``full``)."""
    client = cube.client("cpu")
    acc = client.create(np.zeros(N))
    client.launch(increment, 2, 128, acc)
    client.read(acc)                         # compiled before the race
    issued, stop = [1], threading.Event()
    in_window = []

    def launch_continuously():
        while not stop.is_set():
            client.launch(increment, 2, 128, acc)
            issued[0] += 1

    def candidate(client, x, out):
        if launch_mode() is LaunchMode.SKIP:             # the compile step
            target, deadline = issued[0] + 50, time.monotonic() + 120
            while issued[0] < target and time.monotonic() < deadline:
                time.sleep(0.001)
            in_window.append(issued[0] >= target)
        client.launch(increment, 2, 128, out)

    tuner = cube.Tuner(f"window-{uuid.uuid4().hex[:8]}", {"a": candidate, "b": candidate},
                       key=lambda x, out: 0, samples=2)
    launcher = threading.Thread(target=launch_continuously)
    launcher.start()
    try:
        x, out = client.create(np.zeros(N)), client.create(np.zeros(N))
        tuner(client, x, out)
    finally:
        stop.set()
        launcher.join(60)
    assert in_window == [True, True]
    np.testing.assert_array_equal(client.read(acc), np.full(N, float(issued[0])))
    np.testing.assert_array_equal(client.read(out), np.ones(N))
