"""The trace plugin: a Chrome trace / Perfetto JSON timeline of dispatches per stream, with the
runtime's inferred dependencies as flow arrows, switched on by ``tracing()`` or
``NUMBA_CUBE_TRACE``, and drawn as a PNG."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
import numba_cube_trace
from numba_cube.runtime.client import observers
from numba_cube.testing import register_python_backend

# -- kernels for the real CPU backend (numba.cuda dialect) --------------------------------------------


@cube.kernel
def double(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * 2


@cube.kernel
def slow_fill(buf, iters):
    # A kernel that takes a while (tens of ms) and then writes buf.
    i = cuda.grid(1)
    if i < buf.size:
        acc = 0.0
        for k in range(iters):
            acc += (k % 7) * 1e-9
        buf[i] = 1.0 + acc * 0.0


# -- "kernels" for the PythonBackend (plain functions of the NumPy views) ------------------------------


def _py_double(x, out):
    out[:] = x * 2


def _py_slow_fill(buf, iters):
    time.sleep(0.05)
    buf[:] = 1.0


py_double = cube.kernel(_py_double, reads=("x",), writes=("out",))
py_slow_fill = cube.kernel(_py_slow_fill, writes=("buf",))

_cpu_reason: list = []


def _cpu_works() -> str | None:
    """None if the CPU backend runs a tiny kernel here, else why not (it is still being built)."""
    if not _cpu_reason:
        try:
            c = cube.client("cpu")
            out = c.empty(4, np.float64)
            c.launch(double, 1, 4, c.create(np.ones(4)), out)
            ok = np.array_equal(c.read(out), np.full(4, 2.0))
            _cpu_reason.append(None if ok else "the CPU backend computed a wrong answer")
        except Exception as exc:  # noqa: BLE001 - any failure: test on the Python backend only
            _cpu_reason.append(f"CPU backend not usable here: {type(exc).__name__}: {exc}"[:300])
    return _cpu_reason[0]


@pytest.fixture(params=["pytest", "cpu"])
def setup(request):
    """(client, double kernel, slow writer kernel, args of the slow writer after buf)."""
    if request.param == "cpu":
        reason = _cpu_works()
        if reason is not None:
            pytest.skip(reason)
        return cube.client("cpu"), double, slow_fill, (20_000_000,)
    if "trace_py" not in cube.backends():
        register_python_backend("trace_py")
    return cube.client("trace_py"), py_double, py_slow_fill, (0,)


def _xs(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def test_one_complete_event_per_dispatch(setup, tmp_path):
    """Inside ``tracing(path)`` every launch that ran is one "X" event, named after its kernel, on
    the lane of its device and stream, and the file written at the block's end is valid JSON
    equal to ``rec.trace()``; launches outside the block are not recorded."""
    client, dbl, _, _ = setup
    x = client.create(np.arange(100.0))
    outs = [client.empty(100, np.float64) for _ in range(5)]
    client.launch(dbl, 1, 128, x, outs[0])            # before: not recorded
    client.sync()
    path = tmp_path / "t.json"
    with numba_cube_trace.tracing(path) as rec:
        for out in outs[1:]:
            client.launch(dbl, 1, 128, x, out)
    client.launch(dbl, 1, 128, x, outs[0])            # after: not recorded
    client.sync()
    trace = json.loads(path.read_text())
    assert trace == json.loads(json.dumps(rec.trace()))
    xs = _xs(trace)
    assert len(xs) == 4
    assert {e["name"] for e in xs} == {dbl.name}
    assert all(e["dur"] >= 0 and e["args"]["failed"] is False for e in xs)
    lanes = {(e["pid"], e["tid"]) for e in xs}
    assert len(lanes) == 1                            # one device, one stream
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    assert client.device in names
    launches = [e for e in trace["traceEvents"] if e.get("cat") == "launch"]
    assert len(launches) == 4


def test_dependency_is_a_flow_arrow(setup, tmp_path):
    """A kernel on stream B that reads what a slow kernel on stream A writes waits for it: its X
    event lists A's task in ``deps``, and one flow pair ("s" on A's lane inside A's slice near its
    end, "f" with ``bp: e`` on B's lane at B's start) joins them. Two lanes, ordered in time."""
    client, dbl, slow, slow_args = setup
    buf = client.empty(64, np.float64)
    out = client.empty(64, np.float64)
    with numba_cube_trace.tracing() as rec:
        with cube.stream() as a:
            client.launch(slow, 1, 64, buf, *slow_args)
        with cube.stream() as b:
            client.launch(dbl, 1, 64, buf, out)
    np.testing.assert_array_equal(client.read(out), np.full(64, 2.0))
    trace = rec.trace()
    xs = _xs(trace)
    assert len(xs) == 2
    first = next(e for e in xs if e["name"] == slow.name)
    second = next(e for e in xs if e["name"] == dbl.name)
    assert first["args"]["stream"] == a.value and second["args"]["stream"] == b.value
    assert (first["pid"], first["tid"]) != (second["pid"], second["tid"])
    assert second["args"]["deps"] == [first["args"]["task_id"]]
    assert second["ts"] >= first["ts"] + first["dur"] - 1.0
    starts = [e for e in trace["traceEvents"] if e["ph"] == "s"]
    ends = [e for e in trace["traceEvents"] if e["ph"] == "f"]
    assert len(starts) == len(ends) == 1
    s, f = starts[0], ends[0]
    assert s["id"] == f["id"] and f["bp"] == "e"
    assert (s["pid"], s["tid"]) == (first["pid"], first["tid"])
    assert first["ts"] <= s["ts"] <= first["ts"] + first["dur"]
    assert (f["pid"], f["tid"]) == (second["pid"], second["tid"]) and f["ts"] == second["ts"]


def test_failed_dispatch_and_skipped_dependent(tmp_path):
    """A dispatch whose kernel raised is an X event with ``failed: true``; a dependent skipped for
    its failed input did not run and is an instant event, not an X event."""
    if "trace_py" not in cube.backends():
        register_python_backend("trace_py")
    client = cube.client("trace_py")

    def boom(out):
        if out.size:
            raise RuntimeError("boom")
        out[:] = 0.0      # written (as far as the IO analysis can tell), so the failure lands on out

    k_boom = cube.kernel(boom, writes=("out",))
    a, b = client.empty(4, np.float64), client.empty(4, np.float64)
    with numba_cube_trace.tracing() as rec:
        client.launch(k_boom, 1, 1, a)
        client.launch(py_double, 1, 1, a, b)
    trace = rec.trace()
    xs = _xs(trace)
    assert len(xs) == 1 and xs[0]["args"]["failed"] is True
    skipped = [e for e in trace["traceEvents"] if e["ph"] == "i" and e.get("cat") == "dispatch"]
    assert len(skipped) == 1 and "did not run" in skipped[0]["name"]


def test_idle_costs_nothing():
    """Outside ``tracing()`` (and without NUMBA_CUBE_TRACE) no task observer is installed, so the
    runtime does not even build TaskEvents; inside, one is."""
    from numba_cube.plugins import get_plugin_manager

    get_plugin_manager()
    if numba_cube_trace.active():
        pytest.skip("NUMBA_CUBE_TRACE is set for this test run")
    assert not observers.tasks_observed()
    with numba_cube_trace.tracing(sync=False):
        assert observers.tasks_observed()
    assert not observers.tasks_observed()


def test_env_var_writes_at_exit_and_on_demand(tmp_path):
    """``NUMBA_CUBE_TRACE=path`` records the whole run through the entry-point plugin:
    ``numba_cube_trace.save()`` writes the file on demand and it is written again at exit."""
    pytest.importorskip("numba_cube_trace.plugin")
    from importlib.metadata import entry_points

    if not any(ep.value.startswith("numba_cube_trace") for ep in entry_points(group="numba_cube")):
        pytest.skip("numba_cube_trace is not installed (pip install -e plugins/numba_cube_trace)")
    path = tmp_path / "env-{pid}.json"
    script = textwrap.dedent("""
        import numpy as np, json, os, sys
        import numba_cube as cube, numba_cube_trace
        from numba_cube.testing import register_python_backend
        register_python_backend("envpy")
        def twice(x, out):
            out[:] = x * 2
        k = cube.kernel(twice, reads=("x",), writes=("out",))
        c = cube.client("envpy")
        x, out = c.create(np.ones(8)), c.empty(8, np.float64)
        c.launch(k, 1, 1, x, out)
        c.read(out)
        written = numba_cube_trace.save()
        print(json.dumps(written))
        n = sum(e["ph"] == "X" for e in json.load(open(written[0]))["traceEvents"])
        c.launch(k, 1, 1, x, out)
        c.sync()
        print(n)
    """)
    env = dict(os.environ, NUMBA_CUBE_TRACE=str(path))
    env.pop("NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD", None)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    written, n_on_demand = proc.stdout.split("\n")[:2]
    (written,) = json.loads(written)
    assert "{pid}" not in written and os.path.exists(written)
    assert int(n_on_demand) == 1
    assert sum(e["ph"] == "X" for e in json.load(open(written))["traceEvents"]) == 2   # at exit


def test_png_summary(tmp_path):
    """``render_png`` writes a valid PNG of a trace (path or object), and the command line
    ``python -m numba_cube_trace trace.json -o out.png`` prints a summary and writes one too."""
    pytest.importorskip("matplotlib")
    if "trace_py" not in cube.backends():
        register_python_backend("trace_py")
    client = cube.client("trace_py")
    buf, out = client.empty(8, np.float64), client.empty(8, np.float64)
    path = tmp_path / "t.json"
    with numba_cube_trace.tracing(path):
        with cube.stream():
            client.launch(py_slow_fill, 1, 1, buf, 0)
        with cube.stream():
            client.launch(py_double, 1, 1, buf, out)
    png = numba_cube_trace.render_png(path, tmp_path / "t.png")
    data = open(png, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    proc = subprocess.run([sys.executable, "-m", "numba_cube_trace", str(path), "-o", str(tmp_path / "cli.png")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "2 dispatches on 2 stream lanes" in proc.stdout
    assert (tmp_path / "cli.png").read_bytes()[:4] == b"\x89PNG"
    assert "2 dispatches" in numba_cube_trace.summary(json.loads(path.read_text()))
