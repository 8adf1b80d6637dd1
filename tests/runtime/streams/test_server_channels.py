"""``DeviceServer`` behaves the same through both channels (``runtime/streams/channel.py``).

A server's operations run either on a device thread (``ThreadChannel``: the CPU backend) or on
the issuing thread under the device lock (``InlineChannel``: the CUDA server). The policy must
not depend on which: these tests run one ``DeviceServer`` over ``testing.PythonBackend`` (kernels
are plain Python functions, so launches cost microseconds and a failure is a ``raise``) through
each channel, with the same programs and the same NumPy reference:

- a random program (hypothesis) of launches, failing launches, host writes and reads, issued by
  three real threads in one global turn order (each on its own stream), compared with a
  sequential model of values *and* failures (a failed input skips the launch and its outputs
  inherit the root cause; a launch or a full host write repairs);
- a capture and its replays, and a dry run that leaves buffers untouched.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numba_cube as cube
from numba_cube.errors import LaunchFailure
from numba_cube.testing import register_python_backend, take_turns

N = 8
NBUF = 4
THREADS = 3
CHANNELS = ["thread", "inline"]
_names = itertools.count()


def scale(a, x, out):
    out[:] = a * x


def add(x, out):
    out += x


def fail(x, out):
    out[0] = x[0]           # reads x and writes out, so the failure lands on out
    raise ValueError("injected")


KERNELS = {"scale": scale, "add": add, "fail": fail}


def make_client(channel: str):
    name = f"chan{next(_names)}{channel}"
    register_python_backend(name, inline=(channel == "inline"))
    return cube.client(f"{name}:0")


class Model:
    """The sequential meaning of a program: each buffer's values, or the root cause (the step
    that failed first) it carries."""

    def __init__(self, initial):
        self.values = [v.copy() for v in initial]
        self.failed: list[int | None] = [None] * len(initial)

    def launch(self, step: int, kind: str, src: int, dst: int) -> None:
        inputs = [src, dst] if kind == "add" else [src]
        root = next((self.failed[b] for b in inputs if self.failed[b] is not None), None)
        if root is not None:                     # skipped: the output inherits the cause
            self.failed[dst] = root
        elif kind == "fail":
            self.failed[dst] = step
        else:
            if kind == "scale":
                self.values[dst] = 2.0 * self.values[src]
            else:
                self.values[dst] = self.values[dst] + self.values[src]
            self.failed[dst] = None

    def write(self, dst: int, data) -> None:
        self.values[dst] = data.copy()
        self.failed[dst] = None


op_st = st.one_of(
    st.tuples(st.just("launch"), st.sampled_from(sorted(KERNELS)), st.integers(0, NBUF - 1),
              st.integers(0, NBUF - 1)),
    st.tuples(st.just("write"), st.integers(0, NBUF - 1), st.integers(-3, 3)),
    st.tuples(st.just("read"), st.integers(0, NBUF - 1)),
)
program_st = st.lists(st.tuples(st.integers(0, THREADS - 1), op_st), min_size=1, max_size=24)


@pytest.mark.parametrize("channel", CHANNELS)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=program_st)
def test_random_programs_match_the_sequential_model(channel, program):
    """Values and failures after every read equal the sequential model's, through either
    channel; a read of a failed buffer raises ``LaunchFailure`` whose root cause is the
    failing launch's exception."""
    client = make_client(channel)
    initial = [np.arange(N, dtype=np.float64) + 10 * b for b in range(NBUF)]
    handles = [client.create(v) for v in initial]
    model = Model(initial)
    failures: dict[int, BaseException] = {}

    def issue(k, step):
        _, op = step
        if op[0] == "launch":
            _, kind, src, dst = op
            args = (2.0, handles[src], handles[dst]) if kind == "scale" else (handles[src],
                                                                              handles[dst])
            model.launch(k, kind, src, dst)
            client.launch(KERNELS[kind], 1, 1, *args)
        elif op[0] == "write":
            _, dst, value = op
            data = np.full(N, float(value))
            model.write(dst, data)
            client.write(handles[dst], data)
        else:
            _, b = op
            # checked against the model at its turn: the program's sequential meaning
            root, values = model.failed[b], model.values[b].copy()
            try:
                got = client.read(handles[b])
            except LaunchFailure as exc:
                failures[k] = exc
                got = None
            if root is None:
                assert got is not None, f"step {k}: buffer {b} failed, the model says clean"
                np.testing.assert_array_equal(got, values)
            else:
                assert got is None, f"step {k}: buffer {b} read clean, the model says failed"
                assert isinstance(failures[k].root, ValueError)

    take_turns(program, issue, threads=THREADS)
    client.sync()


@pytest.mark.parametrize("channel", CHANNELS)
def test_capture_replay_and_dry_run(channel):
    """A graph captured on a stream replays its launches in order each time; a dry run
    compiles without touching buffers; both through either channel."""
    client = make_client(channel)
    x = client.create(np.arange(N, dtype=np.float64))
    y = client.create(np.zeros(N))
    client.graph_prepare()
    client.launch(add, 1, 1, x, y)
    client.sync()
    client.write(y, np.zeros(N))
    client.start_capture()
    client.launch(add, 1, 1, x, y)
    client.launch(scale, 1, 1, 2.0, y, y)
    graph = client.stop_capture()
    np.testing.assert_array_equal(client.read(y), np.zeros(N))     # recorded, not run
    graph.replay()
    graph.replay()
    expected = np.zeros(N)
    for _ in range(2):
        expected = 2.0 * (expected + np.arange(N))
    np.testing.assert_array_equal(client.read(y), expected)
    with cube.dry_run():
        client.launch(fail, 1, 1, x, y)
    np.testing.assert_array_equal(client.read(y), expected)
