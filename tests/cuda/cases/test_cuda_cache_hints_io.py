"""Cache-hinted stores write their array: a numba-style launch copies it back (issue 30, item 3).

numba-cuda's ``cuda.stcg/stcs/stwb/stwt(array, index, value)`` store ``value`` at
``array[index]``; ``cuda.ldca/ldcg/ldcs/ldlu/ldcv(array, index)`` load ``array[index]``. A
numba-style launch ``k[count, dim](r, x)`` on host arrays copies back what the kernel writes, by
the IO analysis: if it took the store for a read, ``r`` would silently stay as it was (numba-cuda's
own ``test_cache_hints`` failed that way, every launch reporting success).

numba-cuda's simulator has no cache hints (``cuda.stcg`` is None there and its kernel module has
no such attribute), so on the simulator and the fake driver (which runs kernels on the
simulator's machinery) the ``hints`` fixture gives the simulator's kernel module the documented
semantics above; on a GPU they are the real instructions. The answers are checked against NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

from _cuda_setup import KIND

# Host arrays are the point here: numba's warning about their copies is expected.
pytestmark = pytest.mark.filterwarnings("ignore:Host array used in CUDA kernel")

STORES = ("stcg", "stcs", "stwb", "stwt")
LOADS = ("ldca", "ldcg", "ldcs", "ldlu", "ldcv")


@pytest.fixture
def hints(monkeypatch):
    """The cache hints on the simulator's kernel module (numba-cuda's semantics, no caching)."""
    if KIND in ("sim", "fake"):
        from numba.cuda.simulator.kernelapi import FakeCUDAModule

        for name in STORES:
            monkeypatch.setattr(FakeCUDAModule, name,
                                lambda self, array, i, value: array.__setitem__(i, value),
                                raising=False)
        for name in LOADS:
            monkeypatch.setattr(FakeCUDAModule, name, lambda self, array, i: array[i],
                                raising=False)


@cube.kernel
def store_cg(r, x):
    cuda.stcg(r, 0, x[0])


@cube.kernel
def store_cs(r, x):
    cuda.stcs(r, 0, x[0])


@cube.kernel
def store_wb(r, x):
    cuda.stwb(r, 0, x[0])


@cube.kernel
def store_wt(r, x):
    cuda.stwt(r, 0, x[0])


@cube.kernel
def store_through_local_alias(r, x):
    store = cuda.stcg
    store(r, 0, x[0])


@cube.kernel
def hinted_copy_2d(r, x):
    i, j = cuda.grid(2)
    if i < r.shape[0] and j < r.shape[1]:
        cuda.stwt(r, (i, j), cuda.ldcs(x, (i, j)) * 2)


@pytest.mark.parametrize("kernel", [store_cg, store_cs, store_wb, store_wt,
                                    store_through_local_alias], ids=lambda k: k.name)
def test_numba_style_launch_copies_back_a_hinted_store(client, hints, kernel):
    """``k[1, 1](r, x)`` on host arrays with ``cuda.st*(r, 0, x[0])`` (spelled directly or
    through a local alias of ``cuda.stcg``) leaves ``x[0]`` in ``r[0]``; ``r`` is a pure output
    and ``x`` only read."""
    r = np.zeros(1)
    x = np.array([7.5])
    assert kernel.io(r, x) == {"r": "w", "x": "r"}
    with client:
        kernel[1, 1](r, x)
    np.testing.assert_array_equal(r, x)
    np.testing.assert_array_equal(x, [7.5])


def test_numba_style_launch_copies_back_2d_hinted_loads_and_stores(client, hints):
    """A 2-D ``cuda.stwt(r, (i, j), cuda.ldcs(x, (i, j)) * 2)`` over a grid: ``r`` comes back
    equal to NumPy's ``2 * x``, ``x`` unchanged."""
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    r = np.zeros_like(x)
    with client:
        hinted_copy_2d[(1, 1), (4, 6)](r, x)
    np.testing.assert_array_equal(r, 2 * np.arange(24, dtype=np.float32).reshape(4, 6))
    np.testing.assert_array_equal(x, np.arange(24, dtype=np.float32).reshape(4, 6))


def test_handle_launch_of_a_hinted_store_orders_the_read(client, hints):
    """With ``client.launch`` on handles, the stored handle reads back the stored value (the
    store is in the launch's write set, so the read waits for it)."""
    r = client.create(np.zeros(1))
    x = client.create(np.array([3.25]))
    client.launch(store_cg, 1, 1, r, x)
    np.testing.assert_array_equal(client.read(r), [3.25])
