"""Bounds-checked CPU kernels (backends/cpu/bounds.py, bounds_runtime.py): with
``cube.client("cpu", boundscheck=True)`` an index out of bounds is an IndexError, as numba-cuda's
simulator raises (the ``cudasim`` backend runs the same kernel as the reference), whose message
names the kernel, the array (parameter or shared array), the index, the axis and its size, and
the cube and unit that went out of bounds; it is the failure the launch's outputs carry. In-bounds
kernels give NumPy's results, a negative index wraps as in numba-cuda, and without bounds
checking the generated module has no checks at all.

Each kernel goes out of bounds in exactly one unit, so the unit named is known in advance.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, float64

import numba_cube as cube
from numba_cube.backends.cpu.translate import translate_source


@cube.kernel
def shifted_copy(a, out, shift):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i + shift]


@cube.kernel
def one_unit_reads_past(a, out, di, dj):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        if i == 3 and j == 2:
            out[i, j] = a[i + di, j + dj]
        else:
            out[i, j] = a[i, j]


@cube.kernel
def shared_neighbour(a, out):
    sm = cuda.shared.array(8, dtype=float64)
    t = cuda.threadIdx.x
    sm[t] = a[cuda.grid(1)]
    cuda.syncthreads()
    if cuda.blockIdx.x == 1:
        out[cuda.grid(1)] = sm[t + 1]        # unit 7 of cube 1 reads sm[8]
    else:
        out[cuda.grid(1)] = sm[t]


@cube.kernel
def by_ids(a, out):
    i = cuda.threadIdx.x + 8 * cuda.blockIdx.x      # not cuda.grid's form: cube-by-cube loops
    if i < out.size:
        out[i] = a[i]


@cube.kernel
def literal_index(a, out):
    if cuda.grid(1) == 3:
        out[0] = a[12]


@pytest.fixture(scope="module")
def checked():
    return cube.client("cpu", boundscheck=True)


def _failure(client, kernel, count, dim, *args):
    """The root cause a bounds-checked launch of ``kernel`` on ``args`` (NumPy arrays become
    buffers; the last one is the output) leaves on its output; the simulator's launch of the same
    kernel must fail with the same class."""
    roots = []
    for device in (client, cube.client("cudasim")):
        bound = [device.create(a) if isinstance(a, np.ndarray) else a for a in args]
        out = [b for b in bound if isinstance(b, cube.Handle)][-1]
        device.launch(kernel, count, dim, *bound)
        with pytest.raises(cube.LaunchFailure) as info:
            device.read(out)
        roots.append(info.value.root)
    assert isinstance(roots[1], IndexError)
    return roots[0]


def test_1d_read_past_the_end_names_array_index_axis_and_unit(checked):
    """a of 10 elements read at i + 0 by units 0..10 of 2 cubes of 8: unit 2 of cube 1 reads
    a[10], and the IndexError says so, in numba's words for the axis and size."""
    root = _failure(checked, shifted_copy, 2, 8, np.arange(10.0), np.zeros(11), 0)
    assert type(root) is IndexError
    assert str(root) == ("kernel shifted_copy: a[10] out of bounds for axis 0 with size 10 "
                         "(cube (1, 0, 0), unit (2, 0, 0))")


def test_a_launch_large_enough_to_run_in_parallel_names_its_unit(checked):
    """A launch of 157 cubes of 256 units (past the size below which the serial variant runs)
    re-raises the failing chunk's IndexError with its unit: unit 40000 is unit 64 of cube 156."""
    root = _failure(checked, shifted_copy, 157, 256, np.arange(40000.0), np.zeros(40001), 0)
    assert str(root) == ("kernel shifted_copy: a[40000] out of bounds for axis 0 with size 40000 "
                         "(cube (156, 0, 0), unit (64, 0, 0))")


def test_ids_used_apart_name_their_unit_and_a_literal_index_still_raises(checked):
    """A kernel indexing by threadIdx.x + 8 * blockIdx.x (its units looped cube by cube) reports
    unit 2 of cube 1 for a[10]; a literal a[12] is still an IndexError (Numba's own check)."""
    root = _failure(checked, by_ids, 2, 8, np.arange(10.0), np.zeros(11))
    assert str(root) == ("kernel by_ids: a[10] out of bounds for axis 0 with size 10 "
                         "(cube (1, 0, 0), unit (2, 0, 0))")
    root = _failure(checked, literal_index, 1, 8, np.arange(10.0), np.zeros(1))
    assert type(root) is IndexError          # a literal index: Numba's own check and message


def test_1d_negative_index_below_the_start(checked):
    """A negative index wraps around as in numba-cuda (a[-1] is the last element); one below
    -size is out of bounds and reported with its value."""
    a = checked.create(np.arange(10.0))
    out = checked.empty(10)
    checked.launch(shifted_copy, 1, 16, a, out, -1)
    np.testing.assert_array_equal(checked.read(out), np.arange(10.0)[np.arange(10) - 1])
    root = _failure(checked, shifted_copy, 1, 16, np.arange(10.0), np.zeros(10), -11)
    assert str(root) == ("kernel shifted_copy: a[-11] out of bounds for axis 0 with size 10 "
                         "(cube (0, 0, 0), unit (0, 0, 0))")


@pytest.mark.parametrize("di, dj, shown, axis, size", [
    (0, 5, "3, 7", 1, 5),
    (2, 0, "5, 2", 0, 4),
])
def test_2d_names_both_indices_and_the_axis(checked, di, dj, shown, axis, size):
    """On a (4, 5) array only unit (i, j) = (3, 2) reads a[3 + di, 2 + dj]: with cubes of (2, 4)
    units that is cube (1, 0, 0), unit (1, 2, 0); the message shows both indices and the axis
    that is out of range. The other units' writes are NumPy's a[i, j]."""
    root = _failure(checked, one_unit_reads_past, (2, 1), (2, 4), np.arange(20.0).reshape(4, 5),
                    np.zeros((4, 4)), di, dj)
    assert str(root) == (f"kernel one_unit_reads_past: a[{shown}] out of bounds for axis {axis} "
                         f"with size {size} (cube (1, 0, 0), unit (1, 2, 0))")


def test_shared_array_names_the_shared_array(checked):
    """Unit 7 of cube 1 reads its cube's shared array sm (8 elements) at 8: the IndexError names
    sm, not a parameter."""
    root = _failure(checked, shared_neighbour, 2, 8, np.arange(16.0), np.zeros(16))
    assert str(root) == ("kernel shared_neighbour: sm[8] out of bounds for axis 0 with size 8 "
                         "(cube (1, 0, 0), unit (7, 0, 0))")


def test_in_bounds_kernels_are_unchanged(checked):
    """Checked kernels that stay in bounds compute NumPy's values (1-D, 2-D, shared memory)."""
    host = np.arange(20.0).reshape(4, 5)
    out = checked.empty((4, 4))
    checked.launch(one_unit_reads_past, (2, 1), (2, 4), checked.create(host), out, 0, 1)
    expected = host[:, :4].copy()
    expected[3, 2] = host[3, 3]
    np.testing.assert_array_equal(checked.read(out), expected)
    out = checked.empty(8)
    checked.launch(shared_neighbour, 1, 8, checked.create(np.arange(8.0)), out)   # cube 0 only
    np.testing.assert_array_equal(checked.read(out), np.arange(8.0))


def test_without_boundscheck_the_module_has_no_checks():
    """Bounds checking off, the generated module neither imports nor calls the checker (the
    kernel's code is what it is without this feature); on, every checked subscript calls it."""
    for kernel in (shifted_copy, one_unit_reads_past, shared_neighbour):
        off = translate_source(kernel.py_func, boundscheck=False)
        assert "bounds_runtime" not in off and "__checked" not in off
        assert "__checked(" in translate_source(kernel.py_func, boundscheck=True)
