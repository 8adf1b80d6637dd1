"""Barriers under conditions the static rule cannot prove uniform are decided at run time.

When every unit of a cube agrees on the condition, the kernel runs as CUDA would (checked
against NumPy); when they do not, the launch fails on its write set with a ``DivergenceError``
(a ``CompileError``) naming the barrier's line, unrelated buffers stay readable and the device
keeps working. Launches go through a CPU client (``cube.client("cpu")``) and, for the generated
code's own variants, through ``build_program``.
"""

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube.backends.cpu.translate import build_program
from numba_cube.errors import DivergenceError
from numba_cube.errors import CompileError, LaunchFailure


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """Generated modules go to a private temp dir, never to ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path_factory.mktemp("cube_cache")))
        yield


def line_of(kernel, needle: str) -> int:
    import inspect
    lines, start = inspect.getsourcelines(kernel.py_func)
    return start + next(k for k, text in enumerate(lines) if needle in text)


@cuda.jit
def flagged_reverse(flags, x, out):
    """Reverse each cube's slice through shared memory, only in cubes whose flag is set."""
    sm = cuda.shared.array(64, np.float64)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    if flags[cuda.blockIdx.x + tid * 0] > 0:      # reads memory: uniform only at run time
        sm[tid] = x[i]
        cuda.syncthreads()
        out[i] = sm[cuda.blockDim.x - 1 - tid]
    else:
        out[i] = -1.0


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_barrier_under_memory_condition_runs_when_units_agree(variant):
    """A barrier under a condition read from memory runs when the whole cube agrees."""
    prog = build_program(flagged_reverse.py_func)
    flags = np.array([1, 0, 1, 1], np.int32)
    x = np.arange(256.0)
    out = np.zeros(256)
    getattr(prog, variant)(4, 1, 1, 64, 1, 1, flags, x, out)
    expected = np.where(np.repeat(flags, 64) > 0, x.reshape(4, 64)[:, ::-1].ravel(), -1.0)
    np.testing.assert_array_equal(out, expected)


@cuda.jit
def per_unit_flag_barrier(flags, out):
    sm = cuda.shared.array(64, np.int64)
    tid = cuda.threadIdx.x
    if flags[tid] > 0:
        sm[tid] = tid
        cuda.syncthreads()
        out[tid] = sm[(tid + 1) % cuda.blockDim.x]


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_divergent_barrier_is_a_typed_error_naming_the_line(variant):
    """Units of one cube disagreeing on a barrier's condition raise DivergenceError (a
    CompileError) whose message and lineno name the barrier's line."""
    prog = build_program(per_unit_flag_barrier.py_func)
    flags = np.ones(64, np.int32)
    out = np.zeros(64, np.int64)
    getattr(prog, variant)(1, 1, 1, 64, 1, 1, flags, out)
    np.testing.assert_array_equal(out, (np.arange(64) + 1) % 64)
    flags[17] = 0
    with pytest.raises(DivergenceError) as info:
        getattr(prog, variant)(1, 1, 1, 64, 1, 1, flags, out)
    line = line_of(per_unit_flag_barrier, "cuda.syncthreads()")
    assert isinstance(info.value, CompileError)
    assert info.value.lineno == line
    assert f"divergent barrier at line {line}" in str(info.value)


def test_divergent_barrier_fails_the_write_set_and_breaks_nothing():
    """Through a client: the divergent launch's output carries the DivergenceError, an
    unrelated buffer stays readable, and the next launch into the same buffer repairs it."""
    kernel = cube.kernel(per_unit_flag_barrier)
    client = cube.client("cpu")
    bad = np.ones(64, np.int32)
    bad[5] = 0
    flags_bad = client.create(bad)
    flags_good = client.create(np.ones(64, np.int32))
    out = client.empty(64, np.int64)
    other = client.create(np.arange(10.0))
    client.launch(kernel, 1, 64, flags_bad, out)
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    assert isinstance(info.value.root, DivergenceError)
    assert info.value.lineno == line_of(per_unit_flag_barrier, "cuda.syncthreads()")
    np.testing.assert_array_equal(client.read(other), np.arange(10.0))
    client.launch(kernel, 1, 64, flags_good, out)
    np.testing.assert_array_equal(client.read(out), (np.arange(64) + 1) % 64)


@cuda.jit
def barrier_under_thread_if(a, n):
    i = cuda.grid(1)
    if i < n:
        cuda.syncthreads()
    a[i] = 1


def test_unit_dependent_condition_agreeing_at_run_time():
    """`if i < n: syncthreads()` runs when n covers the whole cube, and fails when it splits
    it (numba-style launch: the failure raises at the call, as DivergenceError too)."""
    kernel = cube.kernel(barrier_under_thread_if)
    a = np.zeros(32, np.int64)
    with cube.client("cpu"):
        kernel[1, 32](a, 32)
        assert np.all(a == 1)
        with pytest.raises(DivergenceError):
            kernel[1, 32](a, 10)


@cuda.jit
def countdown(counts, out):
    """Every cube loops as many times as its count (read from memory), with barriers inside."""
    sm = cuda.shared.array(32, np.int64)
    tid = cuda.threadIdx.x
    k = 0
    while k < counts[cuda.blockIdx.x]:
        sm[tid] = k + tid
        cuda.syncthreads()
        out[cuda.grid(1)] += sm[cuda.blockDim.x - 1 - tid]
        cuda.syncthreads()
        k += 1


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_while_with_memory_condition_and_barriers(variant):
    """A `while` around barriers whose trip count is read from memory (uniform per cube at run
    time) gives NumPy's answer."""
    prog = build_program(countdown.py_func)
    counts = np.array([0, 3, 1, 5], np.int64)
    out = np.zeros(128, np.int64)
    getattr(prog, variant)(4, 1, 1, 32, 1, 1, counts, out)
    tid = np.arange(32)
    expected = np.concatenate([sum((k + 31 - tid) for k in range(c)) + 0 * tid
                               for c in counts])
    np.testing.assert_array_equal(out, expected)


@cuda.jit
def range_from_memory(counts, out):
    sm = cuda.shared.array(32, np.int64)
    tid = cuda.threadIdx.x
    for k in range(counts[cuda.blockIdx.x * cuda.blockDim.x + tid]):
        sm[tid] = k * tid
        cuda.syncthreads()
        out[cuda.grid(1)] += sm[cuda.blockDim.x - 1 - tid]
        cuda.syncthreads()


def test_for_range_from_memory_around_barriers():
    """`for k in range(n)` around barriers with n read per unit from memory runs when every
    unit of a cube reads the same n (NumPy reference), and is a DivergenceError otherwise."""
    prog = build_program(range_from_memory.py_func)
    per_cube = np.array([2, 0, 4], np.int64)
    counts = np.repeat(per_cube, 32)
    out = np.zeros(96, np.int64)
    prog.serial(3, 1, 1, 32, 1, 1, counts, out)
    tid = np.arange(32)
    expected = np.concatenate([sum(k * (31 - tid) for k in range(c)) + 0 * tid
                               for c in per_cube])
    np.testing.assert_array_equal(out, expected)
    counts[40] = 1
    with pytest.raises(DivergenceError):
        prog.serial(3, 1, 1, 32, 1, 1, counts, out)


@cuda.jit
def stop_at_first_negative(x, out, last, rounds):
    """Round by round, every unit checks its element; all stop at the first round where any
    unit saw a negative value, through a flag in shared memory read after a barrier."""
    failed = cuda.shared.array(1, np.int32)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    base = cuda.blockIdx.x * n * rounds
    if t == 0:
        failed[0] = 0
    cuda.syncthreads()
    r = 0
    while r < rounds:
        v = x[base + r * n + t]
        if v < 0:
            failed[0] = 1
        cuda.syncthreads()
        if failed[0]:
            break
        r += 1
        if failed[0] + r == 2:        # reads the flag (0 here): true for every unit at r == 2
            continue
        out[base + r * n - n + t] = v * 2
        cuda.syncthreads()
    last[cuda.grid(1)] = r


def stop_at_first_negative_numpy(x, cubes, n, rounds):
    """NumPy's reading of ``stop_at_first_negative``."""
    out = np.zeros(x.size)
    last = np.zeros(cubes * n, np.int64)
    for c in range(cubes):
        block = x[c * n * rounds:(c + 1) * n * rounds].reshape(rounds, n)
        r = 0
        while r < rounds and not (block[r] < 0).any():
            r += 1
            if r != 2:
                out[c * n * rounds + (r - 1) * n:c * n * rounds + r * n] = block[r - 1] * 2
        last[c * n:(c + 1) * n] = r
    return out, last


@pytest.mark.parametrize("variant", ["serial", "parallel"])
def test_break_and_continue_under_a_shared_flag_run_when_units_agree(variant):
    """``if failed[0]: break`` (and a ``continue`` under a condition on the same flag) in a loop
    with barriers, where ``failed`` is shared memory every unit reads after a barrier: the
    condition is the same for the whole cube at run time, so the kernel runs, each cube leaving
    at its own round: NumPy's answer."""
    prog = build_program(stop_at_first_negative.py_func)
    cubes, n, rounds = 3, 8, 4
    x = np.arange(cubes * n * rounds, dtype=np.float64)
    x[0 * n * rounds + 2 * n + 5] = -1.0          # cube 0 stops in round 2; cube 1 never
    x[2 * n * rounds + 0 * n + 7] = -3.0          # cube 2 stops at once
    out, last = np.zeros(x.size), np.zeros(cubes * n, np.int64)
    getattr(prog, variant)(cubes, 1, 1, n, 1, 1, x, out, last, rounds)
    want_out, want_last = stop_at_first_negative_numpy(x, cubes, n, rounds)
    np.testing.assert_array_equal(last, want_last)
    np.testing.assert_array_equal(out, want_out)


@cuda.jit
def leave_on_own_element(x, out):
    sm = cuda.shared.array(8, np.float64)
    t = cuda.threadIdx.x
    for r in range(4):
        sm[t] = x[r * 8 + t]
        cuda.syncthreads()
        if sm[t] < 0:
            break
        out[t] += sm[(t + 1) % 8]
        cuda.syncthreads()


def test_break_taken_by_some_units_is_a_divergence_error_naming_its_line():
    """A ``break`` out of a loop with barriers taken by some units of a cube and not others (a
    GPU would hang at the next barrier): through a client, the launch fails its write set with
    ``DivergenceError`` naming the ``break``'s line; with every unit agreeing it runs."""
    kernel = cube.kernel(leave_on_own_element)
    client = cube.client("cpu")
    x = np.ones(32)
    x[16:24] = -1.0                                 # round 2: every unit leaves
    out = client.create(np.zeros(8))
    client.launch(kernel, 1, 8, client.create(x), out)
    np.testing.assert_array_equal(client.read(out), np.full(8, 2.0))
    x[3] = -1.0                                     # round 0: unit 3 alone
    client.launch(kernel, 1, 8, client.create(x), out)
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    line = line_of(leave_on_own_element, "break")
    assert isinstance(info.value.root, DivergenceError)
    assert info.value.lineno == line and f"divergent break at line {line}" in str(info.value)
