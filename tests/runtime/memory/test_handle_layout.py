"""Layouts of handles and bindings (runtime/memory/handle.py, runtime/memory/layout.py) against NumPy.

A binding carries byte strides (``None`` for C-contiguous); its layout must be what
``numba.typeof`` says of the NumPy array with those strides, its region must cover every byte
the view can touch, and a handle view must hold exactly the elements NumPy's basic indexing
gives. Every expectation here is NumPy's (or numba's ``typeof``/``sentry_contiguous``), on the
CPU client.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda
from numpy.lib.array_utils import byte_bounds

import numba_cube as cube
from numba_cube.kernel.signatures import launch_types
from numba_cube.runtime.memory.handle import Binding


@pytest.fixture(scope="module")
def client():
    return cube.client("cpu")


def _binding_of(view: np.ndarray, base: np.ndarray) -> Binding:
    """The binding a view of ``base``'s bytes is: offset of its element [0, ..., 0], strides."""
    offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    strides = None if view.flags.c_contiguous else view.strides
    return Binding(1, offset, view.shape, view.dtype, strides)


def _touched(view: np.ndarray, base: np.ndarray) -> tuple[int, int]:
    """NumPy's byte bounds of ``view`` (lowest byte, one past the highest), counted from
    ``base``'s first byte."""
    start = base.__array_interface__["data"][0]
    low, high = byte_bounds(view)
    return low - start, high - start


_BASE = np.arange(4 * 5 * 6, dtype=np.float64).reshape(4, 5, 6)
_VIEWS = {
    "C": _BASE,
    "F copy": np.asfortranarray(_BASE),
    "transpose": _BASE.T,
    "axes swapped": _BASE.swapaxes(0, 1),
    "step": _BASE[::2],
    "negative step": _BASE[::-1, :, ::-2],
    "column": _BASE[:, 1, :],
    "inner slice": _BASE[1:3, 2:4, 1:5],
    "broadcast": np.lib.stride_tricks.as_strided(_BASE, (3, 4, 6), (0, 48, 8)),
    "row of F": np.asfortranarray(_BASE)[1:3],
}


@pytest.mark.parametrize("name", sorted(_VIEWS))
def test_binding_layout_and_region_match_numpy(name):
    """Layout is numba.typeof's for the same NumPy array; the region spans every byte the view's
    elements occupy (exactly, for these views: lowest to highest byte)."""
    view = _VIEWS[name]
    base = view if view.base is None else view.base
    while isinstance(base.base, np.ndarray):
        base = base.base
    b = _binding_of(view, base)
    assert b.layout == numba.typeof(view).layout
    low, high = _touched(view, base)
    _, region_low, region_high = b.region
    assert (region_low, region_high) == (low, high)
    assert launch_types((b,)) == (numba.typeof(view),)


def test_c_contiguous_strides_are_kept_as_none(client):
    """A view whose strides happen to be C-contiguous is the plain binding (strides None): it is
    equal to, and hashes like, the handle's binding without strides."""
    h = client.create(np.zeros((3, 4)))
    same = h.strided_view(0, (3, 4), (32, 8))
    assert same.binding() == h.binding() and hash(same.binding()) == hash(h.binding())
    assert same.binding().strides is None and same.layout == "C"


def test_f_ordered_arrays_stay_f_ordered(client):
    """create() of an F-contiguous array (asfortranarray, a transpose) keeps its layout: the
    handle is F, and read() gives an F-contiguous array equal to the original."""
    for host in (np.asfortranarray(np.arange(12.0).reshape(3, 4)), np.arange(24.0).reshape(4, 6).T):
        h = client.create(host)
        assert h.layout == numba.typeof(host).layout == "F"
        assert h.strides == host.strides
        out = client.read(h)
        assert out.flags.f_contiguous
        np.testing.assert_array_equal(out, host)


def test_other_layouts_are_copied_contiguous(client):
    """create() of a strided host array that is neither C nor F copies it C-contiguous."""
    host = np.arange(24.0).reshape(4, 6)[::2, ::3]
    h = client.create(host)
    assert h.layout == "C"
    np.testing.assert_array_equal(client.read(h), host)


def test_empty_order_f(client):
    """empty(..., order="F") has NumPy's F strides; any other order is a ValueError."""
    h = client.empty((3, 5), np.float32, order="F")
    assert h.strides == np.empty((3, 5), np.float32, order="F").strides and h.layout == "F"
    with pytest.raises(ValueError):
        client.empty(3, order="K")


_KEYS = st.one_of(
    st.integers(-4, 3),
    st.slices(4),
    st.tuples(st.slices(4), st.one_of(st.integers(-5, 4), st.slices(5))),
    st.tuples(st.slices(4), st.slices(5), st.one_of(st.integers(-6, 5), st.slices(6))),
)


@settings(max_examples=60, deadline=None)
@given(key=_KEYS, fortran=st.booleans())
def test_views_hold_numpy_elements(key, fortran):
    """h[key] reads what NumPy's basic indexing of the same array gives (a bare int keeps its
    axis, so it is compared with key:key+1), for C and F handles alike."""
    client = cube.client("cpu")
    host = np.arange(4 * 5 * 6, dtype=np.int32).reshape(4, 5, 6)
    if fortran:
        host = np.asfortranarray(host)
    h = client.create(host)
    if isinstance(key, int):
        expected = host[key:key + 1] if key != -1 else host[-1:]
    else:
        expected = host[key]
    view = h[key]
    assert view.shape == expected.shape
    assert view.layout == numba.typeof(expected).layout
    np.testing.assert_array_equal(client.read(view), expected)


def test_row_slices_of_an_f_handle_are_not_contiguous(client):
    """Slicing an F handle along its first axis gives a strided view holding NumPy's rows, never
    the next bytes of memory."""
    host = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    h = client.create(host)
    rows = h[1:3]
    assert rows.layout == numba.typeof(host[1:3]).layout == "A"
    np.testing.assert_array_equal(client.read(rows), host[1:3])


def test_writes_into_strided_views_touch_only_their_elements(client):
    """write() into a column, a step or an F handle sets exactly the elements NumPy's
    assignment into the same view sets."""
    host = np.arange(20.0).reshape(4, 5)
    h = client.create(host)
    expected = host.copy()
    client.write(h[:, 2], [-1.0, -2.0, -3.0, -4.0])
    expected[:, 2] = [-1.0, -2.0, -3.0, -4.0]
    client.write(h[::3, ::2], np.full((2, 3), 7.0))
    expected[::3, ::2] = 7.0
    np.testing.assert_array_equal(client.read(h), expected)
    f = client.create(np.asfortranarray(host))
    client.write(f, expected)
    np.testing.assert_array_equal(client.read(f), expected)


def test_view_as_needs_a_c_contiguous_handle(client):
    """view_as reinterprets bytes in element order, which a strided view's are not: ValueError."""
    h = client.create(np.arange(12.0).reshape(3, 4))
    with pytest.raises(ValueError, match="C-contiguous"):
        h[:, 1].view_as(np.uint8)


def test_strided_view_must_stay_inside_the_handle(client):
    """strided_view refuses a view reaching outside the handle's bytes (ValueError), and a
    stride-0 view repeats NumPy's broadcast of the element."""
    h = client.create(np.arange(4.0))
    with pytest.raises(ValueError, match="outside"):
        h.strided_view(0, (5,), (8,))
    with pytest.raises(ValueError, match="outside"):
        h.strided_view(0, (2,), (-8,))
    b = h.strided_view(16, (3, 2), (0, 8))
    np.testing.assert_array_equal(client.read(b), np.broadcast_to(np.arange(4.0)[2:], (3, 2)))


@cube.kernel
def _scale_rows(a, out):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        out[i, j] = a[i, j] * (i + 1)
        a[i, j] = -a[i, j]


def test_eager_launch_keeps_f_arrays_and_copies_back(client):
    """A numba-style launch with F-ordered host arrays computes NumPy's results, and the arrays
    it writes are updated in place, still F-ordered."""
    a = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    out = np.zeros((3, 4), order="F")
    original = a.copy()
    with client:
        _scale_rows[(1, 1), (4, 4)](a, out)
    np.testing.assert_array_equal(out, original * np.arange(1, 4)[:, None])
    np.testing.assert_array_equal(a, -original)
    assert a.flags.f_contiguous and out.flags.f_contiguous


@cube.kernel
def _sum_rows(a, out):
    i = cuda.grid(1)
    if i < out.size:
        s = 0.0
        for j in range(a.shape[1]):
            s += a[i, j]
        out[i] = s


def test_eager_launch_binds_broadcast_host_arrays(client):
    """A broadcast host array (np.broadcast_to) is bound with its stride-0 axis, as numba.cuda's
    auto_device binds it: the kernel reads NumPy's broadcast values."""
    row = np.arange(5.0)
    a = np.broadcast_to(row, (3, 5))
    out = np.zeros(3)
    with client:
        _sum_rows[1, 32](a, out)
    np.testing.assert_array_equal(out, a.sum(axis=1))


def test_eager_launch_refuses_what_numba_refuses(client):
    """A host array that is no contiguous block (a[::2] of a 2-D array) is refused with
    LayoutError, a ValueError, where numba.cuda's sentry_contiguous raises ValueError too; the
    client keeps working."""
    from numba.cuda.cudadrv.devicearray import sentry_contiguous

    a = np.arange(30.0).reshape(6, 5)[:, ::2]
    with pytest.raises(ValueError):
        sentry_contiguous(a)
    out = np.zeros(3)
    with client, pytest.raises(cube.LayoutError, match="non-contiguous"):
        _sum_rows[1, 32](a, out)
    with client:
        _sum_rows[1, 32](np.ascontiguousarray(a), out)
    np.testing.assert_array_equal(out, a.sum(axis=1)[:3])
