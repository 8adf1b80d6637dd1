"""The tasks on the workers, when a chunk goes wrong: a kernel failing in one chunk reaches
``compute()`` naming the kernel, the chunk's index and the worker; a worker process killed by a
kernel (a real segfault) gives Dask's ``KilledWorker`` naming the kernel's task and the chunk,
and the cluster gets its worker back, set up for numba_cube again."""

from __future__ import annotations

import time

import dask
import dask.array as da
import dask.distributed
import numpy as np
import pytest
from distributed.scheduler import KilledWorker

import numba_cube as cube
import numba_cube.dask as cubed

from kernels_for_tests import notebook_kernels


def test_a_failing_chunk_names_the_kernel_the_chunk_and_the_worker(thread_client):
    """A negative value in chunk 2 of 4: ``compute()`` raises the kernel's ``LaunchFailure``
    (its id names the kernel, its root is the kernel's exception) with a note naming chunk
    ``(2,)`` of the kernel's array and the worker it ran on."""
    kernels = notebook_kernels()
    xn = np.arange(400.0)
    xn[250] = -1.0
    y = cubed.map_blocks(kernels["fail_on_negative"], da.from_array(xn, chunks=100), dim=64)
    with pytest.raises(cube.LaunchFailure) as caught:
        thread_client.compute(y).result()      # this cluster's, whichever client is the default
    failure = caught.value
    assert failure.kernel_id == kernels["fail_on_negative"].id
    assert failure.kernel_id.startswith("fail_on_negative")
    notes = [n for n in failure.__notes__ if "numba_cube.dask: chunk" in n]
    assert notes and "chunk (2,) of fail_on_negative-" in notes[0]
    workers = thread_client.scheduler_info(n_workers=-1)["workers"]
    assert any(address in notes[0] for address in workers)


def _allowed_failures(value=None, dask_scheduler=None):
    old = dask_scheduler.allowed_failures
    if value is not None:
        dask_scheduler.allowed_failures = value
    return old


def test_a_worker_killed_by_a_kernel_names_the_kernel_and_the_chunk(process_client):
    """A wild write (2**61 bytes past its buffer, bounds checks off: ``boundscheck=False``)
    segfaults the worker process running it. The scheduler retries a task whose worker died
    (``allowed-failures``, 0 here rather than Dask's 3, so one worker dies, not four), and the
    chunk's future raises ``KilledWorker`` naming the crashing task, whose key carries the
    kernel's name and the chunk's index. The nanny starts a new worker, the plugin gives it a
    client, and the next job gives NumPy's result on two workers."""
    kernels = notebook_kernels()
    xn = np.arange(400.0)
    xn[250] = -1.0
    # one chunk, (2,) of a slice: Dask counts every task a dying worker held as suspect, so
    # with more chunks the KilledWorker raised first may name one that merely waited there
    x = da.from_array(xn, chunks=100).blocks[2:3]
    # bounds checks (on by default) would turn the wild write into the kernel's IndexError
    cubed.setup(process_client, device="cpu", boundscheck=False)
    before = process_client.run_on_scheduler(_allowed_failures, 0)
    try:
        # persisted: the chunk's own task (compute() would fuse the one chunk with Dask's
        # finalize step into a task with no chunk index)
        chunk = process_client.persist(cubed.map_blocks(kernels["wild_write"], x, dim=64))
        with pytest.raises(KilledWorker) as caught:
            dask.distributed.wait(chunk)
            chunk.compute()
        message = str(caught.value)
        assert "wild_write-" in message and ", 0)" in message, message
        deadline = time.monotonic() + 60
        while len(process_client.scheduler_info(n_workers=-1)["workers"]) < 2:
            assert time.monotonic() < deadline, "the nanny did not bring the worker back"
            time.sleep(0.1)
        devices = cubed.setup(process_client, device="cpu", boundscheck=False)
        assert len(devices) == 2
        y = cubed.map_blocks(kernels["square"], da.from_array(np.arange(400.0), chunks=100))
        np.testing.assert_array_equal(y.compute(), np.arange(400.0) ** 2)
    finally:
        process_client.run_on_scheduler(_allowed_failures, before)
        cubed.setup(process_client, device="cpu")
