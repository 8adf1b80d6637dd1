"""Memory reaches a steady state on the real CPU backend (the project's memory standard)."""

from __future__ import annotations

import numpy as np
from numba import cuda

import numba_cube as cube


@cube.kernel
def scale_add(a, x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + out[i]


def _counts(server):
    return (len(server.memory), len(server.ledger), len(server.hazards),
            tuple(sorted(server.cache_sizes().items())))


BLOCK = 2048   # the pool's size class of one 256-float buffer


def test_ten_thousand_iterations_of_create_launch_free_do_not_grow():
    """A loop that creates handles, launches real compiled kernels on them (across two streams)
    and drops them reaches a steady state: after a warm-up, 10,000 more iterations leave live
    memory, ledger, dependency state, bound launches and cached views where they were, and the
    bytes the pool holds never exceed the warm-up's high-water mark by more than the blocks a
    loaded machine can have in flight (a leak would grow by one block per iteration)."""
    client = cube.client("cpu:4")
    other = client.set_stream(cube.StreamId.new())
    keep = client.create(np.ones(256))

    def iteration(k):
        x = client.create(np.full(256, float(k)))
        out = client.empty(256, np.float64)
        client.write(out, np.zeros(256))
        client.launch(scale_add, 8, 32, 2.0, x, out)
        other.launch(scale_add, 8, 32, 1.0, out, keep)     # another stream reads what we wrote
        if k % 1000 == 0:
            client.sync()

    for k in range(200):
        iteration(k)
    client.sync()
    counts = _counts(client.server)
    high_water = client.server.pool.held_bytes
    held = []
    for k in range(10_000):
        iteration(k)
        if k % 1000 == 999:
            client.sync()
            held.append(client.server.pool.held_bytes)
    assert _counts(client.server) == counts
    # How far the issuing thread runs ahead of the workers, and so how many blocks are in flight
    # or in quarantine at a checkpoint, depends on the machine's load (up to a few hundred seen
    # on a busy 2-core machine); a leak of one block per iteration would be 10,000 more.
    assert max(held) <= high_water + 512 * BLOCK, (high_water, held)
    expected = 1.0 + 2.0 * (sum(range(200)) + sum(range(10_000)))    # keep += out, out = 2k
    np.testing.assert_allclose(client.read(keep), np.full(256, expected))
