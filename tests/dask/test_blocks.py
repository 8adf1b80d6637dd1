"""``numba_cube.dask.map_blocks``: a kernel per chunk, results equal to NumPy's, chunks kept as
handles on their worker between kernels, failures reaching ``compute()`` with their root cause,
and a worker killed mid-job losing nothing."""

from __future__ import annotations

import os
import time

import dask
import dask.array as da
import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
import numba_cube.dask as cubed
from numba_cube.dask.graph import LAUNCH_INFIX, launch_handles

from kernels_for_tests import notebook_kernels
from chain_kernels import axpy, square


@cube.kernel
def fail_on_negative(x, out):
    i = cuda.grid(1)
    if i < out.size:
        if x[i] < 0.0:
            raise ValueError("negative input")
        out[i] = x[i]


@cube.kernel
def scale_in_place(x, out):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= 2.0
        out[i] = x[i]


@cube.kernel
def forgot_store(x, out):
    i = cuda.grid(1)
    if i < x.size:
        doubled = 2.0 * x[i]       # never stored: out is left as allocated  # noqa: F841


@cube.kernel
def reads_output_only(x, out):
    i = cuda.grid(1)
    if i < x.size:
        total = out[i] + x[i]      # the store into out[i] forgotten  # noqa: F841


@cube.kernel
def transpose_add(x, y, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = x[i, j] + 2.0 * y[i, j]


def test_a_chain_of_kernels_equals_numpy_and_computes_to_numpy(thread_client):
    """Two kernels mapped over a chunked array give NumPy's result, as a NumPy array, and Dask's
    own operations (a sum) run on the result."""
    xn = np.random.default_rng(0).standard_normal(5000)
    x = da.from_array(xn, chunks=1000)
    y = cubed.map_blocks(axpy, 2.0, x, x, dim=128)
    z = cubed.map_blocks(square, y, dim=128)
    result = z.compute()
    assert isinstance(result, np.ndarray)
    np.testing.assert_array_equal(result, (2.0 * xn + xn) ** 2)
    np.testing.assert_allclose(z.sum().compute(), ((2.0 * xn + xn) ** 2).sum())


def test_chunks_between_kernels_stay_handles_in_worker_memory(thread_client):
    """The second kernel's tasks take the first's handle chunks, not their host reads; those
    chunks are numba_cube Handles held in the workers' memory."""
    x = da.from_array(np.arange(4000.0), chunks=1000)
    y = cubed.map_blocks(axpy, 1.0, x, x, dim=256)
    z = cubed.map_blocks(square, y, dim=256)
    z_handles = launch_handles(z)
    y_handles = launch_handles(y)
    assert LAUNCH_INFIX in z_handles.name
    assert z_handles.dask.dependencies[z_handles.name] == {y_handles.name}
    persisted = thread_client.persist(z_handles)
    dask.distributed.wait(persisted)
    kinds = thread_client.run(lambda dask_worker: sorted(
        {type(v).__name__ for k, v in dask_worker.data.items()
         if isinstance(k, tuple) and k[0] == z_handles.name}))
    assert {kind for found in kinds.values() for kind in found} == {"Handle"}
    del persisted


def test_a_chunk_moving_to_another_workers_device_keeps_its_values(thread_client):
    """The first kernel on one in-process worker (``cpu:0``), the second on the other (its own
    device): the chunks cross devices and the result is still NumPy's."""
    first, second = sorted(thread_client.scheduler_info(n_workers=-1)["workers"])
    xn = np.arange(3000.0)
    x = da.from_array(xn, chunks=1000)
    with dask.annotate(workers=[first], allow_other_workers=False):
        y = cubed.map_blocks(axpy, 2.0, x, x, dim=128)
    with dask.annotate(workers=[second], allow_other_workers=False):
        z = cubed.map_blocks(square, y, dim=128)
    result = thread_client.compute(z, optimize_graph=False).result()
    np.testing.assert_array_equal(result, (3.0 * xn) ** 2)


def test_two_dimensional_chunks_with_a_count_per_chunk(thread_client):
    """A 2-D kernel gets each chunk with its shape; ``count(shape)`` sizes its grid."""
    xn = np.arange(60.0 * 40).reshape(60, 40)
    x = da.from_array(xn, chunks=(25, 15))
    out = cubed.map_blocks(transpose_add, x, xn, dim=(8, 8),
                           count=lambda shape: ((shape[0] + 7) // 8, (shape[1] + 7) // 8))
    np.testing.assert_array_equal(out.compute(), xn + 2.0 * xn)


def test_the_failure_reaching_compute_names_the_kernel_that_failed_first(thread_client):
    """A chunk whose first kernel failed makes ``compute()`` raise that kernel's
    ``LaunchFailure``: its root cause, its kernel id, and the chain through the next kernel."""
    xn = np.arange(3000.0)
    xn[1500] = -1.0
    x = da.from_array(xn, chunks=1000)
    z = cubed.map_blocks(square, cubed.map_blocks(fail_on_negative, x, dim=256), dim=256)
    with pytest.raises(cube.LaunchFailure) as caught:
        z.compute()
    failure = caught.value
    assert failure.kernel_id == fail_on_negative.id
    assert isinstance(failure.root, ValueError) and "negative input" in str(failure.root)
    assert failure.chain[0].startswith("fail_on_negative") and len(failure.chain) == 2
    assert any("Dask worker" in note for note in failure.__notes__)


def test_a_wild_read_on_worker_processes_fails_the_job_and_keeps_the_workers(process_client):
    """A chunk kernel reading 10^9 past its input on worker processes, with default settings
    (issue 30: it used to kill both workers, ``KilledWorker`` naming no kernel, the cluster left
    with none): ``compute()`` raises the kernel's ``LaunchFailure`` whose root is the
    ``IndexError`` naming the kernel and the array; the cluster keeps the same two workers (none
    died and was restarted), and a correct job on it still gives NumPy's result."""
    kernels = notebook_kernels()
    workers = set(process_client.scheduler_info(n_workers=-1)["workers"])
    assert len(workers) == 2
    xn = np.arange(4000.0)
    x = da.from_array(xn, chunks=1000)
    with pytest.raises(cube.LaunchFailure) as caught:
        cubed.map_blocks(kernels["wild_read"], x, dim=256).compute()
    root = caught.value.root
    assert isinstance(root, IndexError)
    assert str(root).startswith("kernel wild_read: x[1000000999] out of bounds for axis 0")
    assert set(process_client.scheduler_info(n_workers=-1)["workers"]) == workers
    y = cubed.map_blocks(kernels["square"], x, dim=256)
    np.testing.assert_array_equal(y.compute(), xn * xn)
    assert set(process_client.scheduler_info(n_workers=-1)["workers"]) == workers


def test_a_kernel_writing_its_input_is_refused():
    """Chunks are Dask's shared values: a kernel that writes an input is refused at
    ``map_blocks`` with a ``LaunchArgumentError`` naming the parameter."""
    x = da.from_array(np.arange(100.0), chunks=50)
    with pytest.raises(cube.LaunchArgumentError, match="'x'"):
        cubed.map_blocks(scale_in_place, x)


@pytest.mark.parametrize("kernel", [forgot_store, reads_output_only], ids=lambda k: k.name)
def test_a_kernel_that_never_writes_its_output_is_refused_on_the_client(thread_client, kernel):
    """The last parameter is the output ``map_blocks`` makes per chunk. A kernel that provably
    never writes it (not touched, or only read) would give chunks of the new buffer as
    allocated with no failure anywhere (the launch itself succeeds on the worker), so it is
    refused at ``map_blocks`` with a ``LaunchArgumentError`` naming the kernel and the
    parameter; a kernel that does write it, on the same cluster, computes NumPy's result."""
    xn = np.arange(200.0)
    x = da.from_array(xn, chunks=50)
    with pytest.raises(cube.LaunchArgumentError, match=f"{kernel.name}.*'out'"):
        cubed.map_blocks(kernel, x)
    np.testing.assert_array_equal(cubed.map_blocks(square, x).compute(), xn * xn)


def test_arguments_that_do_not_fit_the_kernel_are_refused():
    """One argument too many or too few (the output is made per chunk), arrays of different
    shapes, or no array at all: ``LaunchArgumentError`` at the call."""
    x = da.from_array(np.arange(100.0), chunks=50)
    with pytest.raises(cube.LaunchArgumentError, match="expected 3"):
        cubed.map_blocks(axpy, 2.0, x, x, x)
    with pytest.raises(cube.LaunchArgumentError, match="shapes"):
        cubed.map_blocks(axpy, 2.0, x, da.from_array(np.arange(10.0), chunks=5))
    with pytest.raises(cube.LaunchArgumentError, match="array"):
        cubed.map_blocks(square, 2.0)


async def _exit_now():
    # a coroutine function: what client.run(..., wait=False) accepts; the process dies unclean
    os._exit(1)


def test_a_worker_killed_mid_job_loses_nothing(process_client):
    """Killing a worker process while a job runs: Dask recomputes the lost chunks from their
    lineage (the nanny restarts the worker, the plugin gives it a client again), and the result
    still equals NumPy's."""
    kernels = notebook_kernels()
    xn = np.random.default_rng(1).standard_normal(24 * 4000)
    x = da.from_array(xn, chunks=4000)
    y = cubed.map_blocks(kernels["slow_sum_of_powers"], x, dim=256)
    z = cubed.map_blocks(kernels["square"], y, dim=256)
    future = process_client.compute(z)
    deadline = time.monotonic() + 60
    victim = None
    while victim is None and time.monotonic() < deadline:
        # kill a worker once it holds a finished chunk of the job: that chunk is then lost
        for address, keys in process_client.has_what().items():
            if any(LAUNCH_INFIX in str(k) for k in keys):
                victim = address
                break
        time.sleep(0.01)
    assert victim is not None and not future.done()
    process_client.run(_exit_now, workers=[victim], wait=False)
    result = future.result(timeout=120)
    assert victim not in process_client.scheduler_info(n_workers=-1)["workers"]
    k = np.arange(2000.0)
    expected = np.concatenate([((part[:, None] * 0.999) ** 2 / (k + 1.0)).sum(axis=1)
                               for part in np.split(xn, 24)]) ** 2
    np.testing.assert_allclose(result, expected, rtol=1e-12)


@cube.kernel
def first_two(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


@cube.kernel
def row_sums(x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        acc = 0.0
        for j in range(x.shape[1]):
            acc += x[i, j]
        out[i] = acc


@cube.kernel
def spread(x, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = x[i] * (j + 1)


@cube.kernel
def truncate(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


@cube.kernel
def split_signs(x, negative, positive):
    i = cuda.grid(1)
    if i < x.size:
        negative[i] = min(x[i], 0.0)
        positive[i] = max(x[i], 0.0)


def test_chunks_gives_each_output_chunk_its_shape(thread_client):
    """``chunks=(2,)``: every output chunk has 2 elements, the first two of its input chunk, as
    ``dask.array.map_blocks`` of the NumPy equivalent gives."""
    xn = np.arange(23.0)
    x = da.from_array(xn, chunks=5)
    ours = cubed.map_blocks(first_two, x, chunks=(2,), dim=32)
    plain = da.map_blocks(lambda b: b[:2], x, chunks=(2,))
    assert ours.chunks == plain.chunks == ((2,) * 5,)
    np.testing.assert_array_equal(ours.compute(), plain.compute())


def test_drop_axis_gives_the_kernel_whole_rows(thread_client):
    """``drop_axis=1`` over an array chunked along axis 1 too: each launch gets whole rows (Dask
    concatenates along a dropped axis; here the input is made one chunk along it) and the
    result is NumPy's row sums (integer-valued floats: exact in any order)."""
    xn = np.arange(12.0 * 10).reshape(12, 10)
    x = da.from_array(xn, chunks=(5, 4))
    out = cubed.map_blocks(row_sums, x, drop_axis=1, dim=8)
    assert out.shape == (12,) and out.chunks == ((5, 5, 2),)
    np.testing.assert_array_equal(out.compute(), xn.sum(axis=1))


def test_new_axis_with_its_chunks(thread_client):
    """``new_axis=1`` with ``chunks`` giving its size: a 2-D output of NumPy's values."""
    xn = np.arange(9.0)
    x = da.from_array(xn, chunks=4)
    out = cubed.map_blocks(spread, x, new_axis=1, chunks=(x.chunks[0], 3), dim=(4, 4),
                           count=lambda shape: ((shape[0] + 3) // 4, 1))
    assert out.chunks == ((4, 4, 1), (3,))
    np.testing.assert_array_equal(out.compute(), xn[:, None] * np.arange(1, 4))


def test_dtype_and_meta_set_the_output_dtype(thread_client):
    """``dtype=`` (or a NumPy ``meta=``) is the output's dtype: the kernel's stores convert to
    it as NumPy's ``astype`` does; a meta that is not a NumPy array is refused."""
    xn = np.linspace(-3.7, 5.2, 17)
    x = da.from_array(xn, chunks=6)
    as_int = cubed.map_blocks(truncate, x, dtype=np.int32)
    assert as_int.dtype == np.int32
    np.testing.assert_array_equal(as_int.compute(), xn.astype(np.int32))
    as_f32 = cubed.map_blocks(truncate, x, meta=np.empty((0,), np.float32))
    assert as_f32.dtype == np.float32 and as_f32.compute().dtype == np.float32
    np.testing.assert_array_equal(as_f32.compute(), xn.astype(np.float32))
    with pytest.raises(cube.LaunchArgumentError, match="meta"):
        cubed.map_blocks(truncate, x, meta=[])


def test_several_outputs_share_one_launch_per_chunk(thread_client):
    """``outputs=2``: a tuple of two arrays, each NumPy's, from one launch per chunk (the graph
    computing both has one launch task per chunk)."""
    xn = np.random.default_rng(2).standard_normal(40)
    x = da.from_array(xn, chunks=15)
    negative, positive = cubed.map_blocks(split_signs, x, outputs=2, dtype=[np.float64,
                                                                           np.float32])
    assert positive.dtype == np.float32
    got_negative, got_positive = dask.compute(negative, positive)
    np.testing.assert_array_equal(got_negative, np.minimum(xn, 0.0))
    np.testing.assert_array_equal(got_positive, np.maximum(xn, 0.0).astype(np.float32))
    graph = {**dict(negative.dask), **dict(positive.dask)}
    assert len([k for k in graph if "split_signs-launches-" in k[0]]) == 3
    with pytest.raises(cube.LaunchArgumentError, match="outputs"):
        cubed.map_blocks(split_signs, x, outputs=3)
