"""The worker plugin: every worker gets its own numba_cube client, on a device of its own, and
tasks find it; code outside a set-up worker gets a typed error saying what to call."""

from __future__ import annotations

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


def test_worker_client_outside_a_worker_is_a_typed_error():
    """``worker_client()`` in the client process: ``ClusterSetupError`` (a ``RuntimeError``)."""
    with pytest.raises(cubed.ClusterSetupError, match="Dask worker"):
        cubed.worker_client()
    assert issubclass(cubed.ClusterSetupError, RuntimeError)
