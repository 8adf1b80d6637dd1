"""Property: random multi-threaded programs equal their sequential NumPy reference (CONTRACT.md 3).

Each generated program is a list of operations (launches of real CPU kernels, host writes, reads,
temporary buffers) over up to 8 buffers and their views, spread over up to 4 threads with random
pins and ``with cube.stream()`` blocks. The threads take turns *issuing* (a global turn order, so
that the program has one meaning), but they issue on different streams and the work runs
concurrently on stream workers: only the dependencies the runtime infers from the bindings keep
the results equal to the reference. Under-synchronization shows as a wrong number.

Examples: ``NUMBA_CUBE_PROPERTY_EXAMPLES`` (CI default 200; try 2000 locally).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import cuda

import numba_cube as cube
from numba_cube.testing import take_turns

EXAMPLES = int(os.environ.get("NUMBA_CUBE_PROPERTY_EXAMPLES", "200"))
N = 48          # elements per buffer
NBUF = 8


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
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < min(x.size, y.size, out.size):
        out[i] = a * x[i] + y[i]


@cube.kernel
def bump(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = out[i] * 0.5 + 1.0


KERNELS = {  # name -> (kernel, takes a leading scalar)
    "scale_into": (scale_into, True),
    "add_into": (add_into, False),
    "axpy": (axpy, True),
    "bump": (bump, False),
}


def reference_launch(name, scalar, arrays):
    if name == "scale_into":
        x, out = arrays
        n = min(x.size, out.size)
        out[:n] = scalar * x[:n].copy()
    elif name == "add_into":
        x, out = arrays
        n = min(x.size, out.size)
        out[:n] = out[:n] + x[:n].copy()
    elif name == "axpy":
        x, y, out = arrays
        n = min(x.size, y.size, out.size)
        out[:n] = scalar * x[:n].copy() + y[:n].copy()
    elif name == "bump":
        (out,) = arrays
        out[:] = out * 0.5 + 1.0


ARITY = {"scale_into": 2, "add_into": 2, "axpy": 3, "bump": 1}

view_st = st.tuples(st.integers(0, NBUF - 1), st.integers(0, N // 2), st.integers(N // 2, N))
launch_st = st.builds(
    lambda name, views, scalar: ("launch", name, views[:ARITY[name]], scalar),
    # Distinct buffers within one launch: two overlapping views of one buffer bound to one launch
    # are a data race inside the kernel (undefined on a GPU too), not a scheduling question.
    st.sampled_from(sorted(ARITY)), st.lists(view_st, min_size=3, max_size=3, unique_by=lambda v: v[0]),
    st.sampled_from([0.5, 2.0, -1.0, 3.0]))
write_st = st.builds(lambda b, v: ("write", b, v), st.integers(0, NBUF - 1), st.integers(-3, 3))
read_st = st.builds(lambda b: ("read", b), st.integers(0, NBUF - 1))
op_st = st.one_of(launch_st, launch_st, launch_st, write_st, read_st)
# An op's "context": 0 = the thread's own stream, 1 = inside `with cube.stream()`, 2 = pinned client.
program_st = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), op_st), min_size=1, max_size=30)


def run_program(client, program, init):
    handles = [client.create(a) for a in init]
    ref = [a.copy() for a in init]
    mismatches = []
    pinned = client.set_stream(cube.StreamId.new())

    def view(spec, arrays):
        b, lo, hi = spec
        return arrays[b][lo:hi]

    def issue(k, ctx, op):
        c = pinned if ctx == 2 else client
        if op[0] == "launch":
            _, name, views, scalar = op
            args = [view(v, handles) for v in views]
            kern = KERNELS[name][0]
            scalars = (scalar,) if KERNELS[name][1] else ()
            c.launch(kern, (N + 31) // 32, 32, *scalars, *args)
            reference_launch(name, scalar, [view(v, ref) for v in views])
        elif op[0] == "write":
            _, b, value = op
            data = np.full(N, float(value))
            c.write(handles[b], data)
            ref[b][:] = data
        else:
            _, b = op
            got = c.read(handles[b])
            if not np.allclose(got, ref[b]):
                mismatches.append((k, b, got, ref[b].copy()))

    def step(k, item):
        _, ctx, op = item
        if ctx == 1:
            with cube.stream():
                issue(k, ctx, op)
        else:
            issue(k, ctx, op)

    # Every owner index 0..3 gets a thread; steps of one thread wait for their turn.
    take_turns(program, step, threads=4)
    assert not mismatches, mismatches[0]
    final = client.read_many(handles)
    for b in range(NBUF):
        np.testing.assert_allclose(final[b], ref[b], err_msg=f"buffer {b}")
    client.sync()


@pytest.fixture(scope="module", params=["inline", "queued"])
def client(request):
    """The CPU backend twice: as it runs by default (short launches run on the issuing thread:
    ``runtime/launch/warm_host.py``), and with every launch queued to stream workers
    (``NUMBA_CUBE_INLINE_US=0``, its own device), where the streams really run concurrently."""
    if request.param == "inline":
        c = cube.client("cpu")
    else:
        saved = os.environ.get("NUMBA_CUBE_INLINE_US")
        os.environ["NUMBA_CUBE_INLINE_US"] = "0"
        try:
            c = cube.client("cpu:23")   # (an index no other test uses)
        finally:
            if saved is None:
                del os.environ["NUMBA_CUBE_INLINE_US"]
            else:
                os.environ["NUMBA_CUBE_INLINE_US"] = saved
    warm = [c.create(np.zeros(N)) for _ in range(3)]
    for name, (kern, has_scalar) in KERNELS.items():
        c.launch(kern, 2, 32, *((1.0,) if has_scalar else ()), *warm[:ARITY[name]])
    c.sync()
    return c


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=program_st, seed=st.integers(0, 2**32 - 1))
def test_random_programs_match_sequential_reference(client, program, seed):
    """Any interleaving of launches, host writes and reads from up to 4 threads, on per-thread,
    scoped and pinned streams, over views of 8 shared buffers, gives exactly the sequential
    reference: the inferred dependencies never under-synchronize."""
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(N) for _ in range(NBUF)]
    run_program(client, program, init)
