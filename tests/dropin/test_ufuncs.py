"""CUDA ufuncs under the layer (``numba_cube/dropin/ufuncs.py``): ``numba.vectorize(...,
target="cuda")`` and ``cuda.vectorize`` run as numba_cube kernels and compute what NumPy
computes for the same element-wise function, with numba's loop selection and its host/device
result rule; ``guvectorize(target="cuda")`` runs numba-cuda's own gufunc machinery through the
layer (its kernels call the function as a device function declared ``void(arrays...)``) and
computes what NumPy computes, host arrays in giving host arrays out, device arrays device
arrays."""

from __future__ import annotations

import math

import numpy as np
import pytest

import numba_cube as cube


def test_vectorize_target_cuda_computes_numpys_numbers(layer):
    """Host inputs give a host array of the loop's type, device inputs a device array; inputs
    broadcast; scalars give a scalar; int32 inputs take the int32 loop."""
    from numba import vectorize

    @vectorize(["float32(float32, float32)", "float64(float64, float64)"], target="cuda")
    def hypot(a, b):
        return math.sqrt(a * a + b * b)

    x, y = np.arange(100, dtype=np.float32), np.full(100, 2, np.float32)
    got = hypot(x, y)
    assert type(got) is np.ndarray and got.dtype == np.float32
    assert np.array_equal(got, np.sqrt(x * x + y * y))
    on_device = hypot(layer.to_device(x), layer.to_device(y))
    assert isinstance(on_device, cube.Handle)
    assert np.array_equal(on_device.copy_to_host(), got)
    grid = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(hypot(grid, 1.0), np.sqrt(grid * grid + 1.0))
    assert hypot(3.0, 4.0) == 5.0

    @layer.vectorize(["int32(int32)"])
    def square(v):
        return v * v

    assert np.array_equal(square(np.arange(5, dtype=np.int32)), np.arange(5) ** 2)
    with pytest.raises(TypeError):
        square(np.arange(5.0))                     # no loop takes float64 safely


def test_guvectorize_computes_what_numpy_does_on_host_and_device_arrays(layer):
    """A batched matrix product ``(m,n),(n,p)->(m,p)`` over a loop dimension: NumPy's result
    from host arrays (a host array back), from device arrays (a device array back), and into an
    output device array passed by the caller; an element-wise gufunc broadcasts a row."""
    from numba import guvectorize

    @guvectorize(["void(float64[:,:], float64[:,:], float64[:,:])"], "(m,n),(n,p)->(m,p)",
                 target="cuda")
    def matmul(a, b, c):
        for i in range(c.shape[0]):
            for j in range(c.shape[1]):
                acc = 0.0
                for k in range(a.shape[1]):
                    acc += a[i, k] * b[k, j]
                c[i, j] = acc

    rng = np.random.default_rng(5)
    x, y = rng.random((6, 3, 4)), rng.random((6, 4, 2))
    host = matmul(x, y)
    assert isinstance(host, np.ndarray)
    np.testing.assert_allclose(host, x @ y, rtol=1e-13)
    dx, dy = layer.to_device(x), layer.to_device(y)
    on_device = matmul(dx, dy)
    assert cube.dropin.devicearray.DeviceNDArray is type(on_device)
    np.testing.assert_allclose(on_device.copy_to_host(), x @ y, rtol=1e-13)
    out = layer.device_array((6, 3, 2))
    matmul(dx, dy, out)
    np.testing.assert_allclose(out.copy_to_host(), x @ y, rtol=1e-13)

    @guvectorize(["void(float32[:], float32[:], float32[:])"], "(n),(n)->(n)", target="cuda")
    def add_rows(a, b, c):
        for i in range(c.shape[0]):
            c[i] = a[i] + b[i]

    a = rng.random((5, 7)).astype(np.float32)
    row = rng.random(7).astype(np.float32)
    np.testing.assert_array_equal(add_rows(a, np.broadcast_to(row, a.shape).copy()), a + row)


def test_lazy_vectorize_is_refused_by_name(layer):
    """``vectorize`` without signatures raises UnsupportedAPIError naming it (numba-cuda needs
    signatures too)."""
    from numba import vectorize

    with pytest.raises(cube.UnsupportedAPIError, match="without signatures"):
        vectorize(target="cuda")(lambda a: a)
