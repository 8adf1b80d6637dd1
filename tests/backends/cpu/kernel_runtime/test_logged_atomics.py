"""Float global atomics deferred in a per-chunk ordered log (``kernel_runtime/logged_atomics.py``):
every add still reaches the real array, rounded on its own, in the log's order, with the
atomics' index rules; the policy; and, through the translator, kernels whose float atomics are
logged give what NumPy's sequential ``np.add.at`` gives, over many cubes and both variants."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from numba import cuda, njit

from numba_cube.backends.cpu.kernel_runtime import logged_atomics as L
from numba_cube.backends.cpu.kernel_runtime import private_atomics as P
from numba_cube.backends.cpu.translate import build_program

BLOCK = 128


@njit
def _log(real, units, alias_free, nchunks=4):
    return L.new_log(real, units, nchunks, alias_free)


def _capacity(log):
    return (log.size - 1) // 2


@njit
def _add_all(real, log, idx, vals, subtract):
    """Each (idx[k], vals[k]) through the log, then the chunk's end (the merge)."""
    for k in range(idx.shape[0]):
        if subtract:
            P.private_sub(real, log, idx[k], vals[k])
        else:
            P.private_add(real, log, idx[k], vals[k])
    P.merge_private(real, log)


@njit
def _add_2d(real, log, i, j, val):
    P.private_add(real, log, (i, j), val)


@njit(boundscheck=True)
def _add_checked(real, log, i, val):
    P.private_add(real, log, i, val)


def test_policy_logs_only_alias_free_chunks_with_enough_units():
    """A log holds min(LOG_CAPACITY, units of the chunk) entries; an aliased array, a chunk
    under LOG_MIN_UNITS units, a launch of under LOG_MIN_CHUNKS chunks (little contention) or an
    empty array gets an empty log (every add is the atomic)."""
    real = np.zeros(8)
    assert _capacity(_log(real, 10 ** 6, True)) == L.LOG_CAPACITY
    assert _capacity(_log(real, L.LOG_MIN_UNITS, True)) == L.LOG_MIN_UNITS
    assert _capacity(_log(real, L.LOG_MIN_UNITS - 1, True)) == 0
    assert _capacity(_log(real, 10 ** 6, False)) == 0
    assert _capacity(_log(real, 10 ** 6, True, nchunks=L.LOG_MIN_CHUNKS - 1)) == 0
    assert _capacity(_log(real, 10 ** 6, True, nchunks=L.LOG_MIN_CHUNKS)) == L.LOG_CAPACITY
    assert _capacity(_log(np.zeros(0), 10 ** 6, True)) == 0


def test_adds_wait_in_the_log_until_the_chunk_ends():
    """Until the merge the real array is untouched; the merge applies every entry in order."""
    real = np.zeros(4)
    log = _log(real, 10 ** 6, True)
    _add_2d(real.reshape(2, 2), _log(real.reshape(2, 2), 10 ** 6, True), 1, -1, 2.5)
    assert real[3] == 0.0                       # that log was never applied
    _add_all(real, log, np.array([0, 3, -1], np.int64), np.array([1.0, 2.0, 4.0]), False)
    np.testing.assert_array_equal(real, [1.0, 0.0, 0.0, 6.0])
    assert log[0] == 0                          # emptied by the merge


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_log_never_reassociates(dtype):
    """1e16 (1e8 in float32) plus many ones is itself in every order of single adds, as on the
    GPU, where a partial sum of the ones would not be; a log that fills up is applied and
    reused, and the result is still every add alone."""
    big = dtype(1e16 if dtype == np.float64 else 1e8)
    real = np.array([big], dtype)
    log = _log(real, 300, True)                 # a short log: 3 * 300 adds fill it 3 times
    _add_all(real, log, np.zeros(900, np.int64), np.ones(900), False)
    assert real[0] == big


def test_strided_views_and_subtraction():
    """Byte offsets follow any strides (a reversed, stepped 2-D view); a sub logs the value cast
    to the dtype and negated, also for unsigned values."""
    base = np.zeros((4, 6), np.float32)
    view = base[::-1, ::2]
    log = _log(view, 10 ** 6, True)
    for (i, j), v in [((0, 0), 1.5), ((3, -1), 2.0), ((-1, 2), 0.25)]:
        _add_2d(view, log, i, j, v)
    _add_all(view[0], _log(view[0], 10 ** 6, True), np.array([1], np.int64),
             np.array([3], np.uint32), True)
    expected = np.zeros((4, 6), np.float32)
    ev = expected[::-1, ::2]
    ev[0, 0] += 1.5; ev[3, -1] += 2.0; ev[-1, 2] += 0.25; ev[0, 1] -= 3
    # _add_2d's log was never merged: apply it now through the merge
    _merge(view, log)
    np.testing.assert_array_equal(base, expected)


@njit
def _merge(real, log):
    P.merge_private(real, log)


def test_runs_on_nan_and_signed_zero_elements_terminate_and_round_each_add():
    """A run lands with one compare-and-swap on the element's *bits*: a NaN element (never
    equal to itself as a float) and -0.0 (equal to 0.0 as a float) are swapped like any other;
    each add of a run is rounded on its own in the array's dtype (float32 here: 2^24 + 1 + 1
    stays 2^24, where adding the run's sum 2 first would not)."""
    real = np.array([np.nan, -0.0, 2.0 ** 24], np.float32)
    idx = np.array([0, 0, 1, 2, 2], np.int64)
    _add_all(real, _log(real, 10 ** 6, True), idx, np.array([1.0, 2.0, 0.0, 1.0, 1.0]), False)
    assert np.isnan(real[0])
    assert real[1] == 0.0 and not np.signbit(real[1])        # -0.0 + 0.0 is +0.0
    assert real[2] == np.float32(2.0 ** 24)


@njit(nogil=True)
def _flush_many(real, idx, vals, rounds):
    for _ in range(rounds):
        _add_all(real, L.new_log(real, 10 ** 6, 4, True), idx, vals, False)


def test_chunks_applying_runs_at_once_lose_no_add():
    """Several threads apply runs onto the same elements at once (the compare-and-swap retries
    when another run landed first): no add is lost or applied twice (integer values: the total
    is exact in every order)."""
    import threading
    real = np.zeros(3)
    idx = np.array([0] * 700 + [1] * 5 + [0] * 300 + [2], np.int64)
    vals = np.ones(idx.size)
    threads = [threading.Thread(target=_flush_many, args=(real, idx, vals, 200)) for _ in range(4)]
    _flush_many(real, idx[:1], vals[:1], 0)     # compile before the threads start
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(real, [4 * 200 * 1000.0, 4 * 200 * 5.0, 4 * 200 * 1.0])


@pytest.mark.parametrize("index", [8, -9])
def test_out_of_range_raises_at_once_and_writes_nothing(index):
    """An index outside the array is never logged: today's atomic raises IndexError on the
    call (with or without boundscheck) and nothing lands in the array or next to it."""
    base = np.zeros(10)
    real = base[1:9]
    log = _log(real, 10 ** 6, True)
    with pytest.raises(IndexError):
        _add_checked(real, log, index, 1.0)
    with pytest.raises(IndexError):
        _add_all(real, log, np.array([0, index], np.int64), np.ones(2), False)
    assert log[0] == 1 and not base.any()       # the add before the bad one is still pending


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.lists(st.tuples(st.integers(-40, 39), st.integers(-8, 8)),
                                    min_size=0, max_size=3000),
       st.integers(L.LOG_MIN_UNITS, 2 * L.LOG_CAPACITY), st.booleans())
def test_any_sequence_of_adds_equals_numpys_sequential_add_at(size, updates, units, subtract):
    """Property: for any sizes, in-range indices (negative ones wrap), log capacities and
    add/sub, the array after the merge equals np.add.at's sequential reference (small integer
    values: every order gives the same floats, so the comparison is exact)."""
    updates = [(i, v) for i, v in updates if -size <= i < size]
    idx = np.array([i for i, _ in updates], np.int64)
    vals = np.array([v for _, v in updates], np.float64)
    real = np.zeros(size)
    _add_all(real, _log(real, units, True), idx, vals, subtract)
    expected = np.zeros(size)
    np.add.at(expected, idx, -vals if subtract else vals)
    np.testing.assert_array_equal(real, expected)


# ---- through the translator ------------------------------------------------------------------

@cuda.jit
def weighted_histogram(bins, weights, h):
    i = cuda.grid(1)
    if i < bins.size:
        cuda.atomic.add(h, bins[i], weights[i])
        cuda.atomic.sub(h, 0, 1.0)


@cuda.jit
def block_sums_into_one(x, total):
    i = cuda.grid(1)
    if cuda.threadIdx.x == 0:
        s = 0.0
        for k in range(i, min(i + cuda.blockDim.x, x.size)):
            s += x[k]
        cuda.atomic.add(total, 0, s)


@pytest.mark.parametrize("variant", ["serial", "parallel"])
@pytest.mark.parametrize("n", [1 << 18, 1000])
def test_kernels_with_logged_float_atomics_match_numpy(variant, n):
    """A float histogram (with a sub into bin 0) and one add per cube into one element, over
    many cubes: the generated chunk logs them (``__priv_h``) and the result equals np.add.at's
    (integer-valued weights: exact in every order). n = 1000 gives chunks too small to log."""
    rng = np.random.default_rng(n)
    bins = rng.integers(0, 64, n)
    weights = rng.integers(-4, 5, n).astype(np.float64)
    h = np.zeros(64)
    program = build_program(weighted_histogram.py_func)
    assert "__priv_h" in program.source
    getattr(program, variant)((n + BLOCK - 1) // BLOCK, 1, 1, BLOCK, 1, 1, bins, weights, h)
    expected = np.zeros(64)
    np.add.at(expected, bins, weights)
    expected[0] -= n
    np.testing.assert_array_equal(h, expected)

    x = rng.integers(-3, 4, n).astype(np.float64)
    total = np.zeros(1)
    getattr(build_program(block_sums_into_one.py_func), variant)(
        (n + BLOCK - 1) // BLOCK, 1, 1, BLOCK, 1, 1, x, total)
    assert total[0] == x.sum()


@pytest.mark.parametrize("chunks", [L.LOG_MIN_CHUNKS, 8])
def test_chunks_of_one_launch_on_threads_of_their_own(chunks):
    """The generated chunk function called for every piece of one launch, each piece on a
    thread of its own (as the parallel variant runs them, with as many pieces as a many-core
    machine cuts): the pieces log, apply their logs at once, and the sums are exact."""
    import sys
    import threading
    n = 1 << 18
    rng = np.random.default_rng(chunks)
    bins = rng.integers(0, 64, n)
    weights = rng.integers(-4, 5, n).astype(np.float64)
    x = rng.integers(-3, 4, n).astype(np.float64)
    h, total = np.zeros(64), np.zeros(1)
    cubes = (n + BLOCK - 1) // BLOCK
    calls = []
    for kernel, args in ((weighted_histogram, (bins, weights, h)), (block_sums_into_one, (x, total))):
        program = build_program(kernel.py_func)
        module = sys.modules[program.serial.py_func.__module__]
        chunk = getattr(module, f"{kernel.py_func.__name__}__chunk")
        calls += [(chunk, (c, chunks, cubes, 1, 1, BLOCK, 1, 1) + args) for c in range(chunks)]
    for chunk, args in calls[::chunks]:
        chunk(*args[:1], 1, *args[2:5], 0, *args[6:])      # compile: a piece of no units
    threads = [threading.Thread(target=chunk, args=args) for chunk, args in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = np.zeros(64)
    np.add.at(expected, bins, weights)
    expected[0] -= n
    np.testing.assert_array_equal(h, expected)
    assert total[0] == x.sum()


@cuda.jit
def add_then_overrun(h, bad_cube):
    if cuda.threadIdx.x == 0:
        b = cuda.blockIdx.x
        cuda.atomic.add(h, b if b != bad_cube else h.size, 1.0)


@pytest.mark.parametrize("chunks", [1, L.LOG_MIN_CHUNKS])
def test_a_piece_of_a_many_piece_launch_logs_and_a_failed_piece_applies_nothing(chunks):
    """The first piece of a launch cut into LOG_MIN_CHUNKS pieces logs its adds: when its last
    cube raises IndexError, none of its earlier adds has reached the array (a failed piece
    applies nothing, as a failed piece merges no private copy: the launch has failed and its
    buffers carry the failure). A launch of one piece keeps the atomic: its adds landed."""
    import sys
    cubes = 64
    program = build_program(add_then_overrun.py_func)
    chunk = getattr(sys.modules[program.serial.py_func.__module__], "add_then_overrun__chunk")
    last = cubes // chunks - 1                   # the first piece's last cube
    h = np.zeros(cubes)
    with pytest.raises(IndexError):
        chunk(0, chunks, cubes, 1, 1, BLOCK, 1, 1, h, last)
    assert h[last:].sum() == 0
    np.testing.assert_array_equal(h[:last], 0.0 if chunks > 1 else 1.0)
