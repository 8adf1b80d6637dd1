"""Dry runs on the real CPU backend (CONTRACT.md section 2; issue 5)."""

from __future__ import annotations

import threading

import numpy as np
from numba import cuda

import numba_cube as cube


@cube.kernel
def twice(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2.0 * x[i]


def test_dry_run_compiles_everything_and_touches_nothing():
    """A SKIP launch compiles and fills every cache, then claims nothing, registers no dependency
    and changes no data; the first real launch afterwards compiles nothing (a cache hit)."""
    client = cube.client("cpu:5")
    server = client.server
    x = client.create(np.arange(64.0))
    out = client.create(np.full(64, -1.0))
    with cube.dry_run():
        client.launch(twice, 2, 32, x, out)
    client.sync()
    assert server.stats["compiles"] == 1 and server.stats["skipped"] == 1
    assert server.hazards.writer_of(out.memory_id) is None          # no dependency registered
    assert len(server.ledger) == 0                                   # nothing claimed
    np.testing.assert_array_equal(client.read(out), np.full(64, -1.0))
    compiles = server.stats["compiles"]
    client.launch(twice, 2, 32, x, out)
    np.testing.assert_array_equal(client.read(out), 2.0 * np.arange(64.0))
    assert server.stats["compiles"] == compiles                      # compiled by the dry run


def test_real_run_inside_dry_run_executes_only_on_its_thread():
    """real_run is thread-local: inside a dry run, the thread holding a real run executes while
    another thread's launches are skipped."""
    client = cube.client("cpu:5")
    x = client.create(np.ones(64))
    mine, theirs = client.create(np.zeros(64)), client.create(np.zeros(64))
    with cube.dry_run():
        with cube.real_run():
            client.launch(twice, 2, 32, x, mine)
            th = threading.Thread(target=lambda: client.launch(twice, 2, 32, x, theirs))
            th.start()
            th.join()
    np.testing.assert_array_equal(client.read(mine), np.full(64, 2.0))
    np.testing.assert_array_equal(client.read(theirs), np.zeros(64))
