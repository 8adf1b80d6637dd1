"""Handles under Dask's serialization: host bytes equal to the buffer's (C and F layouts), a
failed buffer travelling as its ``LaunchFailure``, and a failure crossing worker processes with
its root cause and the worker it happened on."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from distributed.protocol import deserialize, serialize

import numba_cube as cube
import numba_cube.dask as cubed
from numba_cube.dask.serialize import FailedChunk

from kernels_for_tests import notebook_kernels


@cube.kernel
def fail_into(x, out):
    out[0] = x[0]
    raise ValueError("injected")


@pytest.mark.parametrize("order", ["C", "F"])
def test_a_handle_serializes_to_its_bytes(order):
    """A handle becomes a NumPy array equal to ``client.read``'s, in its layout."""
    client = cube.client("cpu")
    host = np.asarray(np.arange(12.0).reshape(3, 4), order=order)
    handle = client.create(host)
    back = deserialize(*serialize(handle, serializers=["dask"]))
    assert isinstance(back, np.ndarray)
    np.testing.assert_array_equal(back, host)
    assert back.flags[f"{order}_CONTIGUOUS"]


def test_dask_sizes_a_handle_by_its_buffer():
    """``dask.sizeof`` of a handle is its buffer's bytes (what memory limits must count)."""
    from dask.sizeof import sizeof

    assert sizeof(cube.client("cpu").empty((100, 10), np.float32)) == 4000


def test_a_failed_handle_serializes_to_its_failure():
    """A handle whose buffer failed becomes a ``FailedChunk`` carrying the same
    ``LaunchFailure`` (root, kernel id): serializing it does not raise."""
    client = cube.client("cpu")
    out = client.empty(4, np.float64)
    client.launch(fail_into, 1, 1, client.create(np.ones(4)), out)
    back = deserialize(*serialize(out, serializers=["dask"]))
    assert isinstance(back, FailedChunk)
    assert back.failure.kernel_id == fail_into.id
    assert isinstance(back.failure.root, ValueError)


def test_a_failure_crossing_workers_keeps_its_root_cause(process_client):
    """The first kernel on one worker process fails; its chunks move to the other worker, where
    the second kernel runs: ``compute()`` raises the first kernel's ``LaunchFailure`` and says
    on which worker the buffer failed."""
    kernels = notebook_kernels()
    first, second = sorted(process_client.scheduler_info(n_workers=-1)["workers"])
    xn = np.arange(2000.0)
    xn[10] = -5.0
    x = da.from_array(xn, chunks=1000)
    with dask.annotate(workers=[first], allow_other_workers=False):
        y = cubed.map_blocks(kernels["fail_on_negative"], x, dim=128)
    with dask.annotate(workers=[second], allow_other_workers=False):
        z = cubed.map_blocks(kernels["square"], y, dim=128)
    with pytest.raises(cube.LaunchFailure) as caught:
        process_client.compute(z, optimize_graph=False).result()
    assert caught.value.kernel_id == kernels["fail_on_negative"].id
    assert isinstance(caught.value.root, ValueError)
    assert any(first in note for note in caught.value.__notes__)
