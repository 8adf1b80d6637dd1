"""The classic kernels on the CUDA backend, against NumPy: one source, same answers.

Grids are small: under the simulator every unit is a Python thread.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

import numba_cube as cube

from _cuda_setup import KIND

TPB = 32


@cube.kernel
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cube.kernel
def block_sum(x, out):
    # Shared-memory tree reduction: one partial sum per cube.
    buf = cuda.shared.array(32, np.float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    step = 16
    while step > 0:
        if t < step:
            buf[t] += buf[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = buf[0]


@cube.kernel
def histogram(values, bins):
    i = cuda.grid(1)
    if i < values.size:
        cuda.atomic.add(bins, values[i], 1)


@cube.kernel
def scale_2d(m, factor, out):
    r, c = cuda.grid(2)
    if r < out.shape[0] and c < out.shape[1]:
        out[r, c] = m[r, c] * factor


@cube.kernel
def mixed_scalars(i32, f32, flag, z, out):
    # Scalars of several C types in one argument block (their packing is the packed launch's).
    if cuda.grid(1) == 0:
        out[0] = i32
        out[1] = f32
        out[2] = 1.0 if flag else -1.0
        out[3] = z.real
        out[4] = z.imag


def test_elementwise_matches_numpy(client):
    """axpy over handles equals NumPy's a*x + y."""
    n = 100
    x = np.linspace(0, 1, n)
    y = np.arange(n, dtype=np.float64)
    hx, hy, out = client.create(x), client.create(y), client.empty(n, np.float64)
    client.launch(axpy, (n + TPB - 1) // TPB, TPB, 3.0, hx, hy, out)
    np.testing.assert_allclose(client.read(out), 3.0 * x + y)


def test_shared_memory_reduction_with_syncthreads(client):
    """A reduction through cuda.shared and cuda.syncthreads gives NumPy's per-cube sums."""
    x = np.arange(96, dtype=np.float64)
    hx, out = client.create(x), client.create(np.zeros(3))
    client.launch(block_sum, 3, TPB, hx, out)
    np.testing.assert_allclose(client.read(out), x.reshape(3, 32).sum(axis=1))


def test_atomic_histogram(client):
    """cuda.atomic.add from many units loses no increment."""
    rng = np.random.default_rng(0)
    values = rng.integers(0, 8, size=96).astype(np.int64)
    hv, bins = client.create(values), client.create(np.zeros(8, np.int64))
    client.launch(histogram, 3, TPB, hv, bins)
    np.testing.assert_array_equal(client.read(bins), np.bincount(values, minlength=8))


def test_two_dimensional_grid(client):
    """2-D handles and a 2-D grid (cuda.grid(2)): shape and strides reach the kernel."""
    m = np.arange(6 * 10, dtype=np.float32).reshape(6, 10)
    hm, out = client.create(m), client.empty((6, 10), np.float32)
    client.launch(scale_2d, (2, 3), (4, 4), hm, np.float32(0.5), out)
    np.testing.assert_allclose(client.read(out), m * 0.5)


def test_scalar_types_reach_the_kernel(client):
    """int32, float32, bool and complex scalars arrive with their values."""
    out = client.create(np.zeros(5))
    client.launch(mixed_scalars, 1, 1, np.int32(-7), np.float32(2.5), True, 1.5 - 2j, out)
    np.testing.assert_allclose(client.read(out), [-7.0, 2.5, 1.0, 1.5, -2.0])


def test_views_bind_their_own_bytes(client):
    """A view h[a:b] binds its own bytes of the buffer (an offset, not a copy)."""
    n = 64
    x = client.create(np.arange(n, dtype=np.float64))
    y = client.create(np.ones(n))
    out = client.create(np.zeros(n))
    client.launch(axpy, 1, TPB, 2.0, x[16:48], y[0:32], out[32:64])
    expect = np.zeros(n)
    expect[32:64] = 2.0 * np.arange(16, 48) + 1.0
    np.testing.assert_allclose(client.read(out), expect)
    np.testing.assert_allclose(client.read(out[32:40]), expect[32:40])


def test_repeated_launches_reuse_the_bound_launch(client):
    """Warm launches of the same kernel on the same buffers compile nothing; new scalar values
    still reach the kernel each time."""
    n = 32
    x, y = client.create(np.ones(n)), client.create(np.zeros(n))
    out = client.empty(n, np.float64)
    client.launch(axpy, 1, TPB, 1.0, x, y, out)
    client.sync()
    compiles = client.server.stats["compiles"]
    for a in (2.0, 3.0, 4.0):
        client.launch(axpy, 1, TPB, a, x, y, out)
        np.testing.assert_allclose(client.read(out), np.full(n, a))
    assert client.server.stats["compiles"] == compiles


def test_numba_style_launch_with_host_arrays(client):
    """kernel[count, dim](numpy arrays) copies in, launches, copies the written arrays back."""
    x = np.arange(32, dtype=np.float64)
    out = np.zeros(32)
    with client:
        axpy[1, TPB](2.0, x, np.ones(32), out)
    np.testing.assert_allclose(out, 2.0 * x + 1.0)


def test_kind_is_known():
    """The case files know which mechanism they run on."""
    assert KIND in ("gpu", "sim", "fake")
