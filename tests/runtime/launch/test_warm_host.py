"""The warm launch of host backends (``runtime/launch/warm_host.py``), on the real CPU backend.

What it pins: a repeated launch takes the warm path and computes what NumPy computes, with each
launch's own scalars; a failure on an input, a failure of the kernel itself and a repair behave
as on the general path (CONTRACT.md section 4); a kernel that runs long is queued to a stream
worker rather than run on the issuing thread; a repeated launch behind work of its own stream
that is not done is warm too, queued behind it in order, and inherits a failure that work
records after the launch was issued; freeing a buffer drops the launches armed on it.
Concurrency (random programs from several threads, inline and queued) is pinned by
``test_dependencies_property.py``, which runs the CPU backend both ways.
"""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube import LaunchFailure


@cube.kernel
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cube.kernel
def poke(k, out):
    # with boundscheck, an index past the end is an IndexError: the kernel's own failure
    i = cuda.grid(1)
    if i == 0:
        out[k] = 1.0


def _client_with(index: int, **env):
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return cube.client(f"cpu:{index}", boundscheck=True)
    finally:
        for k, v in saved.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def client():
    return _client_with(31)


def test_repeated_launches_take_the_warm_path_with_their_own_scalars(client):
    """After the first launch, identical launches (same handles, scalar types, geometry, stream)
    are warm; each computes with its own scalar, as NumPy does."""
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(64), rng.standard_normal(64)
    hx, hy, hout = client.create(x), client.create(y), client.create(np.zeros(64))
    before = client.server.stats["warm"]
    for a in (1.0, 2.5, -3.0, 0.5):
        client.launch(axpy, 2, 32, a, hx, hy, hout)
        np.testing.assert_array_equal(client.read(hout), a * x + y)
    assert client.server.stats["warm"] - before == 3


def test_a_warm_launch_that_fails_records_it_and_a_relaunch_repairs(client):
    """The kernel's own failure on a warm launch is a LaunchFailure on its write set, naming
    it; the next good launch (of the same kernel and buffers) repairs the buffer."""
    out = client.create(np.zeros(4))
    client.launch(poke, 1, 1, 2, out)
    client.launch(poke, 1, 1, 3, out)                   # warm
    np.testing.assert_array_equal(client.read(out), [0, 0, 1, 1])
    client.launch(poke, 1, 1, 9, out)                   # warm, and out of bounds
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    assert info.value.kernel_id == poke.id
    assert isinstance(info.value.root, IndexError)
    client.launch(poke, 1, 1, 0, out)                   # repairs
    np.testing.assert_array_equal(client.read(out), [1, 0, 1, 1])


def test_an_input_that_carries_a_failure_is_inherited(client):
    """A warm-armed launch whose input carries a failure is skipped and inherits its root cause,
    as on the general path."""
    x, out = client.create(np.ones(32)), client.create(np.zeros(32))
    client.launch(axpy, 1, 32, 1.0, x, x, out)
    client.launch(axpy, 1, 32, 1.0, x, x, out)          # armed and warm
    client.launch(poke, 1, 1, 99, x)                    # x now carries a failure
    client.launch(axpy, 1, 32, 1.0, x, x, out)
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    assert info.value.kernel_id == poke.id              # the root cause, first in the chain
    assert info.value.chain == (poke.id, axpy.id)
    assert isinstance(info.value.root, IndexError)


def test_a_long_kernel_is_queued_to_a_stream_worker():
    """With the inline limit at 0 (``NUMBA_CUBE_INLINE_US=0``) launches are queued to a stream
    worker: right after the launch its stream still has the task; the results are unchanged."""
    client = _client_with(32, NUMBA_CUBE_INLINE_US="0")
    x, out = client.create(np.arange(32.0)), client.create(np.zeros(32))
    for a in (1.0, 2.0):
        client.launch(axpy, 1, 32, a, x, x, out)
        assert not client.server.streams.idle(client.stream_id)
        np.testing.assert_array_equal(client.read(out), (a + 1) * np.arange(32.0))
    assert client.server.stats["warm"] == 1


@cube.kernel
def scale_add(a, x, acc):
    i = cuda.grid(1)
    if i < acc.size:
        acc[i] = acc[i] * a + x[i]


def test_launches_behind_queued_work_of_their_stream_are_warm_and_keep_its_order():
    """A launch that repeats an armed one while its stream still has work queued is warm (not
    the general path) and runs after that work, in issue order: the running result equals
    NumPy's sequential one, with nothing read in between."""
    client = _client_with(33, NUMBA_CUBE_INLINE_US="0")
    rng = np.random.default_rng(2)
    x = rng.standard_normal(256)
    hx, hacc = client.create(x), client.create(np.zeros(256))
    scalars = [1.5, -0.5, 2.0, 0.25, -1.0, 3.0, 0.5, 1.25]
    client.launch(scale_add, 8, 32, scalars[0], hx, hacc)
    for a in scalars[1:]:
        assert not client.server.streams.idle(client.stream_id)     # earlier work is queued
        client.launch(scale_add, 8, 32, a, hx, hacc)
    assert client.server.stats["warm"] == len(scalars) - 1
    expected = np.zeros(256)
    for a in scalars:
        expected = expected * a + x
    np.testing.assert_array_equal(client.read(hacc), expected)


def test_a_warm_launch_queued_behind_a_failing_one_inherits_its_root():
    """A warm launch issued while the launch that will fail its input is still queued (nothing
    is in the ledger yet) is skipped when it runs and inherits that root cause."""
    client = _client_with(34, NUMBA_CUBE_INLINE_US="0")
    x, out = client.create(np.ones(32)), client.create(np.zeros(32))
    client.launch(axpy, 1, 32, 1.0, x, x, out)
    client.launch(axpy, 1, 32, 1.0, x, x, out)
    np.testing.assert_array_equal(client.read(out), np.full(32, 2.0))
    warm = client.server.stats["warm"]
    client.launch(poke, 1, 1, 99, x)                    # queued: fails when it runs
    client.launch(axpy, 1, 32, 3.0, x, x, out)          # warm, queued behind it
    assert client.server.stats["warm"] == warm + 1
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    assert info.value.chain == (poke.id, axpy.id)
    assert isinstance(info.value.root, IndexError)


def test_freeing_a_buffer_drops_the_launches_armed_on_it(client):
    """A warm entry holds views of the buffers it binds: freeing one drops the entry, so a
    long-running loop over fresh buffers does not grow the warm table."""
    def one():
        x, out = client.create(np.ones(32)), client.create(np.zeros(32))
        client.launch(axpy, 1, 32, 1.0, x, x, out)
        client.launch(axpy, 1, 32, 1.0, x, x, out)
        np.testing.assert_array_equal(client.read(out), np.full(32, 2.0))

    one()
    gc.collect()
    client.sync()
    baseline = client.server.cache_sizes()["warm_launches"]
    for _ in range(20):
        one()
    gc.collect()
    client.sync()
    assert client.server.cache_sizes()["warm_launches"] <= baseline
