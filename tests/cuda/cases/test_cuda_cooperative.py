"""Kernels that synchronize their whole grid get a cooperative launch, never a plain one.

``cuda.cg.this_grid().sync()`` is only correct when every cube of the grid is resident at once;
numba-cuda launches such kernels cooperatively, and a plain launch would return wrong values
without an error. On a GPU the kernel must give NumPy's answer over many cubes; on the fake driver
the launch must be the cooperative driver call; under the simulator (whose grid group only syncs
one block) a grid of several cubes must be refused as a failure on the write set, not computed.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

from _cuda_setup import KIND


@cube.kernel
def rotate_after_grid_sync(x, out):
    # Phase 1 writes x; phase 2 reads a neighbour that another cube wrote: only a grid-wide
    # barrier between them makes the read see the write.
    i = cuda.grid(1)
    n = x.size
    if i < n:
        x[i] = i * 2.0
    cuda.cg.this_grid().sync()
    if i < n:
        out[i] = x[(i + 1) % n]


def expected(n):
    return np.roll(np.arange(n) * 2.0, -1)


def test_one_cube_grid_sync_matches_numpy(client, fake_api):
    """A grid of one cube computes NumPy's answer on every kind (and, on the fake driver, goes
    through ``cuLaunchCooperativeKernel``)."""
    n = 32
    x, out = client.empty(n), client.empty(n)
    before = fake_api.cooperative_launches if fake_api is not None else 0
    client.launch(rotate_after_grid_sync, 1, 32, x, out)
    np.testing.assert_array_equal(client.read(out), expected(n))
    if fake_api is not None:
        assert fake_api.cooperative_launches == before + 1


@pytest.mark.skipif(KIND != "gpu", reason="a grid of many resident cubes needs a GPU")
def test_many_cubes_grid_sync_matches_numpy(client):
    """Over 64 cubes (resident at once on any GPU) every unit reads what another cube wrote."""
    n = 64 * 128
    x, out = client.empty(n), client.empty(n)
    for _ in range(3):                      # the warm path too must launch cooperatively
        client.launch(rotate_after_grid_sync, 64, 128, x, out)
        np.testing.assert_array_equal(client.read(out), expected(n))


@pytest.mark.skipif(KIND != "sim", reason="the simulator's grid group syncs one block only")
def test_simulator_refuses_a_grid_of_several_cubes(client):
    """Several cubes under the simulator: a LaunchFailure that says why, on the write set."""
    x, out = client.empty(64), client.empty(64)
    client.launch(rotate_after_grid_sync, 2, 32, x, out)
    with pytest.raises(cube.LaunchFailure, match="COOPERATIVE_LAUNCH_TOO_LARGE"):
        client.read(out)
