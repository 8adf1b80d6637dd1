"""Automatic graphs against a sequential NumPy model, on random programs (CONTRACT.md 6.1).

A program is a loop: a body of launches over three buffers repeated a few times, with events at
random points of random iterations: a read, a host write, a changed launch, a failing launch, and
a launch from a second thread on its own stream sharing the buffers (the loop waits for it, so the
program has one order). Run inside ``client.auto_graph()``, every read must give the model's
values, or the model's failure with the model's root cause; so must the buffers at the end.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numba_cube as cube
from numba_cube import LaunchFailure

from .._util import PythonDevices, run_in_thread
from .test_auto_graph import axpy, fail_scale, scale

N = 4
SCALARS = (0.5, 2.0, -1.0, 0.25, 1.5)

launches = st.one_of(
    st.tuples(st.just("axpy"), st.sampled_from(SCALARS), st.integers(0, 2), st.integers(0, 2))
    .filter(lambda t: t[2] != t[3]),
    st.tuples(st.just("scale"), st.sampled_from(SCALARS), st.integers(0, 2)),
)
events = st.one_of(
    st.tuples(st.just("read"), st.integers(0, 2)),
    st.tuples(st.just("write"), st.integers(0, 2), st.integers(-3, 3)),
    st.tuples(st.just("launch"), launches),
    st.tuples(st.just("fail"), st.integers(0, 2)),
    st.tuples(st.just("other"), st.integers(0, 2)),
)
programs = st.tuples(
    st.lists(launches, min_size=1, max_size=4),                  # the body
    st.integers(3, 8),                                           # iterations
    # (events mostly after the first two iterations: where a graph may be armed)
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 4), events), max_size=3),
)


class Model:
    """The program run sequentially in NumPy: values and, per buffer, the root of its failure."""

    def __init__(self):
        self.values = [np.arange(N, dtype=np.float64) + k for k in range(3)]
        self.failed: list = [None, None, None]

    def launch(self, op) -> None:
        if op[0] == "axpy":
            _, a, i, j = op
            root = self.failed[i] or self.failed[j]     # the first failed input, in read order
            if root:
                self.failed[j] = root
            else:
                self.values[j] = a * self.values[i] + self.values[j]
        else:
            _, a, i = op
            if not self.failed[i]:
                self.values[i] = a * self.values[i]

    def fail(self, i, tag) -> None:
        if not self.failed[i]:
            self.failed[i] = tag

    def write(self, i, v) -> None:
        self.values[i] = np.full(N, float(v))
        self.failed[i] = None


def issue(client, handles, op) -> None:
    if op[0] == "axpy":
        _, a, i, j = op
        client.launch(axpy, 1, 1, a, handles[i], handles[j])
    else:
        _, a, i = op
        client.launch(scale, 1, 1, a, handles[i])


def check_read(client, handles, model, i) -> None:
    if model.failed[i]:
        with pytest.raises(LaunchFailure) as info:
            client.read(handles[i])
        assert str(info.value.root) == model.failed[i]
    else:
        np.testing.assert_array_equal(client.read(handles[i]), model.values[i])


def run_program(client, program) -> None:
    body, iterations, scheduled = program
    model = Model()
    handles = [client.create(v) for v in model.values]
    at = {}
    for iteration, position, event in scheduled:
        at.setdefault((iteration, position), []).append(event)
    fails = 0
    with client.auto_graph():
        for it in range(iterations):
            for pos in range(len(body) + 1):
                for event in at.get((it, pos), ()):
                    kind = event[0]
                    if kind == "read":
                        check_read(client, handles, model, event[1])
                    elif kind == "write":
                        client.write(handles[event[1]], np.full(N, float(event[2])))
                        model.write(event[1], event[2])
                    elif kind == "launch":
                        issue(client, handles, event[1])
                        model.launch(event[1])
                    elif kind == "fail":
                        fails += 1
                        a = 10.0 + fails
                        client.launch(fail_scale, 1, 1, a, handles[event[1]])
                        model.fail(event[1], f"injected {a}")
                    else:
                        def other(i=event[1]):
                            with cube.stream():
                                client.launch(scale, 1, 1, -1.0, handles[i])
                        run_in_thread(other)
                        model.launch(("scale", -1.0, event[1]))
                if pos < len(body):
                    issue(client, handles, body[pos])
                    model.launch(body[pos])
    for i in range(3):
        check_read(client, handles, model, i)


@pytest.fixture(scope="module", params=["thread", "inline"])
def devices(request):
    d = PythonDevices(f"rt_auto_graph_property_{request.param}",
                      inline=request.param == "inline")
    yield d
    d.close()


@pytest.fixture(scope="module")
def shared_client(devices):
    return devices.fresh()


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(program=programs)
def test_random_programs_compute_what_numpy_does(shared_client, program):
    """Every read, and every buffer at the end, is the sequential model's: values, or the same
    failure with the same root cause (deferral is invisible except in time)."""
    run_program(shared_client, program)


def test_the_property_program_runs_replays(shared_client):
    """The loop shape of the property test is replayed (so the property covers replays, not only
    eager launches): a body of two launches over six iterations and no events."""
    before = shared_client.server.stats["auto_graph_replays"]
    run_program(shared_client, ([("axpy", 0.5, 0, 1), ("scale", 2.0, 2)], 6, []))
    shared_client.server.channel.call(lambda: None)
    assert shared_client.server.stats["auto_graph_replays"] > before
