"""Bad input gets a typed error on the issuing thread and breaks nothing (CPU backend, real
compiles): one row per bad input, the error it must raise (a CubeError that is also the builtin
exception that names the situation), and, after it, the device still works: a valid launch gives
NumPy's answer, sync() does not raise, an unrelated buffer stays readable.

Launches beyond CUDA's launch limits are the other table: a failure on the launch's write set,
as the CUDA driver would refuse them, the same on every backend.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube import (CaptureError, DTypeError, LaunchArgumentError, LaunchModeError, OptionError,
                        ShapeError, StreamIdError)


@cube.kernel
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cube.kernel
def fill_index(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = i


@pytest.fixture
def client():
    # A fresh stream per test: captures belong to a stream, and rows must not see each other's.
    with cube.stream():
        yield cube.client("cpu")


def assert_device_works(client, unrelated, expected) -> None:
    x, y = np.arange(64.0), np.full(64, 0.5)
    out = client.empty(64)
    client.launch(axpy, 1, 64, 3.0, client.create(x), client.create(y), out)
    np.testing.assert_array_equal(client.read(out), 3.0 * x + y)
    client.sync()
    np.testing.assert_array_equal(client.read(unrelated), expected)


def _two_exits(mode):
    guard = mode()
    guard.__enter__()
    guard.__exit__(None, None, None)
    guard.__exit__(None, None, None)


def _inside_a_capture(client, operation):
    """``operation()`` inside a capture window (warmed up); the window is closed again after."""
    client.graph_prepare()
    client.start_capture()
    try:
        operation()
    finally:
        with pytest.raises(CaptureError):      # the refused operation doomed the capture
            client.stop_capture()


def _three(client, dtype, n=3):
    return cube.CubeCount.dynamic(client.create(np.array([2, 1, 1, 1][:n], dtype)))


# id -> (what the user does, the typed error, the builtin it also is, what the message names)
BAD_INPUTS = {
    "create of dtype object": (lambda c: c.create(np.array([1, "a", None], dtype=object)),
                               DTypeError, TypeError, "object"),
    "empty of dtype object": (lambda c: c.empty(4, object), DTypeError, TypeError, "object"),
    "empty of no dtype at all": (lambda c: c.empty(4, "not-a-dtype"), DTypeError, TypeError, "dtype"),
    "byte size overflows": (lambda c: c.empty((2**32, 2**32)), ShapeError, ValueError, "bytes"),
    "byte size beyond any buffer": (lambda c: c.empty(2**61, np.float64), ShapeError, ValueError,
                                    "bytes"),
    "negative dim": (lambda c: c.empty(-5), ShapeError, ValueError, "negative"),
    "negative dim in a shape": (lambda c: c.empty((3, -1)), ShapeError, ValueError, "negative"),
    "float dim": (lambda c: c.empty(2.5), ShapeError, ValueError, "int"),
    "unhashable stream id": (lambda c: c.set_stream([1]), StreamIdError, TypeError, "StreamId"),
    "int stream id": (lambda c: c.set_stream(5), StreamIdError, TypeError, "StreamId"),
    "stream() of a string": (lambda c: cube.stream("s1"), StreamIdError, TypeError, "StreamId"),
    "dynamic count of int64": (lambda c: _three(c, np.int64), LaunchArgumentError, TypeError, "uint32"),
    "dynamic count of float32": (lambda c: _three(c, np.float32), LaunchArgumentError, TypeError,
                                 "uint32"),
    "dynamic count of four uint32": (lambda c: _three(c, np.uint32, 4), LaunchArgumentError,
                                     TypeError, "three"),
    "dynamic count of two uint32": (lambda c: _three(c, np.uint32, 2), LaunchArgumentError,
                                    TypeError, "three"),
    "int beyond int64 and uint64": (lambda c: c.launch(axpy, 1, 4, 2**70, *[c.create(np.ones(4))] * 3),
                                    LaunchArgumentError, TypeError, "'a'"),
    "not a kernel": (lambda c: c.launch(42, 1, 1), LaunchArgumentError, TypeError, "kernel"),
    "misspelt client option": (lambda c: cube.client("cpu", boundcheck=True), OptionError, TypeError,
                               "boundscheck"),
    "dry_run exited without enter": (lambda c: cube.dry_run().__exit__(None, None, None),
                                     LaunchModeError, RuntimeError, "dry_run"),
    "dry_run exited twice": (lambda c: _two_exits(cube.dry_run), LaunchModeError, RuntimeError,
                             "dry_run"),
    "real_run exited twice": (lambda c: _two_exits(cube.real_run), LaunchModeError, RuntimeError,
                              "real_run"),
    "profile inside a capture": (lambda c: _inside_a_capture(c, lambda: c.profile(lambda: None)),
                                 CaptureError, cube.CubeError, "profiling"),
    "allocation the pool cannot serve in a capture": (
        lambda c: _inside_a_capture(c, lambda: c.empty(50_000_000)), CaptureError, cube.CubeError,
        "allocation"),
}


@pytest.mark.parametrize("row", list(BAD_INPUTS))
def test_bad_input_is_a_typed_error_and_breaks_nothing(client, row):
    """Each bad input raises its typed error (also the builtin it names) at the call, with a
    message naming the problem; then the launch mode is unchanged and the device still works."""
    action, error, builtin, names = BAD_INPUTS[row]
    unrelated = client.create(np.arange(16.0))
    with pytest.raises(error, match=names) as info:
        action(client)
    assert isinstance(info.value, builtin) and isinstance(info.value, cube.CubeError)
    assert cube.launch_mode() is cube.LaunchMode.EXECUTE
    assert_device_works(client, unrelated, np.arange(16.0))


def test_an_exit_without_enter_leaves_an_open_dry_run_open(client):
    """A stray exit inside a real dry run does not end it (the depth is per guard, not a global
    counter anyone can decrement): launches keep skipping until the real exit."""
    with cube.dry_run():
        with pytest.raises(LaunchModeError):
            cube.dry_run().__exit__(None, None, None)
        assert cube.launch_mode() is cube.LaunchMode.SKIP
    assert cube.launch_mode() is cube.LaunchMode.EXECUTE


# -- launch limits: a failure on the write set -----------------------------------------------------
BEYOND_LIMITS = {
    "2048 units per cube": (1, 2048, "1024 units"),
    "1025 units per cube": (1, (1025, 1, 1), "1024 units"),
    "units in 2-d": (1, (64, 32), "1024 units"),
    "cube dim z above 64": (1, (1, 1, 65), "per-dimension"),
    "cube count x of 2**31": (2**31, 1, "grid limits"),
    "cube count y above 65535": ((1, 65536), 1, "grid limits"),
    "cube count z above 65535": ((1, 1, 65536), 1, "grid limits"),
}


@pytest.mark.parametrize("row", list(BEYOND_LIMITS))
def test_launch_beyond_the_limits_fails_its_write_set(client, row):
    """A launch beyond CUDA's launch limits (block x, y <= 1024, z <= 64, x*y*z <= 1024; grid
    x < 2**31, y, z <= 65535) runs nothing: its output carries a LaunchFailure whose root is a
    LaunchArgumentError naming the limit, known at once (check), like a compile failure; inputs
    stay clean, relaunching within the limits repairs the output, the device keeps working."""
    count, dim, names = BEYOND_LIMITS[row]
    unrelated = client.create(np.arange(16.0))
    out = client.create(np.full(8, -1.0))
    client.launch(fill_index, count, dim, out)
    with pytest.raises(cube.LaunchFailure) as known:
        client.check(out)
    with pytest.raises(cube.LaunchFailure) as info:
        client.read(out)
    for failure in (known.value, info.value):
        assert isinstance(failure.root, LaunchArgumentError), failure.root
        assert names in str(failure.root) and failure.kernel_id == fill_index.id
    client.launch(fill_index, 1, 8, out)
    np.testing.assert_array_equal(client.read(out), np.arange(8.0))
    assert_device_works(client, unrelated, np.arange(16.0))


def test_launch_at_the_limits_runs(client):
    """The limits themselves are allowed: 1024 units per cube, z = 64."""
    out = client.create(np.full(2048, -1.0))
    client.launch(fill_index, 2, 1024, out)
    np.testing.assert_array_equal(client.read(out), np.arange(2048.0))
    client.launch(fill_index, 1, (1, 16, 64), out[:1])
    np.testing.assert_array_equal(client.read(out[:1]), [0.0])


def test_launch_beyond_the_limits_in_a_capture_dooms_it(client):
    """Inside a capture window such a launch cannot be recorded: the capture fails, naming it."""
    out = client.create(np.zeros(8))
    client.graph_prepare()
    client.start_capture()
    client.launch(fill_index, 1, 2048, out)
    with pytest.raises(CaptureError, match="1024 units"):
        client.stop_capture()
