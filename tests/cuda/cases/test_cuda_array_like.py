"""Handles as NumPy and numba.cuda users treat arrays, on the CUDA backend (runtime/memory/array_like.py):
``np.asarray(h)`` and ``h.copy_to_host()`` wait for the writer and copy the bytes back, a
``reshape`` of a contiguous handle and N-D views (``h[:, 1]``, ``h[::2, 1:3]``, ``h[..., ::-2]``,
``None``) are views the kernel reads and writes with their strides, on the simulator, the fake
driver and a GPU. Expectations are NumPy's.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube


@cube.kernel
def add_one(a, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + 1


@cube.kernel
def scale_2d(a, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = 2 * a[i, j] + i


_HOST = np.arange(6 * 8, dtype=np.float64).reshape(6, 8)


def test_asarray_and_copy_to_host_read_what_the_kernel_wrote(client):
    """np.asarray(out) and out.copy_to_host() after a launch hold the kernel's result; both are
    copies (a later launch does not change them); copy_to_host(ary) fills ary."""
    h = client.create(_HOST)
    out = client.empty(6)
    client.launch(add_one, 1, 32, h[:, 1], out)
    first = np.asarray(out)
    np.testing.assert_array_equal(first, _HOST[:, 1] + 1)
    client.launch(add_one, 1, 32, out, out)
    np.testing.assert_array_equal(first, _HOST[:, 1] + 1)
    np.testing.assert_array_equal(out.copy_to_host(), _HOST[:, 1] + 2)
    target = np.zeros(6)
    assert out.copy_to_host(target) is target
    np.testing.assert_array_equal(target, _HOST[:, 1] + 2)
    np.testing.assert_array_equal(np.asarray(h, dtype=np.float32), _HOST.astype(np.float32))
    with pytest.raises(ValueError, match="copy=False"):
        np.asarray(h, copy=False)


def test_reshaped_handles_share_memory(client):
    """A kernel writing a reshape of a handle changes the handle as NumPy's reshape view would."""
    h = client.create(_HOST)
    flat = h.reshape(-1)
    client.launch(add_one, 1, 64, flat, flat)
    np.testing.assert_array_equal(np.asarray(h), _HOST + 1)
    out = client.empty((3, 16))
    client.launch(scale_2d, (1, 1), (4, 16), h.reshape(3, 16), out)
    np.testing.assert_array_equal(np.asarray(out),
                                  2 * (_HOST + 1).reshape(3, 16) + np.arange(3)[:, None])


def test_n_d_views_are_launch_arguments(client):
    """h[::2, 1:3], h[None, :, 4] and h[..., ::-3] reach the kernel with their strides: it reads
    and writes NumPy's elements of the same views, and nothing else of the buffer."""
    h = client.create(_HOST)
    block = client.empty((3, 2))
    client.launch(scale_2d, (1, 1), (4, 4), h[::2, 1:3], block)
    np.testing.assert_array_equal(np.asarray(block), 2 * _HOST[::2, 1:3] + np.arange(3)[:, None])
    row = client.empty((1, 6))
    client.launch(scale_2d, (1, 1), (2, 8), h[None, :, 4], row)
    np.testing.assert_array_equal(np.asarray(row), 2 * _HOST[None, :, 4])
    client.launch(scale_2d, (1, 1), (8, 8), client.create(np.ones((6, 3))), h[..., ::-3])
    expected = _HOST.copy()
    expected[..., ::-3] = 2 + np.arange(6)[:, None]
    np.testing.assert_array_equal(np.asarray(h), expected)

