"""Profiling and launch observers (CONTRACT.md 1.1 gates 5 and 6)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube


@cube.kernel
def inc(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1.0


@pytest.fixture(scope="module")
def client():
    return cube.client("cpu")


def test_profile_returns_result_and_one_duration_per_launch(client):
    """client.profile(fn) returns fn's result and a duration for each launch it issued; the
    launches were submitted blocking, so their effects are visible when profile returns."""
    x = client.create(np.zeros(32))

    def work():
        for _ in range(3):
            client.launch(inc, 1, 32, x)
        return "done"

    result, durations = client.profile(work)
    assert result == "done"
    assert [d.kernel_id for d in durations] == [inc.id] * 3
    assert all(d.seconds > 0 for d in durations)
    np.testing.assert_array_equal(client.server.host_array(x.binding()), np.full(32, 3.0))


def test_profile_counts_only_this_threads_stream(client):
    """A profile is per issuing thread and stream: another thread's launches are not in it."""
    x = client.create(np.zeros(32))
    y = client.create(np.zeros(32))
    started = threading.Event()

    def other():
        started.wait()
        for _ in range(5):
            client.launch(inc, 1, 32, y)

    th = threading.Thread(target=other)
    th.start()

    def work():
        started.set()
        client.launch(inc, 1, 32, x)

    _, durations = client.profile(work)
    th.join()
    assert len(durations) == 1
    np.testing.assert_array_equal(client.read(y), np.full(32, 5.0))


def test_profile_log_variable(client, monkeypatch, caplog):
    """NUMBA_CUBE_PROFILE_LOG=1 logs every dispatch's duration to the numba_cube.profile logger."""
    monkeypatch.setenv("NUMBA_CUBE_PROFILE_LOG", "1")
    x = client.create(np.zeros(32))
    with caplog.at_level(logging.INFO, logger="numba_cube.profile"):
        client.launch(inc, 1, 32, x)
        client.sync()
    assert any(inc.id in r.getMessage() and "ms" in r.getMessage() for r in caplog.records)


def test_observers_notified_on_issuing_thread_before_handoff(client):
    """Launch observers run on the issuing thread, before the hand-off, with the launch's stream
    and mode; an observer that raises does not stop the launch."""
    seen = []

    def observer(event):
        seen.append((event.kernel_id, event.stream, event.mode, threading.current_thread().name))

    def broken(event):
        raise RuntimeError("observer bug")

    cube.add_observer(observer)
    cube.add_observer(broken)
    try:
        x = client.create(np.zeros(32))
        with cube.dry_run():
            client.launch(inc, 1, 32, x)
        client.launch(inc, 1, 32, x)
    finally:
        cube.remove_observer(observer)
        cube.remove_observer(broken)
    assert [s[2] for s in seen] == [cube.LaunchMode.SKIP, cube.LaunchMode.EXECUTE]
    assert all(s[0] == inc.id and s[1] == client.stream_id for s in seen)
    assert seen[0][3] == threading.current_thread().name
    np.testing.assert_array_equal(client.read(x), np.ones(32))


_PROFILE_LOG_SCRIPT = """
import logging, sys
import numpy as np
from numba import cuda
import numba_cube as cube
if sys.argv[1] == "configured":
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="APP %(name)s %(message)s")

@cube.kernel
def inc(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1.0

client = cube.client("cpu")
x = client.create(np.zeros(32))
client.launch(inc, 1, 32, x)
client.sync()
print("KERNEL", inc.id)
"""


@pytest.mark.parametrize("setup", ["unconfigured", "configured"])
def test_profile_log_shows_without_logging_configuration(setup, tmp_path):
    """NUMBA_CUBE_PROFILE_LOG=1 shows its lines in a process that configured no logging (on
    stderr, as logging.lastResort would), and in one that configured logging at WARNING exactly
    once, through the application's handler (the variable asked for them)."""
    script = tmp_path / "profile_log.py"
    script.write_text(_PROFILE_LOG_SCRIPT)
    repo = str(Path(__file__).resolve().parents[3])
    env = dict(os.environ, NUMBA_CUBE_PROFILE_LOG="1", NUMBA_CUBE_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(script), setup], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    kernel_id = proc.stdout.split("KERNEL ")[1].strip()
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if kernel_id in line and " ms" in line]
    assert len(lines) == 1, proc.stdout + proc.stderr
    if setup == "configured":
        assert lines[0].startswith("APP numba_cube.profile")
    else:
        assert lines[0] in proc.stderr.splitlines() and lines[0].startswith("numba_cube.profile:")


@cube.kernel
def inc_twice(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 2.0


def test_profile_summary_table(client):
    """client.profile's result still unpacks as (result, timings), and summarizes them per kernel
    (calls, mean, std, min, median: the NumPy statistics of that kernel's durations, in the order
    kernels were first launched); printed, it is a table with one row per kernel."""
    x = client.create(np.zeros(32))

    def work():
        for _ in range(4):
            client.launch(inc, 1, 32, x)
        client.launch(inc_twice, 1, 32, x)
        return 7

    profile = client.profile(work)
    result, timings = profile
    assert result == 7 and len(timings) == 5
    stats = profile.stats()
    assert list(stats) == [inc.id, inc_twice.id]
    mine = [t.seconds for t in timings if t.kernel_id == inc.id]
    assert stats[inc.id] == (4, np.mean(mine), np.std(mine), np.min(mine), np.median(mine))
    assert stats[inc_twice.id].calls == 1 and stats[inc_twice.id].std == 0.0
    lines = str(profile).splitlines()
    assert lines[0].split() == ["kernel", "calls", "mean", "(us)", "std", "(us)", "min", "(us)",
                                "median", "(us)"]
    row = lines[1].split()
    assert row[0] == inc.id and row[1] == "4"
    assert float(row[2]) == pytest.approx(np.mean(mine) * 1e6, abs=1e-3)
    assert lines[2].split()[:2] == [inc_twice.id, "1"]
    np.testing.assert_array_equal(client.read(x), np.full(32, 6.0))


def test_profile_summary_without_launches(client):
    """A profile of work that launched nothing has no stats and says so when printed."""
    profile = client.profile(lambda: None)
    assert profile == (None, []) and profile.stats() == {}
    assert "(no launches)" in str(profile)
