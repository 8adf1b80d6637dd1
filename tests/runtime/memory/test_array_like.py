"""Handles as NumPy and numba.cuda users treat arrays (runtime/memory/array_like.py, runtime/memory/handle.py).

``np.asarray(h)`` and ``h.copy_to_host()`` wait for the handle's writers and give a host copy;
``h.reshape`` of a contiguous handle and N-D basic indexing (ints, slices, ``None``, ``...``)
give views sharing the memory, which kernels read and write with their strides; an index or a
reshape that would be a copy is a clear error. Every expected value is NumPy's, on the CPU client.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda

import numba_cube as cube


@pytest.fixture(scope="module")
def client():
    return cube.client("cpu")


@cube.kernel
def add_one(a, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + 1


@cube.kernel
def scale_2d(a, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = 2 * a[i, j] + i


@cube.kernel
def fill_index(out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = i


_HOST = np.arange(6 * 8, dtype=np.float64).reshape(6, 8)


def test_asarray_waits_for_the_writer_and_copies(client):
    """np.asarray(h) holds what the launch before it wrote (it waits), and is a copy: a later
    launch into the buffer does not change it."""
    out = client.empty(1000)
    client.launch(fill_index, 8, 128, out)
    first = np.asarray(out)
    np.testing.assert_array_equal(first, np.arange(1000.0))
    client.launch(add_one, 8, 128, out, out)
    np.testing.assert_array_equal(first, np.arange(1000.0))
    np.testing.assert_array_equal(np.asarray(out), np.arange(1000.0) + 1)


def test_asarray_takes_numpy2_keywords(client):
    """dtype= converts as NumPy's astype; copy=True copies; copy=False (no copy allowed) is
    NumPy's ValueError, since the device's memory must be copied to reach the host."""
    h = client.create(_HOST)
    as_f32 = np.asarray(h, dtype=np.float32)
    assert as_f32.dtype == np.float32
    np.testing.assert_array_equal(as_f32, _HOST.astype(np.float32))
    np.testing.assert_array_equal(np.array(h, copy=True), _HOST)
    with pytest.raises(ValueError, match="copy=False"):
        np.asarray(h, copy=False)


def test_asarray_of_views_is_numpys_view(client):
    """np.asarray of strided views (a column, steps, a reversed axis) equals NumPy's same view."""
    h = client.create(_HOST)
    for key in [(slice(None), 1), (slice(None, None, 2), slice(1, 3)), (slice(None, None, -1), 2),
                (Ellipsis, 0), (1, Ellipsis), (None, slice(2, 4)), (slice(None), None, 3)]:
        np.testing.assert_array_equal(np.asarray(h[key]), _HOST[key], err_msg=str(key))


def test_copy_to_host_returns_or_fills_an_array(client):
    """copy_to_host() is a new array of the contents; copy_to_host(ary) fills ary and returns it
    (numba's DeviceNDArray.copy_to_host), also with a stream argument."""
    h = client.create(_HOST)
    np.testing.assert_array_equal(h.copy_to_host(), _HOST)
    target = np.zeros_like(_HOST)
    assert h.copy_to_host(target) is target
    np.testing.assert_array_equal(target, _HOST)
    column = np.zeros(6)
    h[:, 5].copy_to_host(column, stream=0)
    np.testing.assert_array_equal(column, _HOST[:, 5])


def test_copy_to_host_refuses_arrays_that_do_not_fit(client):
    """An ary of another shape or dtype is a ValueError, a read-only one too, a non-array a
    TypeError; the handle stays readable."""
    h = client.create(_HOST)
    with pytest.raises(ValueError, match="shape"):
        h.copy_to_host(np.zeros(48))
    with pytest.raises(ValueError, match="dtype"):
        h.copy_to_host(np.zeros(_HOST.shape, np.float32))
    readonly = np.zeros_like(_HOST)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        h.copy_to_host(readonly)
    with pytest.raises(TypeError):
        h.copy_to_host([0.0] * 48)
    np.testing.assert_array_equal(np.asarray(h), _HOST)


def test_reshape_of_a_contiguous_handle_is_a_view(client):
    """reshape (ints, a tuple, -1) of a C handle shares its memory: a launch writing the reshaped
    view changes the original as NumPy's reshape view would."""
    h = client.create(_HOST)
    flat = h.reshape(-1)
    assert flat.shape == (48,) and h.reshape((4, 12)).shape == (4, 12) == h.reshape(4, -1).shape
    client.launch(add_one, 1, 64, flat, flat)
    np.testing.assert_array_equal(np.asarray(h), _HOST + 1)
    expected = (_HOST + 1).reshape(3, 16)
    out = client.empty((3, 16))
    client.launch(scale_2d, (1, 1), (4, 16), h.reshape(3, 16), out)
    np.testing.assert_array_equal(np.asarray(out), 2 * expected + np.arange(3)[:, None])


def test_reshape_in_f_order_of_an_f_handle(client):
    """reshape(order="F") of an F handle is NumPy's F reshape of the same array, a view."""
    f = client.create(np.asfortranarray(_HOST))
    view = f.reshape(8, 6, order="F")
    assert view.layout == "F"
    np.testing.assert_array_equal(np.asarray(view), _HOST.reshape(8, 6, order="F"))


def test_reshape_that_needs_a_copy_is_refused(client):
    """Reshaping a strided view, or a C handle in F order, would need a copy: ValueError saying
    so; a shape of another size or two -1 is NumPy's ValueError."""
    h = client.create(_HOST)
    with pytest.raises(ValueError, match="copy"):
        h[:, 1].reshape(2, 3)
    with pytest.raises(ValueError, match="copy"):
        h.reshape(8, 6, order="F")
    with pytest.raises(ValueError):
        h.reshape(5, 10)
    with pytest.raises(ValueError):
        h.reshape(-1, -1)


def test_strided_views_are_launch_arguments(client):
    """Views h[:, 1], h[::2, 1:3], h[..., ::-3] go to kernels with their strides: the kernel reads
    and writes exactly NumPy's elements of the same views, and nothing else of the buffer."""
    h = client.create(_HOST)
    column = client.empty(6)
    client.launch(add_one, 1, 32, h[:, 1], column)
    np.testing.assert_array_equal(np.asarray(column), _HOST[:, 1] + 1)
    block = client.empty((3, 2))
    client.launch(scale_2d, (1, 1), (4, 4), h[::2, 1:3], block)
    np.testing.assert_array_equal(np.asarray(block),
                                  2 * _HOST[::2, 1:3] + np.arange(3)[:, None])
    client.launch(scale_2d, (1, 1), (8, 8), client.create(np.ones((6, 3))), h[..., ::-3])
    expected = _HOST.copy()
    expected[..., ::-3] = 2 + np.arange(6)[:, None]
    np.testing.assert_array_equal(np.asarray(h), expected)


@pytest.mark.parametrize("index, what", [([0, 2], "fancy"), (np.array([1, 3]), "fancy"),
                                         (np.array([True] * 6), "fancy"), (True, "boolean"),
                                         ((slice(None), [1]), "fancy"), (1.5, "float")])
def test_indices_that_select_a_copy_are_type_errors(client, index, what):
    """A list, array or boolean index selects a copy: TypeError naming it and what to do."""
    h = client.create(_HOST)
    with pytest.raises(TypeError, match=what) as info:
        h[index]
    assert "np.asarray(h)[index]" in str(info.value)


def test_index_shape_errors(client):
    """Two ellipses, or more indices than axes, are IndexErrors as in NumPy."""
    h = client.create(_HOST)
    with pytest.raises(IndexError):
        h[..., 1, ...]
    with pytest.raises(IndexError):
        h[1, 2, 3]


_ITEM = st.one_of(st.integers(-4, 3), st.slices(4), st.none())


@settings(max_examples=80, deadline=None)
@given(items=st.lists(_ITEM, max_size=3), ellipsis_at=st.one_of(st.none(), st.integers(0, 3)))
def test_basic_indexing_matches_numpy(items, ellipsis_at):
    """Any tuple of ints, slices, None with at most one '...' gives NumPy's view of a 3-D array
    (the same shape and elements), as long as NumPy takes it."""
    client = cube.client("cpu")
    host = np.arange(4 * 4 * 4, dtype=np.int32).reshape(4, 4, 4)
    if ellipsis_at is not None:
        items.insert(min(ellipsis_at, len(items)), Ellipsis)
    key = tuple(items)
    try:
        expected = host[key]
    except IndexError:
        with pytest.raises(IndexError):
            client.create(host)[key]
        return
    view = client.create(host)[key]
    assert view.shape == expected.shape
    np.testing.assert_array_equal(np.asarray(view), expected)


def test_dlpack_export_is_the_memory_after_the_writer(client):
    """np.from_dlpack(h) waits for the launch that writes h, then views the buffer's memory
    without a copy (a later launch's write shows through it), read-only; views export with
    NumPy's strides of the same view."""
    out = client.empty(1000)
    client.launch(fill_index, 8, 128, out)
    exported = np.from_dlpack(out)
    np.testing.assert_array_equal(exported, np.arange(1000.0))
    assert not exported.flags.writeable
    client.launch(add_one, 8, 128, out, out)
    client.sync()
    np.testing.assert_array_equal(exported, np.arange(1000.0) + 1)
    h = client.create(_HOST)
    column = np.from_dlpack(h[:, 3])
    assert column.strides == _HOST[:, 3].strides
    np.testing.assert_array_equal(column, _HOST[:, 3])
    assert h.__dlpack_device__() == _HOST.__dlpack_device__()


def test_dlpack_copy_and_old_consumers(client):
    """copy=True exports a writeable copy; a consumer that cannot signal read-only (no
    max_version: DLPack before 1.0) gets a BufferError instead of a writeable alias; a stream
    is a BufferError on the CPU."""
    h = client.create(_HOST)
    copied = np.from_dlpack(h, copy=True)
    copied[0, 0] = -1
    np.testing.assert_array_equal(np.asarray(h), _HOST)
    with pytest.raises(BufferError):
        h.__dlpack__()
    with pytest.raises(BufferError, match="stream"):
        h.__dlpack__(stream=1, max_version=(1, 0))


def test_a_dlpack_export_keeps_the_memory_alive(client):
    """The exported array holds the handle: dropping every handle of the buffer does not give its
    memory back (for another buffer to reuse) while the export lives."""
    import gc
    import weakref

    h = client.create(_HOST)
    alive = weakref.ref(h)
    exported = np.from_dlpack(h)
    del h
    gc.collect()
    assert alive() is not None
    for _ in range(4):
        client.create(np.zeros_like(_HOST))
    np.testing.assert_array_equal(exported, _HOST)
    del exported
    gc.collect()
    assert alive() is None


@cube.kernel(writes=("out",))
def does_not_compile(out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = "not a number"      # a typing error: the launch fails, its output carries it


def test_reads_of_a_failed_buffer_raise_its_failure(client):
    """np.asarray, copy_to_host and a DLPack export of a buffer whose writer failed raise that
    LaunchFailure (nothing stale is handed out), as client.read does."""
    out = client.empty(4)
    client.launch(does_not_compile, 1, 32, out)
    for read in (np.asarray, lambda h: h.copy_to_host(), np.from_dlpack):
        with pytest.raises(cube.LaunchFailure):
            read(out)
