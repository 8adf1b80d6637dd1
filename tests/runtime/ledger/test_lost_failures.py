"""No failure is lost (runtime/ledger/outcomes.py): a launch that fails and writes no buffer its failure
could live on raises at a numba-style call, is reported as an UnrecordedFailureWarning after a
``client.launch``, and a dry run lists the launches that would fail before running. CPU backend,
real Numba compiles, real threads."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube import UnrecordedFailureWarning

from .._util import run_in_thread, threaded_cpu_client


@cube.kernel
def raise_on_scalar(n):
    if cuda.grid(1) == n:
        raise ValueError("injected")


@cube.kernel
def read_past_the_end(x):
    i = cuda.grid(1)
    if x[i + 1000] > 1e300:      # only read: x is not in the write set
        raise ValueError("unreachable")


def _does_not_compile(n):
    if cuda.grid(1) == n:
        undefined_name_in_kernel()  # noqa: F821 - the point of the test


does_not_compile = cube.kernel(_does_not_compile)


@cube.kernel
def read_only(x):
    i = cuda.grid(1)
    if i < x.size and x[i] > 1e300:
        raise ValueError("unreachable")


@cube.kernel
def fill_one(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 1.0


@cube.kernel
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def _x(client):
    return client.create(np.arange(8.0))


# Each case: a launch that fails and writes no buffer. (kernel, count, dim, args(client) ->
# tuple, needs boundscheck, root type of the failure)
CASES = {
    "kernel raises, scalar only": (raise_on_scalar, 1, 4, lambda c: (0,), False, ValueError),
    "out-of-bounds read": (read_past_the_end, 1, 4, lambda c: (_x(c),), True, IndexError),
    "does not compile": (does_not_compile, 1, 4, lambda c: (0,), False, cube.CompileError),
    "beyond the launch limits": (read_only, 1, 2048, lambda c: (_x(c),), False,
                                 cube.LaunchArgumentError),
    "dynamic count beyond the limits": (
        read_only, "dynamic", 4, lambda c: (_x(c),), False, ValueError),
}


def _client(boundscheck: bool):
    return cube.client("cpu", boundscheck=True) if boundscheck else cube.client("cpu")


def _count(client, count):
    if count == "dynamic":
        return cube.CubeCount.dynamic(client.create(np.array([1, 70000, 1], np.uint32)))
    return count


def assert_device_works(client):
    """A valid launch afterwards gives NumPy's answer and sync() does not raise."""
    x, y = np.arange(64.0), np.ones(64)
    out = client.empty(64)
    client.launch(axpy, 1, 64, 2.0, client.create(x), client.create(y), out)
    np.testing.assert_array_equal(client.read(out), 2.0 * x + y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnrecordedFailureWarning)   # nothing left to report
        client.sync()


@pytest.mark.parametrize("case", list(CASES))
def test_numba_style_launch_raises_its_own_failure(case):
    """kernel[count, dim](...) is synchronous: it raises the LaunchFailure of its own launch,
    with the root cause, even though the launch writes no buffer."""
    kernel, count, dim, args, boundscheck, root = CASES[case]
    client = _client(boundscheck)
    with client, pytest.raises(cube.LaunchFailure) as info:
        kernel[_count(client, count), dim](*args(client))
    assert isinstance(info.value.root, root), info.value.root
    assert info.value.kernel_id == kernel.id
    assert_device_works(client)


def test_numba_style_launch_raises_the_failure_it_inherits():
    """A numba-style launch that reads a handle carrying a failure is skipped and raises that
    failure (same root, the chain through it), even though it writes no buffer."""
    client = cube.client("cpu", boundscheck=True)
    bad = client.create(np.zeros(4))

    @cube.kernel
    def write_past_the_end(o):
        o[cuda.grid(1) + 1000] = 1.0

    client.launch(write_past_the_end, 1, 4, bad)
    with pytest.raises(cube.LaunchFailure) as first:
        client.read(bad)
    with client, pytest.raises(cube.LaunchFailure) as info:
        read_only[1, 4](bad)
    assert info.value.root is first.value.root
    assert info.value.chain == (write_past_the_end.id, read_only.id)


def test_warning_points_at_the_users_call():
    """The warning is attributed to the user's line that reported it (its sync()), not to
    numba_cube's internals."""
    client = cube.client("cpu")
    client.launch(raise_on_scalar, 1, 4, 0)
    with pytest.warns(UnrecordedFailureWarning) as record:
        client.sync()
    assert record[0].filename == __file__


@pytest.mark.parametrize("case", list(CASES))
def test_client_launch_reports_an_unrecorded_failure_warning(case):
    """client.launch of such a launch: the next sync() issues one UnrecordedFailureWarning whose
    ``failure`` is the LaunchFailure with the root cause; the buffers it only read are clean."""
    kernel, count, dim, args, boundscheck, root = CASES[case]
    client = _client(boundscheck)
    bound = args(client)
    with pytest.warns(UnrecordedFailureWarning) as record:
        client.launch(kernel, _count(client, count), dim, *bound)
        client.sync()
    (warning,) = [w for w in record if w.category is UnrecordedFailureWarning]
    failure = warning.message.failure
    assert isinstance(failure, cube.LaunchFailure) and isinstance(failure.root, root)
    assert failure.kernel_id == kernel.id and kernel.id in str(warning.message)
    handles = [a for a in bound if isinstance(a, cube.Handle)]
    assert client.sync_buffers(*handles) == [None] * len(handles)
    assert_device_works(client)


def test_warning_as_error_is_raised_once_and_breaks_nothing():
    """With the warning turned into an error (what -W error::numba_cube.UnrecordedFailureWarning
    does), sync() raises it once; the failure is then reported, and the device keeps working."""
    client = cube.client("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnrecordedFailureWarning)
        client.launch(raise_on_scalar, 1, 4, 0)
        with pytest.raises(UnrecordedFailureWarning) as info:
            client.sync()
        assert isinstance(info.value.failure.root, ValueError)
        client.sync()        # reported once: nothing raises now
    assert_device_works(client)


def _fail_then_mark(client, marker):
    """A buffer-less failing launch, then a launch on the same stream that writes ``marker``: a
    read of ``marker`` waits for both (a stream runs in order)."""
    client.launch(raise_on_scalar, 1, 4, 0)
    client.launch(fill_one, 1, 4, marker)


def test_the_launching_threads_read_reports_its_failure():
    """The launching thread's next read reports its unrecorded failure (found by then)."""
    client = cube.client("cpu")
    marker = client.empty(4)
    _fail_then_mark(client, marker)
    with pytest.warns(UnrecordedFailureWarning, match="injected"):
        np.testing.assert_array_equal(client.read(marker), np.ones(4))


def test_another_threads_read_does_not_report_it_its_sync_does():
    """A read on another thread than the launching one does not report the launching thread's
    failure (it is not that thread's work); a sync() on any thread does, exactly once."""
    client = cube.client("cpu")
    marker = client.empty(4)
    run_in_thread(_fail_then_mark, client, marker)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        np.testing.assert_array_equal(client.read(marker), np.ones(4))   # the failure is known now
        assert [w for w in seen if w.category is UnrecordedFailureWarning] == []
        client.sync()
        client.sync()
    assert [w.category for w in seen].count(UnrecordedFailureWarning) == 1


def test_failure_of_a_thread_that_ended_is_reported_by_any_sync():
    """A thread that launches and ends without waiting loses nothing: the next sync() on any
    thread reports its failure."""
    client = cube.client("cpu")
    run_in_thread(lambda: client.launch(raise_on_scalar, 1, 4, 1))
    with pytest.warns(UnrecordedFailureWarning, match="injected"):
        client.sync()


def test_warning_is_fatal_from_the_command_line(tmp_path):
    """``python -W error::numba_cube.UnrecordedFailureWarning``: the category resolves from the
    command line and sync() raises it."""
    code = textwrap.dedent("""
        import numba_cube as cube
        from numba import cuda

        @cube.kernel
        def boom(n):
            if cuda.grid(1) == n:
                raise ValueError("injected")

        c = cube.client("cpu")
        c.launch(boom, 1, 1, 0)
        try:
            c.sync()
        except cube.UnrecordedFailureWarning as exc:
            print("RAISED", type(exc.failure.root).__name__)
    """)
    script = tmp_path / "fatal.py"          # a file: the CPU translator reads kernel sources
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd()] + sys.path))
    proc = subprocess.run([sys.executable, "-W", "error::numba_cube.UnrecordedFailureWarning", str(script)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert "RAISED ValueError" in proc.stdout, proc.stdout + proc.stderr


def test_failure_nobody_reported_is_reported_at_exit(tmp_path):
    """A failure that no sync() or read of its thread reported by the end of the program is
    reported when the interpreter exits (on stderr, as a warning), not lost."""
    code = textwrap.dedent("""
        import threading
        import numpy as np
        import numba_cube as cube
        from numba import cuda

        @cube.kernel
        def boom(n):
            if cuda.grid(1) == n:
                raise ValueError("injected at exit")

        @cube.kernel
        def fill_one(out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = 1.0

        c = cube.client("cpu")
        marker = c.empty(4)

        def launch():
            c.launch(boom, 1, 1, 0)
            c.launch(fill_one, 1, 4, marker)    # after boom on the same stream

        t = threading.Thread(target=launch)
        t.start()
        t.join()
        print("READ", c.read(marker).tolist())   # boom ran; another thread's read: no report
    """)
    script = tmp_path / "at_exit.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd()] + sys.path))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env=env)
    assert "READ [1.0, 1.0, 1.0, 1.0]" in proc.stdout, proc.stdout + proc.stderr
    assert "UnrecordedFailureWarning" in proc.stderr and "injected at exit" in proc.stderr, proc.stderr


def test_failures_with_a_buffer_are_not_reported_as_unrecorded():
    """A failure that lives on a buffer is that buffer's (read raises it): no warning."""
    client = cube.client("cpu", boundscheck=True)
    out = client.empty(4)

    @cube.kernel
    def write_past_the_end(o):
        o[cuda.grid(1) + 1000] = 1.0

    with warnings.catch_warnings():
        warnings.simplefilter("error", UnrecordedFailureWarning)
        client.launch(write_past_the_end, 1, 4, out)
        client.sync()
        with pytest.raises(cube.LaunchFailure):
            client.read(out)


# -- dry runs -----------------------------------------------------------------------------------
def test_dry_run_lists_the_launches_that_would_fail_before_running():
    """``with cube.dry_run() as run:``: run.failures lists, when the block exits, every distinct
    (kernel id, exception) a skipped launch would have failed with before running (no compile,
    a geometry beyond the limits), once per failure however often it was launched; launches that
    would fail only while running cannot be known and are not listed. Nothing ran."""
    client = cube.client("cpu")
    out = client.create(np.zeros(8))
    with cube.dry_run() as run:
        for _ in range(3):
            client.launch(does_not_compile, 1, 4, 0)
        client.launch(axpy, 1, 2048, 1.0, out, out, out)
        client.launch(raise_on_scalar, 1, 4, 0)
    by_kernel = {f.kernel_id: f.error for f in run.failures}
    assert len(run.failures) == 2
    assert isinstance(by_kernel[does_not_compile.id], cube.CompileError)
    assert isinstance(by_kernel[axpy.id], cube.LaunchArgumentError)
    assert "2048" in str(by_kernel[axpy.id])
    (kernel_id, error) = run.failures[0]        # a (kernel id, exception) pair
    np.testing.assert_array_equal(client.read(out), np.zeros(8))
    client.sync()


def test_numba_style_launch_in_a_dry_run_is_listed_not_raised():
    """Inside a dry run a numba-style launch is skipped like any other: its compile failure is in
    run.failures, the call does not raise (the dry run's job is to collect, not to stop)."""
    with cube.client("cpu"), cube.dry_run() as run:
        does_not_compile[1, 4](0)
    assert [f.kernel_id for f in run.failures] == [does_not_compile.id]


def test_dry_run_lists_other_threads_launches():
    """A dry run is process-wide, so is its list: a launch another thread issues while it is open
    is skipped and listed."""
    client = cube.client("cpu")
    with cube.dry_run() as run:
        run_in_thread(lambda: client.launch(does_not_compile, 1, 4, 7))
    assert [f.kernel_id for f in run.failures] == [does_not_compile.id]


def test_dry_run_exit_waits_for_the_compiles_it_provoked():
    """The exit of a dry run returns only once the server has handled the launches it skipped (a
    device thread busy with earlier work holds it back), so run.failures is complete then."""
    client = threaded_cpu_client(7)                          # its own device thread
    gate = threading.Event()
    client.server.channel.submit(gate.wait)                  # the device thread is busy
    run = cube.dry_run()
    run.__enter__()
    client.launch(does_not_compile, 1, 4, 0)
    exiting = threading.Thread(target=run.__exit__, args=(None, None, None))
    exiting.start()
    exiting.join(0.5)
    assert exiting.is_alive() and run.failures == []          # waiting for the device thread
    gate.set()
    exiting.join(60)
    assert not exiting.is_alive()
    assert [f.kernel_id for f in run.failures] == [does_not_compile.id]
