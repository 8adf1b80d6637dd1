"""``numba_cube.dask`` with ``device="cuda"``: one worker owning the GPU, end to end.

Runs where a GPU is (the GPU machine); on a machine without one it is skipped, as the CUDA cases
are (``tests/cuda``). The chain of kernels keeps its chunks as CUDA handles in the worker's
memory, and what reaches ``compute()`` is NumPy's result.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("distributed")

import dask.array as da  # noqa: E402
from dask.distributed import Client, LocalCluster, wait  # noqa: E402
import numba_cube as cube  # noqa: E402
import numba_cube.dask as cubed  # noqa: E402
from numba_cube.backends.cuda.driver import probe  # noqa: E402

from chain_kernels import axpy, square  # noqa: E402

pytestmark = pytest.mark.skipif(probe.simulating() or probe.device_count() == 0,
                                reason="needs a GPU (a CUDA device, not the simulator)")


def test_one_cuda_worker_runs_a_chain_and_keeps_its_chunks_on_the_gpu():
    """A one-worker cluster set up with ``device="cuda"``: the worker's client is ``cuda:0``, the
    chained chunks are handles of that device, and the result equals NumPy's."""
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        devices = cubed.setup(client, device="cuda")
        assert list(devices.values()) == ["cuda:0"]
        xn = np.random.default_rng(3).standard_normal(1 << 16)
        x = da.from_array(xn, chunks=1 << 14)
        y = cubed.map_blocks(axpy, 2.0, x, x, dim=256)
        z = cubed.map_blocks(square, y, dim=256)
        np.testing.assert_allclose(z.compute(), (3.0 * xn) ** 2)
        persisted = client.persist(cubed.handles_of(z))
        wait(persisted)
        on = client.run(lambda dask_worker: sorted(
            {v.device for v in dask_worker.data.values() if isinstance(v, cube.Handle)}))
        assert list(on.values()) == [["cuda:0"]]       # the chunks are handles of the GPU
        del persisted
