"""Autotune measures candidates on scratch copies of every buffer it is given (CONTRACT.md
section 7, ``numba_cube/autotune_scratch.py``), however the buffer is passed.

Each test tunes two candidates of an accumulating kernel (``out += x``): a candidate run on the
caller's buffer during tuning (compile step, warm-ups, samples) would leave it holding many
sums. The reference is NumPy's ``out + x``: only the winner's one call on the real arguments
may touch the caller's data.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

N = 200
RUN = uuid.uuid4().hex[:8]


@cube.kernel
def accumulate(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += x[i]


@pytest.fixture(autouse=True)
def _memory_only_results(monkeypatch):
    # every tuner here is new: a result from disk would skip the tuning under test
    monkeypatch.setenv("NUMBA_CUBE_AUTOTUNE_CACHE", "0")


def tune(unpack, *args, **kwargs):
    """A new tuner of two candidates that launch ``accumulate`` on ``unpack(*args, **kwargs)``
    -> ``(x, out)`` (handles: ``client.launch``; host arrays: a numba-style launch), called once."""
    client = cube.client("cpu")

    def launcher(tpb):
        def candidate(client, *args, **kwargs):
            x, out = unpack(*args, **kwargs)
            if isinstance(out, np.ndarray):
                with client:
                    accumulate[(N + tpb - 1) // tpb, tpb](x, out)
            else:
                client.launch(accumulate, (N + tpb - 1) // tpb, tpb, x, out)
        return candidate

    tuner = cube.Tuner(f"scratch-{uuid.uuid4().hex[:6]}-{RUN}",
                       {"tpb64": launcher(64), "tpb128": launcher(128)},
                       key=lambda *a: 0, warmup=1, samples=3)
    tuner(client, *args, **kwargs)
    assert set(tuner.result(client, *args).timings) == {"tpb64", "tpb128"}
    return client


# (how the pair is passed, how a candidate finds x and out again)
WAYS = {
    "tuple": (lambda x, out: ((x, out),), {}, lambda pair: pair),
    "nested tuple": (lambda x, out: (((x,), ((out,),)),), {}, lambda t: (t[0][0], t[1][0][0])),
    "list in a dict": (lambda x, out: ({"bufs": [x, out]},), {}, lambda d: tuple(d["bufs"])),
    "keywords": (lambda x, out: (), dict(x=None, out=None), lambda x, out: (x, out)),
}


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("kind", ["handles", "host arrays"])
def test_a_buffer_passed_any_way_is_written_once(kind, way):
    """Handles or host NumPy arrays (numba-style launch), inside tuples, nested tuples, a list
    in a dict, or passed by keyword: after the tuner's first call (which tunes), ``out`` is
    NumPy's ``out + x`` exactly once, and ``x`` is unchanged."""
    x_host, out_host = np.arange(N, dtype=np.float64), np.full(N, 1.0)
    expected = out_host + x_host
    client = cube.client("cpu")
    if kind == "handles":
        x, out = client.create(x_host), client.create(out_host)
    else:
        x, out = x_host.copy(), out_host.copy()
    make_args, keywords, unpack = WAYS[way]
    if keywords:
        client = tune(unpack, x=x, out=out)
    else:
        client = tune(unpack, *make_args(x, out))
    got_out = client.read(out) if kind == "handles" else out
    got_x = client.read(x) if kind == "handles" else x
    np.testing.assert_array_equal(got_out, expected)
    np.testing.assert_array_equal(got_x, x_host)


@pytest.mark.parametrize("kind", ["handles", "host arrays"])
def test_views_are_written_once_and_the_bytes_around_them_never(kind):
    """Views (a slice of a larger buffer, top-level) are copied as views: the caller's view gets
    ``out + x`` once, and the bytes of its buffer outside the view are never touched."""
    x_host = np.arange(N, dtype=np.float64)
    big_host = np.full(N + 16, 5.0)
    expected = big_host.copy()
    expected[8:8 + N] += x_host
    client = cube.client("cpu")
    if kind == "handles":
        x, big = client.create(x_host), client.create(big_host)
    else:
        x, big = x_host.copy(), big_host.copy()
    tune(lambda x, out: (x, out), x, big[8:8 + N])
    np.testing.assert_array_equal(client.read(big) if kind == "handles" else big, expected)


def test_copies_keep_layout_alignment_and_aliasing():
    """What a candidate receives has the caller's shapes, strides (F order, a stride-0 broadcast),
    byte offset modulo the 64-byte pool alignment (part of the compile key), and aliasing (two
    views of one buffer are views of one copy), but never the caller's memory."""
    client = cube.client("cpu")
    base = client.create(np.zeros(64))
    head, tail = base[1:9], base[9:17]
    fortran = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    host = np.arange(10.0)
    broadcast = np.broadcast_to(host[:4], (3, 4))
    seen = []

    def probe(client, views, arrays):
        seen.append((views, arrays))

    tuner = cube.Tuner(f"probe-{RUN}", {"probe": probe}, key=lambda *a: 0, samples=1)
    tuner(client, (head, tail), {"f": fortran, "h": host[2:6], "b": broadcast, "all": host})
    copies = seen[:-1]                      # the last call is the winner's, on the real arguments
    assert copies and seen[-1][0] == (head, tail)
    for (h, t), arrays in copies:
        assert h.memory_id == t.memory_id != base.memory_id          # aliasing kept, not shared
        assert (h.offset - t.offset, h.offset % 64) == (head.offset - tail.offset, head.offset % 64)
        assert (h.shape, h.strides) == (head.shape, head.strides)
        assert arrays["f"].strides == fortran.strides and not np.shares_memory(arrays["f"], fortran)
        assert arrays["b"].strides == broadcast.strides and arrays["b"].shape == (3, 4)
        assert np.shares_memory(arrays["h"], arrays["all"])           # a view of the same copy
        assert not np.shares_memory(arrays["all"], host)
        np.testing.assert_array_equal(arrays["h"], host[2:6])
        np.testing.assert_array_equal(arrays["b"], broadcast)
