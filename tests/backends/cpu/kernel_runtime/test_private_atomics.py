"""The nopython helpers of privatized global atomics (``kernel_runtime/private_atomics.py``): the
run-time policy, the private update and its fallback to the real atomic, the merge, the alias
test."""

import numpy as np
import pytest
from numba import njit

from numba_cube.backends.cpu.kernel_runtime import private_atomics as P


@njit
def _copy(real, units_per_chunk, data_bytes, nchunks, alias_free):
    return P.private_copy(real, units_per_chunk, data_bytes, nchunks, alias_free)


@njit
def _add(real, private, idx, val):
    P.private_add(real, private, idx, val)


@njit
def _sub(real, private, idx, val):
    P.private_sub(real, private, idx, val)


@njit(boundscheck=True)
def _add_checked(real, private, idx, val):
    P.private_add(real, private, idx, val)


@njit
def _merge(real, private):
    P.merge_private(real, private)


@njit
def _alias(a, b):
    return P.may_alias(a, b)


@njit
def _bytes(x):
    return P.array_bytes(x)


BIG = 1 << 30          # a chunk's units / the launch's bytes large enough for any rule


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint64, np.uint8])
def test_integer_arrays_get_a_zeroed_copy_of_their_shape(dtype):
    """An integer array that the policy admits gets a zeroed C-contiguous copy of its shape."""
    real = np.full((3, 5), 7, dtype)[:, ::2]
    copy = _copy(real, BIG, BIG, 4, True)
    assert copy.shape == real.shape and copy.dtype == real.dtype
    assert not copy.any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_arrays_get_an_ordered_log_not_a_copy(dtype):
    """Float atomics are never summed privately (re-association of float adds can give what no
    interleaving gives): a float array gets an ordered log (``logged_atomics``)."""
    log = _copy(np.zeros(16, dtype), BIG, BIG, 4, True)
    assert log.ndim == 1 and log.size > 1 and log[0] == 0       # [count, offset, value, ...]


def test_policy_refuses_aliases_small_chunks_and_large_copies():
    """An aliased array, a chunk with fewer than UNITS_PER_ELEMENT units per element, or copies
    above 1/MEMORY_FRACTION of the launch's bytes get an empty copy; each limit is inclusive."""
    real = np.zeros((4, 8), np.int64)
    units = real.size * P.UNITS_PER_ELEMENT
    workers = min(8, P.MAX_WORKERS)
    data = real.nbytes * workers * P.MEMORY_FRACTION
    assert _copy(real, units, data, 8, True).shape == (4, 8)
    assert _copy(real, units, data, 8, False).shape == (0, 8)
    assert _copy(real, units - 1, data, 8, True).shape == (0, 8)
    assert _copy(real, units, data - 1, 8, True).shape == (0, 8)
    assert _copy(np.zeros(0, np.int64), BIG, BIG, 1, True).shape == (0,)
    assert P.worth_privatizing(real.size, real.nbytes, units, data, 8)
    assert not P.worth_privatizing(real.size, real.nbytes, units - 1, data, 8)


def test_in_range_updates_go_to_the_copy_with_numbas_wraparound():
    """Inside the array, add/sub update the private copy only (negative indices wrap as in
    NumPy); the real array is untouched until the merge."""
    real = np.zeros((2, 3), np.int64)
    private = np.zeros_like(real)
    _add(real, private, (1, -1), 5)
    _sub(real, private, (0, 0), 2)
    expected = np.zeros_like(real)
    expected[1, -1] += 5
    expected[0, 0] -= 2
    np.testing.assert_array_equal(private, expected)
    assert not real.any()
    _merge(real, private)
    np.testing.assert_array_equal(real, expected)


def test_with_an_empty_copy_the_real_atomic_runs():
    """When the policy refused (empty copy), each update is the real atomic on the real array,
    at the index NumPy's wraparound gives."""
    base = np.zeros(10, np.int32)
    real = base[1:9]
    _add(real, np.zeros(0, np.int32), 3, 1)
    _add(real, np.zeros(0, np.int32), -1, 2)
    expected = np.zeros(10, np.int32)
    expected[1:9][3] += 1
    expected[1:9][-1] += 2
    np.testing.assert_array_equal(base, expected)


@pytest.mark.parametrize("add", [_add, _add_checked], ids=["unchecked", "boundscheck"])
@pytest.mark.parametrize("index", [8, -9, (8,)])
def test_out_of_range_raises_index_error_and_writes_nothing(add, index):
    """An index outside the array raises IndexError, as NumPy indexing does (and as the real
    atomics do, with or without boundscheck), and writes neither the copy nor the array's
    neighbours."""
    base = np.zeros(10, np.int64)
    real = base[1:9]
    with pytest.raises(IndexError):
        real[index] += 1
    private = np.zeros(8, np.int64)
    with pytest.raises(IndexError):
        add(real, private, index, 1)
    assert not base.any() and not private.any()


def test_merge_wraps_like_the_atomics():
    """The merge adds modulo 2^n, as the atomics the copy stands for would."""
    real = np.array([250, 1], np.uint8)
    _merge(real, np.array([10, 0], np.uint8))
    np.testing.assert_array_equal(real, (np.array([250, 1]) + [10, 0]) % 256)


def test_may_alias_compares_address_ranges():
    """Overlapping views alias, disjoint slices and scalars do not; anything else is assumed to
    (tuples may carry arrays)."""
    a = np.zeros(100)
    assert _alias(a[10:20], a[15:30])
    assert _alias(a[::-1], a[50:51])
    assert not _alias(a[:50], a[50:])
    assert not _alias(a[:10], np.zeros(10))
    assert not _alias(a[:10], 3.0)
    assert _alias(a[:10], (1, 2))
    assert not _alias(a[:0], a)


def test_array_bytes():
    """Arrays count their nbytes, anything else 0."""
    assert _bytes(np.zeros((3, 4), np.int32)) == 48
    assert _bytes(7) == 0
