"""Strided launch arguments on the CPU backend (backends/cpu/server.py views, runtime cache keys).

A kernel launched on an F-ordered, transposed, stepped, reversed or broadcast view must see
exactly the elements NumPy's same view holds, and write exactly those: the backend views the
binding with its strides and compiles for the layout ``numba.typeof`` gives that view (never for
C over bytes that are not C-ordered, also when the same kernel ran on a C handle first).
Expectations are NumPy's.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest
from numba import cuda

import numba_cube as cube


@pytest.fixture(scope="module")
def client():
    return cube.client("cpu")


@cube.kernel
def affine_2d(a, out):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        out[i, j] = 3.0 * a[i, j] + i - j


@cube.kernel
def negate_3d(a):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        for k in range(a.shape[2]):
            a[i, j, k] = -a[i, j, k]


def _expected_affine(a: np.ndarray) -> np.ndarray:
    i, j = np.indices(a.shape)
    return 3.0 * a + i - j


_HOST = np.arange(6 * 8, dtype=np.float64).reshape(6, 8)


@pytest.mark.parametrize("make", [
    lambda c, h: c.create(np.asfortranarray(h)),
    lambda c, h: c.create(np.ascontiguousarray(h.T)).strided_view(0, h.shape, (8, 48)),
    lambda c, h: c.create(h)[:, :],
    lambda c, h: c.create(np.repeat(h, 2, axis=0))[::2],
    lambda c, h: c.create(h[::-1])[::-1],
    lambda c, h: c.create(np.asfortranarray(np.vstack([h, h])))[:6],
], ids=["F", "transpose", "C", "step", "reversed", "rows-of-F"])
def test_kernels_read_strided_views_like_numpy(client, make):
    """A kernel reading a view of every layout computes NumPy's result over the same values, C
    output first, then into an F output; the layouts go to the compile as numba types them."""
    a = make(client, _HOST)
    np.testing.assert_array_equal(client.read(a), _HOST)       # the view holds _HOST
    for order in ("C", "F"):
        out = client.empty(_HOST.shape, order=order)
        client.launch(affine_2d, (1, 1), (8, 8), a, out)
        result = client.read(out)
        np.testing.assert_array_equal(result, _expected_affine(_HOST))
        assert result.flags.f_contiguous == (order == "F")


def test_one_kernel_on_c_then_f_then_strided(client):
    """The same kernel launched on a C handle, then on an F one and a column view of the same
    dtype and rank, is right every time: the compile and plan caches tell the layouts apart."""
    host = np.arange(24.0).reshape(4, 6)
    for h in (client.create(host), client.create(np.asfortranarray(host)),
              client.create(np.repeat(host, 2, axis=1))[:, ::2]):
        out = client.empty(host.shape)
        client.launch(affine_2d, (1, 1), (8, 8), h, out)
        np.testing.assert_array_equal(client.read(out), _expected_affine(host))


def test_writes_through_strided_views_touch_only_their_elements(client):
    """A kernel writing a 3-D view (a step, a reversed axis, a transpose) changes exactly the
    elements NumPy's same view holds."""
    host = np.arange(4 * 6 * 5, dtype=np.float32).reshape(4, 6, 5)
    h = client.create(host)
    view = h[1:, ::-2, ::2]
    client.launch(negate_3d, (1, 1), (8, 8), view)
    expected = host.copy()
    sub = expected[1:, ::-2, ::2]
    sub *= -1
    np.testing.assert_array_equal(client.read(h), expected)
    f = client.create(np.asfortranarray(host))
    client.launch(negate_3d, (1, 1), (8, 8), f)
    np.testing.assert_array_equal(client.read(f), -host)


@cube.kernel
def row_sums(a, out):
    i = cuda.grid(1)
    if i < out.size:
        s = 0.0
        for j in range(a.shape[1]):
            s += a[i, j]
        out[i] = s


def test_broadcast_views_read_their_one_copy(client):
    """A stride-0 view reads NumPy's broadcast of its element row; the backend types it as
    numba.typeof types np.broadcast_to of the same row."""
    row = np.arange(7.0)
    h = client.create(row)
    b = h.strided_view(0, (5, 7), (0, 8))
    assert b.layout == numba.typeof(np.broadcast_to(row, (5, 7))).layout
    out = client.empty(5)
    client.launch(row_sums, 1, 32, b, out)
    np.testing.assert_array_equal(client.read(out), np.broadcast_to(row, (5, 7)).sum(axis=1))


def test_a_failure_on_a_strided_view_reaches_readers_of_its_bytes():
    """A launch that fails while writing a column view records its failure over the column's
    bytes: a read of the column, and of the whole buffer holding it, raises it."""
    checked = cube.client("cpu", boundscheck=True)

    @cube.kernel
    def write_past(a):
        i = cuda.grid(1)
        if i < 4:
            a[i + 10] = 1.0

    h = checked.create(np.zeros((4, 3)))
    column = h[:, 1]
    checked.launch(write_past, 1, 4, column)
    with pytest.raises(cube.LaunchFailure):
        checked.read(column)
    with pytest.raises(cube.LaunchFailure):
        checked.read(h)
