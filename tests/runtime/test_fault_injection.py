"""Fault injection on the real CPU backend (CONTRACT.md section 4; issue 3).

A pipeline of 12 launches over 13 buffers forms a DAG (launch k reads buffers k and k // 2 and
writes buffer k + 1). A real failure (an out-of-bounds index with bounds checking on, so the
compiled kernel raises IndexError) is injected at every position in turn.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

N = 64
STEPS = 12
BAD_SHIFT = 10_000


@cube.kernel
def combine(a, b, shift, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + 0.5 * b[i + shift]     # shift past the end: IndexError under boundscheck


def inputs_of(k):
    return (k, k // 2)


def downstream_of(p):
    """Buffers that must fail when launch p fails: its output and everything that reads one."""
    failed = {p + 1}
    for k in range(p + 1, STEPS):
        if any(src in failed for src in inputs_of(k)):
            failed.add(k + 1)
    return failed


@pytest.fixture(scope="module")
def client():
    return cube.client("cpu", boundscheck=True)


@pytest.mark.parametrize("position", range(STEPS))
def test_failure_at_each_position_reaches_exactly_the_downstream_buffers(client, position):
    """With launch `position` failing, exactly its downstream buffers fail, every one with the
    same root cause (the IndexError object, the failing kernel's id) and a chain that starts at
    the failing launch; every other buffer reads the NumPy reference."""
    rng = np.random.default_rng(position)
    ref = [rng.standard_normal(N)] + [np.zeros(N) for _ in range(STEPS)]
    bufs = [client.create(a) for a in ref]
    for k in range(STEPS):
        a, b = inputs_of(k)
        shift = BAD_SHIFT if k == position else 0
        client.launch(combine, 2, 32, bufs[a], bufs[b], shift, bufs[k + 1])
        if k != position:
            ref[k + 1] = ref[a] + 0.5 * ref[b]
    failed = downstream_of(position)
    roots = set()
    for j, h in enumerate(bufs):
        if j in failed:
            with pytest.raises(cube.LaunchFailure) as info:
                client.read(h)
            err = info.value
            assert isinstance(err.root, IndexError)
            assert err.kernel_id == combine.id
            assert err.chain[0] == combine.id and len(err.chain) >= 1
            roots.add(id(err.root))
        else:
            np.testing.assert_allclose(client.read(h), ref[j], err_msg=f"buffer {j}")
    assert len(roots) == 1, "every downstream buffer carries the same root cause"
    # The process keeps working: relaunching the failed step with a good shift repairs its output.
    a, b = inputs_of(position)
    client.launch(combine, 2, 32, bufs[a], bufs[b], 0, bufs[position + 1])
    np.testing.assert_allclose(client.read(bufs[position + 1]), ref[a] + 0.5 * ref[b])


def test_chain_names_the_launches_the_failure_travelled_through(client):
    """The message says which kernel failed, why (Numba's error text), and through which chain of
    launches the failure reached the buffer."""
    x = client.create(np.ones(N))
    y, z = client.empty(N, np.float64), client.empty(N, np.float64)
    client.launch(combine, 2, 32, x, x, BAD_SHIFT, y)
    client.launch(combine, 2, 32, y, x, 0, z)
    with pytest.raises(cube.LaunchFailure) as info:
        client.read(z)
    text = str(info.value)
    assert combine.id in text and "IndexError" in text
    assert info.value.chain == (combine.id, combine.id)
    assert "reached this buffer through" in text
