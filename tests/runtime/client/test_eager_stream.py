"""numba's launch-configuration stream, ``kernel[count, dim, stream]`` (runtime/client/eager.py).

A ``cube.StreamId`` there is the stream of exactly that launch (over a pinned client's and the
thread's); ``0`` and ``None`` (numba's default stream) leave the launch on its usual stream; a
foreign stream object is synchronized first (the launch is synchronous), any other value is a
``StreamIdError`` raised before anything runs,
never ignored. The stream a launch went to is what launch observers are told (CONTRACT.md
section 1.1, step 5); results are checked against NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube.errors import StreamIdError


@cube.kernel
def double(a):
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[i] = 2 * a[i]


@pytest.fixture
def seen_streams():
    """The streams of the launches made while the test runs, in order (a launch observer)."""
    streams = []

    def observe(event):
        streams.append(event.stream)

    cube.add_observer(observe)
    yield streams
    cube.remove_observer(observe)


@pytest.fixture
def client():
    c = cube.client("cpu")
    with c:
        yield c


def test_a_stream_id_is_the_launch_stream(client, seen_streams):
    """kernel[count, dim, sid] runs on sid (also with shared bytes given), and computes NumPy's
    result into the caller's array."""
    sid = cube.StreamId.new()
    host = np.arange(10.0)
    double[1, 32, sid](host)
    double[1, 32, sid, 0](host)
    np.testing.assert_array_equal(host, np.arange(10.0) * 4)
    assert seen_streams == [sid, sid]


def test_the_explicit_stream_wins_over_a_pin_and_the_thread(seen_streams):
    """A pinned client and a `with cube.stream()` block yield to the launch's own stream."""
    sid, pinned = cube.StreamId.new(), cube.StreamId.new()
    with cube.client("cpu").set_stream(pinned), cube.stream():
        double[1, 32, sid](np.ones(4))
        double[1, 32](np.ones(4))
    assert seen_streams == [sid, pinned]


def test_default_stream_values_keep_the_usual_stream(client, seen_streams):
    """0 and None (numba's default stream) launch on the thread's current stream."""
    with cube.stream() as current:
        double[1, 32, 0](np.ones(4))
        double[1, 32, None](np.ones(4))
    assert seen_streams == [current, current]


class _ForeignStream:
    """Stands for a numba-cuda or CuPy stream object (they have ``synchronize``); no CUDA here."""

    handle = 12345

    def __init__(self):
        self.synchronized = 0

    def synchronize(self):
        self.synchronized += 1


def test_a_foreign_stream_is_synchronized_before_the_launch(client, seen_streams):
    """A numba-cuda or CuPy stream object: the launch (synchronous, numba-style) comes after the
    work queued on it (it is synchronized first, once) and runs on the usual stream."""
    foreign = _ForeignStream()
    current = cube.StreamId.current()
    host = np.ones(4)
    with client:
        double[1, 32, foreign](host)
    assert foreign.synchronized == 1
    assert seen_streams == [current]
    np.testing.assert_array_equal(host, np.full(4, 2.0))


class _CoreStream:
    """Stands for a cuda.core stream (``sync()``, no ``synchronize``)."""

    def __init__(self):
        self.synchronized = 0

    def sync(self):
        self.synchronized += 1


def test_a_cuda_core_stream_is_synchronized_too(client, seen_streams):
    """cuda.core's stream (numba-cuda's launch configuration holds one on a GPU) is synchronized
    with its ``sync()`` and the launch runs on the usual stream."""
    core = _CoreStream()
    host = np.ones(4)
    with client:
        double[1, 32, core](host)
    assert core.synchronized == 1
    np.testing.assert_array_equal(host, np.full(4, 2.0))


@pytest.mark.parametrize("stream", [3, 1.0, True, "s"])
def test_other_streams_are_refused_before_anything_runs(client, seen_streams, stream):
    """A plain int or any other value that is no stream is a StreamIdError saying what to pass,
    and the caller's array is untouched (nothing was launched)."""
    host = np.ones(4)
    with pytest.raises(StreamIdError, match="cube.StreamId"):
        double[1, 32, stream](host)
    np.testing.assert_array_equal(host, np.ones(4))
    assert seen_streams == []
