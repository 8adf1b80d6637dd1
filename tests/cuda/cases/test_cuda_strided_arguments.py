"""Strided launch arguments on the CUDA backend: F-ordered handles, strided handle views and
foreign arrays with any strides (stride 0 and negative ones included), on the simulator, the
fake driver and a GPU.

The kernel must see exactly the elements NumPy's same view holds: on the GPU path the binding's
strides are packed into the kernel's array struct (``packed_launch.ParamBlock.pack_array``), which
the fake driver decodes and runs the kernel over; host copies (create, read, write) move the
bytes of the view's layout. Expectations are NumPy's.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube.errors import LaunchArgumentError

from _cuda_setup import only


@cube.kernel
def affine_2d(a, out):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        out[i, j] = 3.0 * a[i, j] + i - j


@cube.kernel
def negate_2d(a):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        a[i, j] = -a[i, j]


@cube.kernel
def copy_1d(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


def _expected_affine(a: np.ndarray) -> np.ndarray:
    i, j = np.indices(a.shape)
    return 3.0 * a + i - j


_HOST = np.arange(5 * 7, dtype=np.float64).reshape(5, 7)


def test_f_ordered_handles_keep_their_layout(client):
    """create() of an F array gives an F handle; a kernel reading it computes NumPy's result, and
    read() gives an F-ordered array equal to the original."""
    f = client.create(np.asfortranarray(_HOST))
    assert f.layout == "F" and f.strides == np.asfortranarray(_HOST).strides
    back = client.read(f)
    assert back.flags.f_contiguous
    np.testing.assert_array_equal(back, _HOST)
    out = client.empty(_HOST.shape)
    client.launch(affine_2d, (1, 1), (8, 8), f, out)
    np.testing.assert_array_equal(client.read(out), _expected_affine(_HOST))
    out_f = client.empty(_HOST.shape, order="F")
    client.launch(affine_2d, (1, 1), (8, 8), client.create(_HOST), out_f)
    np.testing.assert_array_equal(client.read(out_f), _expected_affine(_HOST))


def test_strided_handle_views_are_kernel_arguments(client):
    """Column, stepped and reversed views of a handle reach the kernel with their strides: it
    reads and writes exactly NumPy's elements of the same views."""
    wide = np.repeat(_HOST, 2, axis=1)
    h = client.create(wide)
    out = client.empty(_HOST.shape)
    client.launch(affine_2d, (1, 1), (8, 8), h[:, ::2], out)
    np.testing.assert_array_equal(client.read(out), _expected_affine(wide[:, ::2]))
    client.launch(affine_2d, (1, 1), (8, 8), h[::-1, 1::2], out)
    np.testing.assert_array_equal(client.read(out), _expected_affine(wide[::-1, 1::2]))
    col = client.empty(5)
    client.launch(copy_1d, 1, 32, h[:, 3], col)
    np.testing.assert_array_equal(client.read(col), wide[:, 3])
    client.launch(negate_2d, (1, 1), (8, 8), h[1:4, ::3])
    expected = wide.copy()
    expected[1:4, ::3] *= -1
    np.testing.assert_array_equal(client.read(h), expected)


def test_host_writes_follow_the_layout(client):
    """write() into an F handle and into a reversed view stores NumPy's elements."""
    f = client.create(np.zeros((5, 7), order="F"))
    client.write(f, _HOST)
    np.testing.assert_array_equal(client.read(f), _HOST)
    h = client.create(np.zeros(6))
    client.write(h[::-1], np.arange(6.0))
    np.testing.assert_array_equal(client.read(h), np.arange(6.0)[::-1])


def test_reads_of_views_with_gaps_and_repeats(client):
    """read() of a column, a reversed step and a broadcast (stride 0) view gives NumPy's elements
    of the same views, as a compact array."""
    h = client.create(_HOST)
    np.testing.assert_array_equal(client.read(h[:, 3]), _HOST[:, 3])
    np.testing.assert_array_equal(client.read(h[::-2, 1::3]), _HOST[::-2, 1::3])
    b = h.strided_view(7 * 8, (4, 7), (0, 8))
    np.testing.assert_array_equal(client.read(b), np.broadcast_to(_HOST[1], (4, 7)))


@only("fake", "gpu", why="the simulator's memory is host memory, written element by element")
def test_host_writes_into_views_with_gaps_are_refused(client):
    """On a GPU one copy cannot write a column without its neighbours: write() into such a view
    is a LaunchArgumentError on the issuing thread, and the buffer and device stay usable."""
    h = client.create(_HOST)
    with pytest.raises(LaunchArgumentError, match="non-contiguous"):
        client.write(h[:, 1], np.zeros(5))
    np.testing.assert_array_equal(client.read(h), _HOST)


@only("fake", "gpu", why="the array interface of device memory")
def test_exported_interface_has_the_strides(client):
    """A strided handle's __cuda_array_interface__ gives NumPy's strides of the same view and the
    address of its first element; a C handle's says None, as before."""
    h = client.create(_HOST)
    base = h.__cuda_array_interface__["data"][0]
    assert h.__cuda_array_interface__["strides"] is None
    view = h[1:, ::-2]
    cai = view.__cuda_array_interface__
    assert cai["strides"] == _HOST[1:, ::-2].strides and cai["shape"] == _HOST[1:, ::-2].shape
    assert cai["data"][0] == base + 1 * 56 + 6 * 8


def _foreign(fake_api, data, view=None):
    from _cuda_fake import ForeignArray

    return ForeignArray(fake_api, data, view=view)


@only("fake", why="foreign arrays described with any strides by the fake driver")
def test_foreign_arrays_with_any_strides_are_bound_in_place(client, fake_api):
    """A foreign array interface with strides (a transpose, a broadcast row, a reversed axis) is
    bound without a copy: the kernel reads NumPy's elements of that view, and writes through."""
    data = np.arange(12.0).reshape(3, 4)
    cases = {
        "transpose": ((0, (4, 3), (8, 32)), data.T),
        "broadcast": ((32, (5, 4), (0, 8)), np.broadcast_to(data[1], (5, 4))),
        "reversed": ((64, (3, 4), (-32, 8)), data[::-1]),
    }
    for name, (view, expected) in cases.items():
        arr = _foreign(fake_api, data, view)
        out = client.empty(expected.shape)
        client.launch(affine_2d, (1, 1), (8, 8), arr, out)
        np.testing.assert_array_equal(client.read(out), _expected_affine(expected), err_msg=name)
    arr = _foreign(fake_api, data, (0, (4, 3), (8, 32)))
    client.launch(negate_2d, (1, 1), (8, 8), arr)
    client.sync()
    np.testing.assert_array_equal(arr.get(), -data)


@only("fake", why="foreign arrays described with any strides by the fake driver")
def test_foreign_strides_past_their_memory_are_refused(client, fake_api):
    """Strides that reach past the foreign allocation are a LaunchArgumentError on the issuing
    thread (nothing queued), and the device keeps working."""
    data = np.arange(12.0)
    past = _foreign(fake_api, data, (0, (12,), (16,)))
    before = _foreign(fake_api, data, (0, (3,), (-8,)))
    out = client.empty(12)
    for arr in (past, before):
        with pytest.raises(LaunchArgumentError, match="strides do not fit"):
            client.launch(copy_1d, 1, 32, arr, out)
    client.launch(copy_1d, 1, 32, client.create(data), out)
    np.testing.assert_array_equal(client.read(out), data)


@only("fake", why="a DLPack producer on the fake device")
def test_strided_dlpack_arrays_are_bound(client, fake_api):
    """A DLPack tensor with strides inside its memory (every other element) is bound in place
    with them: the kernel reads NumPy's data[::2]."""
    from _cuda_fake import DLPackArray

    data = np.arange(32.0)
    arr = DLPackArray(fake_api, data, strides=(2,), shape=(16,))
    out = client.empty(16)
    client.launch(copy_1d, 1, 32, arr, out)
    np.testing.assert_array_equal(client.read(out), data[::2])


@only("sim", why="numba's device arrays under the simulator are NumPy views")
def test_simulator_device_array_views_are_bound_in_place(client):
    """Views of numba device arrays (a column, a transpose, a reversed axis, a broadcast) are
    bound with their strides: the kernel reads NumPy's elements, and writes reach the array."""
    host = np.arange(20.0).reshape(4, 5)
    d = cuda.to_device(host)
    out = client.empty(4)
    client.launch(copy_1d, 1, 32, d[:, 2], out)
    np.testing.assert_array_equal(client.read(out), host[:, 2])
    out2 = client.empty((5, 4))
    client.launch(affine_2d, (1, 1), (8, 8), d.T, out2)
    np.testing.assert_array_equal(client.read(out2), _expected_affine(host.T))
    out3 = client.empty((4, 5))
    client.launch(affine_2d, (1, 1), (8, 8), d[::-1], out3)
    np.testing.assert_array_equal(client.read(out3), _expected_affine(host[::-1]))
    client.launch(negate_2d, (1, 1), (8, 8), d.T)
    client.sync()
    np.testing.assert_array_equal(d.copy_to_host(), -host)


def test_eager_launch_with_f_host_arrays(client):
    """kernel[grid, block](F arrays) on the CUDA client: NumPy's results, copied back into the
    caller's F-ordered arrays."""
    a = np.asfortranarray(_HOST.copy())
    out = np.zeros(_HOST.shape, order="F")
    with client:
        affine_2d[(1, 1), (8, 8)](a, out)
        negate_2d[(1, 1), (8, 8)](a)
    np.testing.assert_array_equal(out, _expected_affine(_HOST))
    np.testing.assert_array_equal(a, -_HOST)


def test_pack_array_writes_the_binding_strides():
    """The parameter block of an array carries the strides it is given (numba-cuda's layout:
    meminfo, parent, nitems, itemsize, data, shape..., strides...), C ones when given None."""
    from numba_cube.backends.cuda.launch.packed_launch import ArgLayout, ParamBlock

    layout = ArgLayout((("array", 2, 8), ("array", 2, 8)))
    block = ParamBlock(layout)
    block.pack_array(0, 0x1000, (5, 7), 8, (8, 40))
    block.pack_array(1, 0x2000, (5, 7), 8)
    ptrs = (ctypes.c_void_p * layout.nparams).from_address(block.address)
    first = [ctypes.c_int64.from_address(ptrs[k]).value for k in range(9)]
    second = [ctypes.c_int64.from_address(ptrs[9 + k]).value for k in range(9)]
    assert first == [0, 0, 35, 8, 0x1000, 5, 7, *np.asfortranarray(_HOST).strides]
    assert second == [0, 0, 35, 8, 0x2000, 5, 7, *_HOST.strides]
