"""numba's launch-configuration stream on the CUDA backend (runtime/client/eager.py): a
``cube.StreamId`` is the launch's stream and the result is NumPy's; a numba-cuda stream object
is synchronized first (the numba-style launch is synchronous, so it is ordered after that
stream's work and before anything queued there later), on the simulator (whose
``cuda.stream()`` is numba-cuda's own) and a GPU; the StreamId launch also on the fake driver.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

from _cuda_setup import FAKE_API, only


@cube.kernel
def double(a):
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[i] = 2 * a[i]


def test_a_stream_id_launch_computes_numpys_result(client):
    """kernel[count, dim, StreamId] and kernel[count, dim, 0] run on a handle as
    kernel[count, dim] does."""
    h = client.create(np.arange(40.0))
    with client:
        double[1, 64, cube.StreamId.new()](h)
        double[1, 64, 0](h)
    np.testing.assert_array_equal(np.asarray(h), np.arange(40.0) * 4)


@only("sim", "gpu", why="numba-cuda's cuda.stream() needs its simulator or a GPU")
def test_a_numba_stream_object_orders_the_launch_after_it(client):
    """cuda.stream() in the launch configuration: the launch is ordered after that stream's work
    (it is synchronized first) and gives NumPy's result."""
    host = np.ones(8)
    with client:
        double[1, 64, cuda.stream()](host)
    np.testing.assert_array_equal(host, np.full(8, 2.0))


class _ContextCheckingStream:
    """Stands for a cuda.core default stream, whose ``sync()`` needs a current context on the
    calling thread (CUDA_ERROR_INVALID_CONTEXT otherwise): it records whether the fake driver
    had one when it was called."""

    def __init__(self):
        self.had_context = []

    def sync(self):
        err, ctx = FAKE_API.cuCtxGetCurrent()
        self.had_context.append(int(ctx) != 0)


def _in_a_new_thread(fn):
    errors = []

    def run():
        try:
            fn()
        except BaseException as exc:        # reported on the test's thread
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if errors:
        raise errors[0]


@only("fake", why="the fake driver tells whether the calling thread has a current context")
def test_a_foreign_stream_is_synchronized_with_the_context_current_on_a_new_thread(client):
    """From a thread that never touched the device, a foreign stream in the launch
    configuration is synchronized with the device's context current there (a cuda.core
    default stream's sync() fails without one)."""
    stream = _ContextCheckingStream()
    host = np.ones(8)

    def launch():
        with client:
            double[1, 64, stream](host)

    _in_a_new_thread(launch)
    assert stream.had_context == [True]
    np.testing.assert_array_equal(host, np.full(8, 2.0))


@only("gpu", why="numba-cuda's launch configuration holds a cuda.core stream only on a GPU")
def test_a_numba_style_launch_from_a_new_thread_runs(client):
    """kernel[count, dim](host) from a thread that never touched the GPU (numba's launch
    configuration holds the cuda.core default stream there) gives NumPy's result, as numba-cuda's
    own test_lock and test_concurrent_compiling launch."""
    host = np.ones(8)

    def launch():
        with client:
            double[1, 64](host)

    _in_a_new_thread(launch)
    np.testing.assert_array_equal(host, np.full(8, 2.0))
