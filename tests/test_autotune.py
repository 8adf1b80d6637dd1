"""Autotune (runtime.md section 7) on the CPU backend."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import uuid

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube


@cube.kernel
def scale(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2.0 * x[i]


@cube.kernel
def scale_slow(x, out):
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        for k in range(2000):
            acc += x[i] * 1e-9
        out[i] = 2.0 * x[i] + acc * 0.0


@cube.kernel
def broken(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i].no_such_attribute        # does not compile


RUN = uuid.uuid4().hex[:8]   # tuner names unique per run: results persist on disk across runs


def make_tuner(name="scale"):
    def fast(client, x, out):
        client.launch(scale, (out.size + 127) // 128, 128, x, out)

    def slow(client, x, out):
        client.launch(scale_slow, (out.size + 127) // 128, 128, x, out)

    def failing(client, x, out):
        client.launch(broken, (out.size + 127) // 128, 128, x, out)

    return cube.Tuner(f"{name}-{RUN}", {"fast": fast, "slow": slow, "failing": failing},
                      key=lambda x, out: cube.pow2_bucket(out.size), samples=3)


def test_tuner_keeps_fastest_and_disqualifies_failing():
    """First use of a key compiles every candidate, measures each, disqualifies the one that fails
    (not fatal), keeps the fastest, and runs it on the real arguments."""
    client = cube.client("cpu")
    tuner = make_tuner()
    x = client.create(np.arange(4096.0))
    out = client.create(np.zeros(4096))
    tuner(client, x, out)
    result = tuner.result(client, x, out)
    assert result.best == "fast"
    assert "failing" in result.disqualified and "compile" in result.disqualified["failing"].lower()
    assert set(result.timings) == {"fast", "slow"}
    np.testing.assert_array_equal(client.read(out), 2.0 * np.arange(4096.0))


def test_nearby_sizes_share_a_result_and_inputs_survive_measurement():
    """Keys round sizes up to powers of two; measurements run on copies, so an in-place candidate
    running many times does not change the caller's data."""
    client = cube.client("cpu")
    tuner = make_tuner("share")
    x = client.create(np.ones(3000))
    out = client.create(np.zeros(3000))
    tuner(client, x, out)
    first = tuner.result(client, x, out)
    x2 = client.create(np.ones(4000))
    assert tuner.result(client, x2, client.create(np.zeros(4000))) is first
    np.testing.assert_array_equal(client.read(x), np.ones(3000))


def test_tuning_inside_dry_run_measures_for_real_and_runs_nothing():
    """Tuning while a dry run is open (here, on another thread) still measures for real (inside
    real_run), while the winner's own launch on the caller's arguments follows the caller's mode."""
    client = cube.client("cpu")
    tuner = make_tuner("dry")
    x = client.create(np.ones(1024))
    out = client.create(np.zeros(1024))
    entered, release = threading.Event(), threading.Event()

    def hold_dry_run():
        with cube.dry_run():
            entered.set()
            release.wait()

    th = threading.Thread(target=hold_dry_run)
    th.start()
    entered.wait()
    try:
        tuner(client, x, out)            # this thread is SKIP too: the dry run is process-wide
    finally:
        release.set()
        th.join()
    assert tuner.result(client, x, out).best == "fast"
    assert set(tuner.result(client, x, out).timings) == {"fast", "slow"}
    np.testing.assert_array_equal(client.read(out), np.zeros(1024))   # the real call was skipped


def test_results_persist_across_processes():
    """Results are stored on disk keyed by device, tuner, candidate set and key: a new process
    does not tune again. NUMBA_CUBE_AUTOTUNE_CACHE=0 turns persistence off."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(__import__('pathlib').Path(__file__).parent)!r})
        import numpy as np, numba_cube as cube
        import test_autotune
        test_autotune.RUN = {RUN!r}
        c = cube.client("cpu")
        t = test_autotune.make_tuner("persist")
        x, out = c.create(np.ones(512)), c.create(np.zeros(512))
        t(c, x, out)
        print("FROM_CACHE", t.result(c, x, out).from_cache)
    """)
    env = dict(__import__("os").environ)
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                           timeout=300) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert "FROM_CACHE False" in runs[0].stdout
    assert "FROM_CACHE True" in runs[1].stdout
    off = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={**env, "NUMBA_CUBE_AUTOTUNE_CACHE": "0"}, timeout=300)
    assert "FROM_CACHE False" in off.stdout, off.stderr


def test_decorator_form():
    """@cube.autotune(key=..., candidates=[params...]) builds one candidate per parameter dict."""
    client = cube.client("cpu")

    @cube.autotune(key=lambda x, out: cube.pow2_bucket(out.size), candidates=[{"tpb": 32}, {"tpb": 128}],
                   samples=2)
    def scaled(client, x, out, *, tpb):
        client.launch(scale, (out.size + tpb - 1) // tpb, tpb, x, out)

    x = client.create(np.arange(1000.0))
    out = client.create(np.zeros(1000))
    scaled(client, x, out)
    assert scaled.result(client, x, out).best in {"tpb=32", "tpb=128"}
    np.testing.assert_array_equal(client.read(out), 2.0 * np.arange(1000.0))
