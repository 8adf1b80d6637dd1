"""Buffers a worker thread reuses between chunks (``numba_cube/dask/staging.py``): a staged
input's new contents never reach a launch issued before, an output buffer something still holds
is never handed out again, large chunks are not pooled, and end to end (a persisted chain, a
kernel reading its own output after a failed chunk) every value is NumPy's."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
import numba_cube.dask as cubed
from numba_cube.dask import staging
from numba_cube.dask.blocks import refuse_bad_access
from numba_cube.dask.tasks import read_block
from chain_kernels import axpy, square


@cube.kernel
def doubled_unless_negative(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]
        if x[i] < 0.0:
            raise ValueError("negative input")
        out[i] = out[i] * 2.0          # reads its output: not a pure output, never pooled


def test_a_staged_input_rewritten_does_not_change_an_earlier_launch():
    """A launch reading the staged buffer, then the buffer rewritten with the next chunk (the
    same handle): the earlier launch's output holds the earlier chunk's result."""
    client = cube.client("cpu")
    first, second = np.arange(64.0), np.full(64, 100.0)
    staged = staging.staged_input(client, "test-owner", 0, first)
    out = client.empty(64, np.float64)
    client.launch(axpy, 1, 64, 2.0, staged, staged, out)
    assert staging.staged_input(client, "test-owner", 0, second) is staged
    np.testing.assert_array_equal(client.read(out), 3.0 * first)
    np.testing.assert_array_equal(client.read(staged), second)


def test_an_output_still_held_is_not_handed_out_again():
    """The pooled output comes back only once nothing else holds it; a large one is never
    pooled."""
    client = cube.client("cpu")
    dtype = np.dtype(np.float64)
    held = staging.pooled_output(client, "test-owner", 0, (32,), dtype)
    other = staging.pooled_output(client, "test-owner", 0, (32,), dtype)
    assert other is not held
    other_id = id(other)
    del other
    again = staging.pooled_output(client, "test-owner", 0, (32,), dtype)
    assert id(again) == other_id and again is not held
    big = (staging.MAX_POOLED_BYTES // 8 + 1,)
    staging.pooled_output(client, "test-owner", 0, big, dtype)
    assert not any(big in key for key in staging._pool())


def test_an_exposed_output_is_never_reused_even_when_only_a_view_holds_it():
    """A view holds the buffer, not the handle it came from: once user code had the handle
    (``expose``, what ``handles_of`` does), dropping the handle while a view lives does not
    free it for reuse, and the view keeps its values."""
    client = cube.client("cpu")
    dtype = np.dtype(np.float64)
    handle = staging.pooled_output(client, "test-exposed", 0, (8,), dtype)
    client.write(handle, np.arange(8.0))
    view = staging.expose(handle)[2:]
    del handle
    fresh = staging.pooled_output(client, "test-exposed", 0, (8,), dtype)
    client.write(fresh, np.full(8, -1.0))
    np.testing.assert_array_equal(client.read(view), np.arange(2.0, 8.0))


def test_a_persisted_chain_keeps_its_chunks_while_later_chunks_reuse_buffers(thread_client):
    """The first kernel's handle chunks persisted (Dask holds them), then a second kernel over
    them, and the first kernel again over the same shapes (its pooled buffers are the persisted
    chunks: held, so not reused), computed twice; then the persisted chunks read: every value
    NumPy's."""
    xn = np.random.default_rng(10).standard_normal(800)
    x = da.from_array(xn, chunks=100)
    y = cubed.map_blocks(axpy, 2.0, x, x, dim=64)
    kept = thread_client.persist(cubed.handles_of(y))
    dask.distributed.wait(kept)
    z = cubed.map_blocks(square, y, dim=64)
    for _ in range(2):
        np.testing.assert_array_equal(thread_client.compute(z).result(), (3.0 * xn) ** 2)
        other = cubed.map_blocks(square, x, dim=64)
        np.testing.assert_array_equal(thread_client.compute(other).result(), xn * xn)
        again = cubed.map_blocks(axpy, 1.0, x, x, dim=64)
        np.testing.assert_array_equal(thread_client.compute(again).result(), 2.0 * xn)
    chunks = thread_client.compute(kept.map_blocks(
        lambda h: read_block("kept", h, (0,)), dtype=y.dtype)).result()
    np.testing.assert_array_equal(chunks, 3.0 * xn)


def test_only_pure_outputs_are_pooled():
    """The decision ``map_blocks`` hands its tasks: a kernel that reads its output (a failed
    chunk left in a reused buffer would then fail the next chunk's launch) is not a pure
    output; one that only writes it is."""
    x = da.from_array(np.arange(4.0), chunks=2)
    assert refuse_bad_access(square, (x,), 1) is True
    assert refuse_bad_access(doubled_unless_negative, (x,), 1) is False


def test_a_kernel_reading_its_output_after_a_failed_chunk(thread_client):
    """A kernel that reads its output fails in one chunk; later computes of the same shapes on
    the same worker threads give NumPy's values."""
    bad = da.from_array(np.array([1.0, -1.0, 2.0, 3.0]), chunks=4)
    with pytest.raises(cube.LaunchFailure):
        thread_client.compute(cubed.map_blocks(doubled_unless_negative, bad)).result()
    good = np.arange(4.0)
    for _ in range(4):
        result = thread_client.compute(cubed.map_blocks(
            doubled_unless_negative, da.from_array(good, chunks=4))).result()
        np.testing.assert_array_equal(result, 2.0 * good)
