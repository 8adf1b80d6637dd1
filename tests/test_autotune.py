"""Autotune (CONTRACT.md section 7) on the CPU backend."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import uuid
import warnings

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


# ---- autotune.json of the wrong shape -----------------------------------------------------------

def two_candidates(name):
    """A tuner of the fast and slow scale kernels (no failing one: quicker to tune)."""
    def fast(client, x, out):
        client.launch(scale, (out.size + 127) // 128, 128, x, out)

    def slow(client, x, out):
        client.launch(scale_slow, (out.size + 127) // 128, 128, x, out)

    return cube.Tuner(name, {"fast": fast, "slow": slow},
                      key=lambda x, out: cube.pow2_bucket(out.size), samples=2)


@pytest.mark.parametrize("content", ["{truncated", "[]", '{"x": 1}', "entries of the wrong shape"])
def test_malformed_autotune_json_does_not_break_the_tuner(tmp_path, monkeypatch, content):
    """A malformed autotune.json (bad JSON, valid JSON of the wrong shape, or entries of the wrong
    shape) is reported with one warning, ignored (the key is tuned again, the results are right),
    and rewritten well-formed by the save that follows."""
    monkeypatch.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path))
    client = cube.client("cpu")
    path = tmp_path / "autotune.json"
    x = client.create(np.arange(256.0))
    out = client.create(np.zeros(256))
    if content == "entries of the wrong shape":
        two_candidates("shape")(client, x, out)                 # a real entry, then mangled
        data = json.loads(path.read_text())
        path.write_text(json.dumps({k: {**v, "launched": 7} for k, v in data.items()}))
    else:
        path.write_text(content)
    tuner = two_candidates("shape")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuner(client, x, out)
        two_candidates("shape")(client, x, out)                 # a new tuner reads the file again
    reports = [str(w.message) for w in caught if "autotune.json" in str(w.message)]
    assert len(reports) == 1, reports
    assert tuner.result(client, x, out).from_cache is False
    np.testing.assert_array_equal(client.read(out), 2.0 * np.arange(256.0))
    data = json.loads(path.read_text())
    assert isinstance(data, dict) and len(data) == 1
    (entry,) = data.values()
    assert entry["best"] in {"fast", "slow"} and entry["launched"] == sorted(
        {scale.id} if entry["best"] == "fast" else {scale_slow.id})


# ---- a result is dropped when the winner's code changes -----------------------------------------

_factory_kernels: dict = {}


def factory_kernel(factor, work):
    """A kernel computing ``factor * x``, with ``work`` iterations of busywork per element; both
    are closure constants, so they are part of the compiled code (and of ``Kernel.id``)."""
    if (factor, work) not in _factory_kernels:
        @cube.kernel
        def scaled(x, out):
            i = cuda.grid(1)
            if i < out.size:
                acc = 0.0
                for k in range(work):
                    acc += x[i] * 1e-9
                out[i] = factor * x[i] + acc * 0.0
        _factory_kernels[factor, work] = scaled
    return _factory_kernels[factor, work]


TABLE: dict = {}     # what the candidates launch; tests rebind its entries ("the code changes")


def table_tuner(name):
    def a(client, x, out):
        client.launch(TABLE["a"], (out.size + 127) // 128, 128, x, out)

    def b(client, x, out):
        client.launch(TABLE["b"], (out.size + 127) // 128, 128, x, out)

    return cube.Tuner(name, {"a": a, "b": b}, key=lambda x, out: cube.pow2_bucket(out.size),
                      samples=2)


def install(factor, fast):
    """Make candidate ``fast`` cheap and the other one slow, both computing ``factor * x``."""
    for name in ("a", "b"):
        TABLE[name] = factory_kernel(factor, 0 if name == fast else 20000)


@pytest.mark.parametrize("reuse", ["memory", "disk"])
def test_stale_winner_is_not_reused_after_the_code_changes(tmp_path, monkeypatch, reuse):
    """Each result records the kernel ids its winner launched. When a call reusing the result
    (the same tuner's memory, or autotune.json read by a new tuner) sees the winner launch other
    kernels (the factory's closure constants changed), the result is dropped and the key is
    tuned again: the new fastest candidate wins, and the outputs follow the new code."""
    monkeypatch.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path))
    client = cube.client("cpu")
    xs = np.arange(4096.0)
    x, out = client.create(xs), client.create(np.zeros(4096))
    install(2.0, fast="a")
    first = table_tuner("stale")
    first(client, x, out)
    tuned = first.result(client, x, out)
    assert tuned.best == "a" and tuned.launched == {TABLE["a"].id}
    np.testing.assert_array_equal(client.read(out), 2.0 * xs)

    install(3.0, fast="b")                                     # new code: now "b" is the fast one
    tuner = first if reuse == "memory" else table_tuner("stale")
    if reuse == "disk":
        assert tuner.tune(client, x, out).from_cache and tuner.tune(client, x, out).best == "a"
    tuner(client, x, out)                                      # runs the stale winner, notices
    np.testing.assert_array_equal(client.read(out), 3.0 * xs)
    retuned = tuner.result(client, x, out)
    assert retuned.best == "b" and not retuned.from_cache and retuned.launched == {TABLE["b"].id}
    stored = json.loads((tmp_path / "autotune.json").read_text())
    assert [e["launched"] for e in stored.values()] == [[TABLE["b"].id]]

    out2 = client.create(np.zeros(4096))
    tuner(client, x, out2)                                     # the new winner, no retuning
    assert tuner.result(client, x, out2) is retuned
    np.testing.assert_array_equal(client.read(out2), 3.0 * xs)


def test_launching_fewer_kernels_is_not_a_change(tmp_path, monkeypatch):
    """A call in which the winner launches nothing (a zero-size launch is skipped before it is
    logged) keeps the result: only a kernel the winner did not launch when tuned means new code."""
    monkeypatch.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path))
    client = cube.client("cpu")

    def maybe(client, x, out):
        if out.size > 1:
            client.launch(scale, (out.size + 127) // 128, 128, x, out)

    tuner = cube.Tuner(f"fewer-{RUN}", {"maybe": maybe}, key=lambda x, out: 0, samples=1)
    tuner(client, client.create(np.ones(512)), client.create(np.zeros(512)))
    tuned = tuner.result(client, None, None)
    tuner(client, client.create(np.ones(1)), client.create(np.zeros(1)))
    assert tuner.result(client, None, None) is tuned
