"""Property: random multi-threaded programs on the CUDA backend equal their sequential NumPy
reference (CONTRACT.md section 3), with the warm launch path in play.

The CPU twin of this test (``tests/runtime/test_dependencies_property.py``) binds fresh view
handles on every launch. Here every buffer and view is a handle made *once* per program and
reused, so a launch that repeats an earlier one (same kernel, handles, geometry, stream) takes the
warm path of ``backends/cuda/launch/fast_path.py``, whose tasks record no event until somebody waits for
them. Programs also drop and re-create buffers mid-way, so memory freed while warm launches may
still read it must not be reused early.

Up to 4 threads take turns *issuing* (a global turn order, so the program has one meaning) on
per-thread, scoped and pinned streams. On the fake driver the device is adversarial: nothing
runs until the host waits, then the newest stream runs first, so a missing device-side wait
shows as a wrong number. On a GPU the threads race for real.

Examples: ``NUMBA_CUBE_CUDA_PROPERTY_EXAMPLES`` (default 150).
"""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import cuda

import numba_cube as cube
from numba_cube.testing import take_turns

EXAMPLES = int(os.environ.get("NUMBA_CUBE_CUDA_PROPERTY_EXAMPLES", "150"))
N = 32          # elements per buffer: one cube of 32 units
NBUF = 6
VIEWS = ((0, N), (0, N // 2), (N // 2, N))   # the views of each buffer a program may bind


@cube.kernel
def scale_into(a, x, out):
    i = cuda.grid(1)
    if i < min(x.size, out.size):
        out[i] = a * x[i]


@cube.kernel
def add_into(x, out):
    i = cuda.grid(1)
    if i < min(x.size, out.size):
        out[i] += x[i]


@cube.kernel
def bump(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = out[i] * 0.5 + 1.0


ARITY = {"scale_into": 2, "add_into": 2, "bump": 1}
KERNELS = {"scale_into": scale_into, "add_into": add_into, "bump": bump}


def reference_launch(name, scalar, arrays):
    if name == "scale_into":
        x, out = arrays
        n = min(x.size, out.size)
        out[:n] = scalar * x[:n].copy()
    elif name == "add_into":
        x, out = arrays
        n = min(x.size, out.size)
        out[:n] = out[:n] + x[:n].copy()
    else:
        (out,) = arrays
        out[:] = out * 0.5 + 1.0


view_st = st.tuples(st.integers(0, NBUF - 1), st.integers(0, len(VIEWS) - 1))
launch_st = st.builds(
    lambda name, views, scalar: ("launch", name, views[:ARITY[name]], scalar),
    # Distinct buffers within one launch (overlapping views in one launch are a data race).
    st.sampled_from(sorted(ARITY)), st.lists(view_st, min_size=2, max_size=2, unique_by=lambda v: v[0]),
    st.sampled_from([0.5, 2.0, -1.0]))
write_st = st.builds(lambda b, v: ("write", b, v), st.integers(0, NBUF - 1), st.integers(-3, 3))
read_st = st.builds(lambda b: ("read", b), st.integers(0, NBUF - 1))
renew_st = st.builds(lambda b: ("renew", b), st.integers(0, NBUF - 1))   # drop and re-create
op_st = st.one_of(launch_st, launch_st, launch_st, launch_st, write_st, read_st, renew_st)
# Ops repeat in runs (a loop body issued several times) so the warm path is taken often.
step_st = st.tuples(st.integers(0, 3), st.integers(0, 2), op_st, st.integers(1, 4))
program_st = st.lists(step_st, min_size=4, max_size=24)


class Buffers:
    """The program's handles: one per buffer and one per view, made once and reused."""

    def __init__(self, client, init):
        self.client = client
        self.handles = [None] * NBUF
        self.views = [None] * NBUF
        for b, data in enumerate(init):
            self.renew(b, data)

    def renew(self, b, data):
        self.handles[b] = self.client.create(data)     # the old handle (and views) are dropped
        self.views[b] = [self.handles[b][lo:hi] for lo, hi in VIEWS]

    def view(self, spec):
        b, v = spec
        return self.views[b][v]


def run_program(client, program, init):
    bufs = Buffers(client, init)
    ref = [a.copy() for a in init]
    mismatches = []
    pinned = client.set_stream(cube.StreamId.new())

    def ref_view(spec):
        b, v = spec
        lo, hi = VIEWS[v]
        return ref[b][lo:hi]

    def issue(k, ctx, op):
        c = pinned if ctx == 2 else client
        if op[0] == "launch":
            _, name, views, scalar = op
            scalars = (scalar,) if name == "scale_into" else ()
            c.launch(KERNELS[name], 1, N, *scalars, *[bufs.view(v) for v in views])
            reference_launch(name, scalar, [ref_view(v) for v in views])
        elif op[0] == "write":
            _, b, value = op
            c.write(bufs.handles[b], np.full(N, float(value)))
            ref[b][:] = value
        elif op[0] == "renew":
            _, b = op
            data = np.arange(N, dtype=np.float64) + b
            bufs.renew(b, data)
            ref[b][:] = data
        else:
            _, b = op
            got = c.read(bufs.handles[b])
            if not np.allclose(got, ref[b]):
                mismatches.append((k, b, got, ref[b].copy()))

    def step(k, item):
        _, ctx, op, repeat = item
        for _ in range(repeat if op[0] == "launch" else 1):
            if ctx == 1:
                with cube.stream():
                    issue(k, ctx, op)
            else:
                issue(k, ctx, op)

    take_turns(program, step, threads=4)
    assert not mismatches, mismatches[0]
    final = client.read_many(bufs.handles)
    for b in range(NBUF):
        np.testing.assert_allclose(final[b], ref[b], err_msg=f"buffer {b}")
    client.sync()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=program_st, seed=st.integers(0, 2**32 - 1))
def test_random_programs_match_sequential_reference(client, program, seed):
    """Any interleaving of (repeated) launches, host writes, reads and buffer renewals from up to
    4 threads on per-thread, scoped and pinned streams, over reused handles and views of shared
    buffers, gives exactly the sequential reference: neither the inferred dependencies nor the
    warm path's event-less tasks ever under-synchronize."""
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(N) for _ in range(NBUF)]
    run_program(client, program, init)
