"""Kernels travelling to Dask workers: an importable kernel by reference (the same object), a
kernel defined in ``__main__`` or a notebook by value with its source, compiled and run on
worker processes with the same id; what is not a kernel is refused."""

from __future__ import annotations

import inspect
import pickle

import dask.array as da
import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
import numba_cube.dask as cubed
from numba_cube.dask.kernels import TravellingKernel

from kernels_for_tests import notebook_kernels


@cube.kernel
def copy(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


def test_an_importable_kernel_travels_by_reference():
    """A module-level kernel of an importable module unpickles as the very same kernel."""
    assert pickle.loads(pickle.dumps(TravellingKernel(copy))).kernel is copy


def test_a_notebook_kernel_runs_on_worker_processes_with_its_source(process_client):
    """A kernel from ``exec`` with a pseudo file name (no module, no file) reaches worker
    processes with its source: ``inspect.getsource`` finds it there, its id is the client's,
    and a chain of two such kernels gives NumPy's result."""
    kernels = notebook_kernels()
    travelling = TravellingKernel(kernels["axpy"])
    seen = process_client.gather(
        [process_client.submit(lambda t: (t.kernel.id, inspect.getsource(t.kernel.py_func)),
                               travelling, workers=[address], pure=False)
         for address in process_client.scheduler_info(n_workers=-1)["workers"]])
    for kernel_id, source in seen:
        assert kernel_id == kernels["axpy"].id
        assert source == inspect.getsource(kernels["axpy"].py_func)
    xn = np.arange(6000.0)
    x = da.from_array(xn, chunks=1500)
    z = cubed.map_blocks(kernels["square"], cubed.map_blocks(kernels["axpy"], 0.5, x, x), dim=64)
    np.testing.assert_array_equal(z.compute(), (1.5 * xn) ** 2)


def test_what_is_not_a_kernel_is_refused():
    """``TravellingKernel`` of a plain function is a ``TypeError`` naming what it got."""
    with pytest.raises(TypeError, match="function"):
        TravellingKernel(lambda x: x)
