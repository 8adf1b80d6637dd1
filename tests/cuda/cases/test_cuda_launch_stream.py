"""numba's launch-configuration stream on the CUDA backend (runtime/eager.py): a
``cube.StreamId`` is the launch's stream and the result is NumPy's; a numba-cuda stream object
is synchronized first (the numba-style launch is synchronous, so it is ordered after that
stream's work and before anything queued there later), on the simulator (whose
``cuda.stream()`` is numba-cuda's own) and a GPU; the StreamId launch also on the fake driver.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

from _cuda_setup import only


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
