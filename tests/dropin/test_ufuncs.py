"""CUDA ufuncs under the layer (``numba_cube/dropin/ufuncs.py``): ``numba.vectorize(...,
target="cuda")`` and ``cuda.vectorize`` run as numba_cube kernels and compute what NumPy
computes for the same element-wise function, with numba's loop selection and its host/device
result rule; ``guvectorize(target="cuda")`` is a typed refusal."""

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


def test_guvectorize_and_lazy_vectorize_are_refused_by_name(layer):
    """``guvectorize(target="cuda")`` and ``vectorize`` without signatures raise
    UnsupportedAPIError naming them."""
    from numba import guvectorize, vectorize

    with pytest.raises(cube.UnsupportedAPIError, match="guvectorize"):
        guvectorize(["void(float64[:], float64[:])"], "(n)->(n)", target="cuda")(lambda a, b: None)
    with pytest.raises(cube.UnsupportedAPIError, match="without signatures"):
        vectorize(target="cuda")(lambda a: a)
