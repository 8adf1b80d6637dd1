"""The worker plugin: every worker gets its own numba_cube client, on a device of its own, and
tasks find it; code outside a set-up worker gets a typed error saying what to call."""

from __future__ import annotations

import dask.array as da
import pytest

import numba_cube.dask as cubed


def test_each_in_process_worker_gets_a_client_on_its_own_device(thread_client):
    """Two workers sharing one process get two CPU devices (two clients, two servers)."""
    devices = cubed.setup(thread_client, device="cpu")
    assert len(devices) == 2 and len(set(devices.values())) == 2
    assert all(d.startswith("cpu:") for d in devices.values())


def test_a_task_launches_on_its_workers_client(process_client):
    """A task's ``worker_client()`` is the client ``setup`` reported for the worker it ran on."""
    devices = cubed.setup(process_client, device="cpu")
    for address, device in devices.items():
        seen = process_client.submit(lambda: cubed.worker_client().device, workers=[address],
                                     allow_other_workers=False, pure=False).result()
        assert seen == device


def test_an_unknown_device_is_refused_at_setup():
    """``setup`` with a device no backend has raises the workers' ``BackendNotFound``; a
    numba_cube task on a worker left without a client raises that same cause (not "call
    setup"), noted with the worker."""
    import dask.array as da
    import numpy as np

    from kernels_for_tests import notebook_kernels

    from dask.distributed import Client, LocalCluster

    import numba_cube as cube

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        with pytest.raises(cube.BackendNotFound, match="no_such_backend"):
            cubed.setup(client, device="no_such_backend")
        x = da.from_array(np.arange(8.0), chunks=4)
        with pytest.raises(cube.BackendNotFound, match="no_such_backend") as caught:
            cubed.map_blocks(notebook_kernels()["square"], x).compute()
        assert any("could not make a numba_cube client on Dask worker" in note
                   for note in caught.value.__notes__)


def test_cuda_without_a_gpu_raises_the_real_cause_at_setup_and_in_tasks():
    """``device="cuda"`` where no CUDA device can be opened (no driver): ``setup`` raises the
    workers' ``BackendNotFound`` saying why, and a numba_cube task there raises it too, not
    "has no numba_cube client: call setup". Skipped where CUDA (or its simulator) works."""
    import dask.array as da
    import numpy as np
    from dask.distributed import Client, LocalCluster

    import numba_cube as cube

    from kernels_for_tests import notebook_kernels

    try:
        cube.client("cuda")
    except cube.BackendNotFound as error:
        why = str(error)
    else:
        pytest.skip("CUDA (a device or the simulator) is available here")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        with pytest.raises(cube.BackendNotFound) as at_setup:
            cubed.setup(client, device="cuda")
        assert str(at_setup.value) == why
        x = da.from_array(np.arange(8.0), chunks=4)
        with pytest.raises(cube.BackendNotFound) as in_task:
            client.compute(cubed.map_blocks(notebook_kernels()["square"], x)).result()
        assert str(in_task.value) == why
        assert "call" not in str(in_task.value)


def test_worker_client_outside_a_worker_is_a_typed_error():
    """``worker_client()`` in the client process: ``ClusterSetupError`` (a ``RuntimeError``)."""
    with pytest.raises(cubed.ClusterSetupError, match="Dask worker"):
        cubed.worker_client()
    assert issubclass(cubed.ClusterSetupError, RuntimeError)


def _numba_threads_and_an_njit_compile():
    import numba
    from numba import njit

    @njit
    def plus_one(a):
        return a + 1

    return numba.config.NUMBA_NUM_THREADS, plus_one(1)


def _set_env_after_numba_is_imported(threads: str) -> None:
    # what a nanny does with env= when the worker's process imported Numba first (a script that
    # imports numba_cube at its top, run as the spawned workers' __mp_main__)
    import os

    import numba  # noqa: F401

    os.environ["NUMBA_NUM_THREADS"] = threads


def test_numba_num_threads_set_late_in_a_worker_does_not_break_a_later_njit():
    """A worker process whose ``NUMBA_NUM_THREADS`` is set after it imported Numba, whose
    numba_cube kernel comes from the disk cache (no compile re-reads Numba's config) and
    launches Numba's thread pool: an ``@njit`` compiled afterwards in that worker works (it
    raised Numba's "Cannot set NUMBA_NUM_THREADS"), and Numba's count is the environment's."""
    import os

    import numpy as np
    from dask.distributed import Client, LocalCluster

    import numba_cube as cube
    from numba_cube.dask.demo import square      # importable: its compile is cached on disk

    size = 1 << 18                               # large enough for a parallel loop
    local = cube.client("cpu")
    out = local.empty(size, np.float64)
    local.launch(square, size // 256, 256, local.create(np.ones(size)), out)
    local.read(out)                              # compiled here: the worker loads it from disk
    threads = "1" if (os.cpu_count() or 1) > 1 else "2"
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        client.run(_set_env_after_numba_is_imported, threads)
        cubed.setup(client, device="cpu")
        x = da.ones(size, chunks=size)
        assert cubed.map_blocks(square, x).sum().compute() == size
        count, two = client.submit(_numba_threads_and_an_njit_compile, pure=False).result()
        assert (count, two) == (int(threads), 2)
