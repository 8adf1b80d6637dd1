"""The warm-launch policy both warm paths keep (``runtime/launch/warm_policy.py``).

Pinned here: which launches may be armed (``armable_match``: made as called, plain geometry,
handles and plain numbers, the default dependency rule) and how entries are kept (``remember``:
newest first, the same launch replaced, a few per key, a bounded table); and, on the real CPU
backend, the firing rules: a repeat is warm, a tuple argument or a numba-style launch on host
arrays is never armed, a capture window opened after arming records the repeat instead of
running it, and a repeat whose input carries a settled failure takes the general path (skipped,
the root inherited). The CUDA warm path is held to the same rules by
``tests/cuda/cases/test_cuda_fast_path.py`` (repeats warm, a capture window after arming, an input
failed after arming, dry runs and observers), on the fake driver in CI and on a GPU.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube import LaunchFailure
from numba_cube.runtime.launch.warm_policy import MAX_ARMED_KEYS, armable_match, remember

from .test_warm_host import axpy, poke


@cube.kernel
def scaled(ab, x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = ab[0] * x[i] + ab[1]


def _request(as_called):
    return SimpleNamespace(as_called=as_called)


def test_armable_launches_are_made_as_called_with_plain_geometry_and_arguments():
    """A launch is armable only with the caller's own arguments (not a numba-style copy), int or
    tuple geometry, handles and plain numbers, and the default dependency rule; its match
    names each argument's binding or type."""
    client = cube.client("cpu:62")
    h = client.empty(4)
    default, baseline = SimpleNamespace(baseline=False), SimpleNamespace(baseline=True)
    kernel, count, dim, match = armable_match(_request((axpy, 1, (4, 1), (2.0, h, h, h))), default)
    assert (kernel, count, dim) == (axpy, 1, (4, 1)) and match[0] is float and len(match) == 4
    assert armable_match(_request(None), default) is None
    assert armable_match(_request((axpy, 1, 4, (2.0, h, h, h))), baseline) is None
    assert armable_match(_request((axpy, cube.CubeCount(1), 4, (2.0, h, h, h))), default) is None
    assert armable_match(_request((scaled, 1, 4, ((2.0, 1.0), h, h))), default) is None


def test_entries_are_kept_newest_first_the_same_launch_replaced_and_bounded():
    """``remember`` puts the new entry first, replaces one with the same identity rather than
    pushing another out, keeps ``per_key`` at most and clears a table past its bound."""
    table: dict = {}
    for entry in ("a1", "b1", "a2", "c1", "d1"):
        remember(table, "k", entry, lambda e: e[0], per_key=3)
    assert table["k"] == ["d1", "c1", "a2"]
    table.clear()
    for i in range(MAX_ARMED_KEYS):
        remember(table, i, "x", lambda e: e, per_key=1)
    assert len(table) == MAX_ARMED_KEYS
    remember(table, "new", "y", lambda e: e, per_key=1)
    assert table == {"new": ["y"]}


@pytest.fixture(scope="module")
def client():
    return cube.client("cpu:62", boundscheck=True)


def _warm(client) -> int:
    return client.server.stats["warm"]


def test_repeats_are_warm_composites_and_host_array_launches_never(client):
    """A repeated launch of handles and numbers fires warm; one with a tuple argument, or a
    numba-style launch on host arrays, takes the general path every time; all compute what
    NumPy computes."""
    x, out = client.create(np.arange(8.0)), client.empty(8)
    for _ in range(2):
        client.launch(axpy, 1, 8, 2.0, x, x, out)
    before = _warm(client)
    client.launch(axpy, 1, 8, 3.0, x, x, out)
    assert _warm(client) - before == 1
    np.testing.assert_array_equal(client.read(out), 4 * np.arange(8.0))
    before = _warm(client)
    for _ in range(3):
        client.launch(scaled, 1, 8, (2.0, 1.0), x, out)
    host = np.zeros(8)
    with client:
        for _ in range(3):
            axpy[1, 8](1.0, np.arange(8.0), np.ones(8), host)
    assert _warm(client) == before
    np.testing.assert_array_equal(client.read(out), 2 * np.arange(8.0) + 1)
    np.testing.assert_array_equal(host, np.arange(8.0) + 1)


def test_a_capture_window_opened_after_arming_records_the_repeat(client):
    """Armed, then a capture window opens: the repeat is recorded (not run, not warm) and runs
    when the graph is replayed."""
    x, out = client.create(np.arange(4.0)), client.empty(4)
    client.graph_prepare()
    for _ in range(2):
        client.launch(axpy, 1, 4, 1.0, x, x, out)
    client.write(out, np.zeros(4))
    before = _warm(client)
    client.start_capture()
    client.launch(axpy, 1, 4, 1.0, x, x, out)
    graph = client.stop_capture()
    assert _warm(client) == before
    np.testing.assert_array_equal(client.read(out), np.zeros(4))
    graph.replay()
    np.testing.assert_array_equal(client.read(out), 2 * np.arange(4.0))


def test_a_settled_failure_on_an_input_sends_the_repeat_to_the_general_path(client):
    """Armed, then its input fails: the repeat is skipped by the general path (not warm) and its
    output inherits the input's root cause."""
    x, mid, out = client.create(np.arange(4.0)), client.empty(4), client.empty(4)
    for _ in range(2):
        client.launch(axpy, 1, 4, 1.0, mid, x, out)
    client.launch(poke, 1, 1, 99, mid)               # out of bounds: mid fails
    assert isinstance(client.sync_buffers(mid)[0], LaunchFailure)
    before = _warm(client)
    client.launch(axpy, 1, 4, 1.0, mid, x, out)
    assert _warm(client) == before
    with pytest.raises(LaunchFailure) as failure:
        client.read(out)
    assert isinstance(failure.value.root, IndexError)
