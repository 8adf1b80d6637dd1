"""Interop on the CUDA backend: foreign device arrays as launch arguments without copies,
``__cuda_array_interface__`` export, and handles of another device refused (API.md)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube import ForeignHandleError
from numba_cube.errors import LaunchArgumentError

from _cuda_setup import KIND, only

TPB = 32


@cube.kernel
def add_into(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += x[i]


@cube.kernel
def copy_into(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


def _numba_device_array(client, fake_api, host):
    """A numba-cuda device array (the simulator's under the simulator), or the fake driver's
    stand-in for a foreign library's array."""
    if KIND == "fake":
        from _cuda_fake import ForeignArray

        return ForeignArray(fake_api, host), lambda a: a.get()
    return cuda.to_device(host), lambda a: a.copy_to_host()


def test_foreign_device_array_is_bound_without_a_copy(client, fake_api):
    """A numba-cuda device array passed to launch is the kernel's argument itself: the kernel's
    writes are visible through the array, and its contents are read in place."""
    host = np.arange(32, dtype=np.float64)
    dev, to_host = _numba_device_array(client, fake_api, host)
    ones = client.create(np.ones(32))
    client.launch(add_into, 1, TPB, ones, dev)       # written in place
    client.sync()
    np.testing.assert_array_equal(to_host(dev), host + 1.0)
    out = client.create(np.zeros(32))
    client.launch(copy_into, 1, TPB, dev, out)       # read in place
    np.testing.assert_array_equal(client.read(out), host + 1.0)


def test_same_foreign_array_orders_launches_across_streams(client, fake_api):
    """Launches on two streams that share a foreign array are ordered by it like by a handle
    (the adoption maps it to one buffer)."""
    dev, to_host = _numba_device_array(client, fake_api, np.zeros(32))
    ones = client.create(np.ones(32))
    out = client.create(np.zeros(32))
    a = client.set_stream(cube.StreamId.new())
    b = client.set_stream(cube.StreamId.new())
    a.launch(add_into, 1, TPB, ones, dev)
    b.launch(copy_into, 1, TPB, dev, out)
    np.testing.assert_array_equal(client.read(out), np.ones(32))


@only("gpu", "fake", why="the simulator's handles are host memory")
def test_handle_exports_cuda_array_interface(client):
    """A CUDA handle exposes __cuda_array_interface__ v3: pointer, shape, typestr, no strides, and
    the stream of its last writer while that write may still run."""
    h = client.create(np.arange(16, dtype=np.float32))
    cai = h.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (16,) and cai["typestr"] == "<f4"
    assert cai["strides"] is None and cai["data"][0] != 0 and cai["data"][1] is False
    view = h[4:8]
    assert view.__cuda_array_interface__["data"][0] == cai["data"][0] + 16
    client.launch(copy_into, 1, TPB, client.create(np.zeros(16, np.float32)), h)
    stream = h.__cuda_array_interface__["stream"]
    assert stream is None or isinstance(stream, int)
    client.sync()
    assert h.__cuda_array_interface__["stream"] is None


@only("gpu", "fake", why="the simulator's handles are host memory")
def test_a_failed_buffer_raises_its_failure_instead_of_exporting(client):
    """The __cuda_array_interface__ of a buffer whose writer failed (a cube of 2048 units,
    refused) raises that LaunchFailure, as a read does: no pointer to garbage is handed out. An
    unrelated buffer still exports, and relaunching the writer repairs the buffer."""
    src = client.create(np.arange(32.0))
    out = client.create(np.zeros(32))
    other = client.create(np.ones(32))
    client.launch(copy_into, 1, 2048, src, out)
    with pytest.raises(cube.LaunchFailure) as info:
        out.__cuda_array_interface__
    assert isinstance(info.value.root, cube.LaunchArgumentError)
    assert other.__cuda_array_interface__["shape"] == (32,)
    client.launch(copy_into, 1, TPB, src, out)
    assert out.__cuda_array_interface__["shape"] == (32,)
    np.testing.assert_array_equal(client.read(out), np.arange(32.0))


@only("gpu", why="needs numba-cuda on a real device")
def test_numba_consumes_our_handle(client):
    """numba.cuda.as_cuda_array(handle) sees the handle's data (the export is usable)."""
    h = client.create(np.arange(8, dtype=np.float64))
    arr = cuda.as_cuda_array(h)
    np.testing.assert_array_equal(arr.copy_to_host(), np.arange(8.0))


@only("gpu", why="CuPy arrays need a GPU")
def test_cupy_array_argument(client):
    """A CuPy array is bound without a copy, and CuPy's own stream then sees our write."""
    cp = pytest.importorskip("cupy")
    a = cp.zeros(32, dtype=cp.float64)
    client.launch(add_into, 1, TPB, client.create(np.ones(32)), a)
    np.testing.assert_array_equal(cp.asnumpy(a), np.ones(32))


@only("gpu", why="torch tensors need a GPU")
def test_torch_tensor_argument(client):
    """A torch CUDA tensor is bound without a copy; after client.sync() torch sees our write."""
    torch = pytest.importorskip("torch")
    t = torch.zeros(32, dtype=torch.float64, device="cuda")
    client.launch(add_into, 1, TPB, client.create(np.ones(32)), t)
    client.sync()
    np.testing.assert_array_equal(t.cpu().numpy(), np.ones(32))


def test_handle_of_another_device_is_refused(client, second_client):
    """A handle of cuda:1 passed to a client of cuda:0 raises ForeignHandleError on the issuing
    thread, before anything is queued."""
    other = second_client.create(np.ones(8))
    mine = client.create(np.zeros(8))
    with pytest.raises(ForeignHandleError):
        client.launch(copy_into, 1, 8, other, mine)
    second_client.launch(copy_into, 1, 8, other, second_client.create(np.zeros(8)))
    np.testing.assert_array_equal(client.read(mine), np.zeros(8))


@only("fake", "gpu", why="foreign arrays of the other device")
def test_foreign_array_of_another_device_is_refused(client, second_client, fake_api):
    """A foreign device array that lives on another GPU is refused like a foreign handle."""
    if KIND == "fake":
        from _cuda_fake import ForeignArray

        arr = ForeignArray(fake_api, np.ones(8), device=1)
    else:
        with cuda.gpus[1]:
            arr = cuda.to_device(np.ones(8))
    with pytest.raises(ForeignHandleError):
        client.launch(copy_into, 1, 8, arr, client.create(np.zeros(8)))


# -- DLPack (an array that speaks only DLPack) ------------------------------------------------
class DLPackOnly:
    """A real library's CUDA array seen through DLPack alone (its array interface hidden)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def _dlpack_array(fake_api, host, **kw):
    """A DLPack-only CUDA array and how to read it back on the host."""
    if KIND == "fake":
        from _cuda_fake import DLPackArray

        arr = DLPackArray(fake_api, host, **kw)
        return arr, arr.get
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(host).cuda()
    if kw.get("strides"):
        t = torch.from_numpy(np.ascontiguousarray(np.tile(host, 2))).cuda()[::2]
    return DLPackOnly(t), lambda: t.cpu().numpy()


@only("fake", "gpu", why="DLPack producers on a CUDA device")
def test_dlpack_array_is_bound_without_a_copy(client, fake_api):
    """A CUDA array that speaks only DLPack is bound in place (the kernel's writes are visible
    through it); the producer is asked for the legacy stream, and the capsule is left
    unconsumed, so its own destructor frees the managed tensor."""
    host = np.arange(32, dtype=np.float64)
    arr, to_host = _dlpack_array(fake_api, host)
    client.launch(add_into, 1, TPB, client.create(np.ones(32)), arr)
    out = client.create(np.zeros(32))
    client.launch(copy_into, 1, TPB, arr, out)
    np.testing.assert_array_equal(client.read(out), host + 1.0)
    client.sync()
    np.testing.assert_array_equal(to_host(), host + 1.0)
    if KIND == "fake":
        assert arr.streams_asked and set(arr.streams_asked) == {1}
        assert not any(arr.capsule_consumed(c) for c in arr.capsules)


@only("fake", "gpu", why="DLPack producers on a CUDA device")
def test_dlpack_arrays_a_kernel_cannot_bind_are_refused(client, fake_api):
    """A DLPack array whose strides reach past the memory that holds it, or one in host memory,
    raises LaunchArgumentError on the issuing thread; nothing is queued and the device keeps
    working. (A strided array inside its memory is bound with its strides:
    test_cuda_strided_arguments.py.)"""
    host = np.arange(32, dtype=np.float64)
    out = client.create(np.zeros(16))
    if KIND == "fake":
        from _cuda_fake import DLPackArray

        # 16 elements of memory, 16 elements 2 apart: the view reaches 15 elements past its end
        past_the_end = DLPackArray(fake_api, host[:16].copy(), strides=(2,))
        with pytest.raises(LaunchArgumentError, match="strides do not fit"):
            client.launch(copy_into, 1, 16, past_the_end, out)
        on_host = DLPackArray(fake_api, host, device_type=1)
        with pytest.raises(LaunchArgumentError, match="CPU memory"):
            client.launch(copy_into, 1, 16, on_host, out)
    client.launch(copy_into, 1, 16, client.create(np.ones(16)), out)
    np.testing.assert_array_equal(client.read(out), np.ones(16))


@only("fake", "gpu", why="DLPack arrays of the other device")
def test_dlpack_array_of_another_device_is_refused(client, second_client, fake_api):
    """A DLPack array on another GPU is refused like a foreign handle."""
    if KIND == "fake":
        from _cuda_fake import DLPackArray

        arr = DLPackArray(fake_api, np.ones(8), device=1)
    else:
        torch = pytest.importorskip("torch")
        arr = DLPackOnly(torch.ones(8, dtype=torch.float64, device="cuda:1"))
    with pytest.raises(ForeignHandleError):
        client.launch(copy_into, 1, 8, arr, client.create(np.zeros(8)))
