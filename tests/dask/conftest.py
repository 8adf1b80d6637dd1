"""Clusters for the ``numba_cube.dask`` tests: real ``LocalCluster``s, made once per session.

``thread_cluster`` has two in-process workers (``processes=False``: cheap to start; their two
clients are ``cpu:0`` and ``cpu:1``). ``process_cluster`` has two worker processes, each behind a
nanny, for what only separate processes show: kernels crossing a process boundary with their
source, handles serialized between workers, a worker killed mid-job. Both are set up with
``numba_cube.dask.setup(client, device="cpu")``. Skipped without the ``dask`` extra.
"""

from __future__ import annotations

import pytest

pytest.importorskip("distributed")
pytest.importorskip("dask.array")

from dask.distributed import Client, LocalCluster  # noqa: E402

import numba_cube.dask as cubed  # noqa: E402


def _cluster(processes: bool):
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=processes,
                           dashboard_address=":0")
    client = Client(cluster)
    cubed.setup(client, device="cpu")
    return cluster, client


@pytest.fixture(scope="session")
def thread_client():
    cluster, client = _cluster(processes=False)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="session")
def process_client():
    cluster, client = _cluster(processes=True)
    yield client
    client.close()
    cluster.close()
