"""On a GPU: a numba device array that is a broadcast view is never bound as contiguous.

numba's ``__cuda_array_interface__`` says ``strides: None`` for a stride-0 (broadcast) array,
which a ufunc makes of a scalar argument. Bound as contiguous, a kernel would read past the
one element it holds: it is bound with its real strides instead, as numba-cuda binds it.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

from _cuda_setup import KIND

pytestmark = pytest.mark.skipif(KIND != "gpu", reason="numba device arrays need a GPU")


@cube.kernel
def _copy(src, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = src[i]


def test_broadcast_numba_array_is_bound_with_its_strides(client):
    """A (10,) view with stride 0 over one element reads that element ten times (NumPy's
    broadcast_to of it), and the device keeps working for a contiguous array afterwards."""
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    one = cuda.to_device(np.array([6.0]))
    broadcast = DeviceNDArray(shape=(10,), strides=(0,), dtype=one.dtype, gpu_data=one.gpu_data)
    assert broadcast.__cuda_array_interface__["strides"] is None     # what numba reports
    out = client.empty(10)
    client.launch(_copy, 1, 32, broadcast, out)
    np.testing.assert_array_equal(client.read(out), np.broadcast_to(np.array([6.0]), (10,)))
    src = cuda.to_device(np.arange(10.0))
    client.launch(_copy, 1, 32, src, out)
    np.testing.assert_array_equal(client.read(out), np.arange(10.0))
