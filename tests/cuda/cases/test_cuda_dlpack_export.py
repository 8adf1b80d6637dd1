"""DLPack export of CUDA handles (backends/cuda/memory/dlpack_export.py, through Handle.__dlpack__ and
runtime/memory/array_like.py): the capsule's fields against NumPy's view of the same bytes, the wait for
the buffer's writers, the failure a read would raise, the lifetime of the memory while a capsule
or its consumer holds it, refused requests, and (on a GPU) a round trip through torch or CuPy.

On the fake driver device pointers are host addresses, so the bytes a capsule points at are read
back with NumPy and compared with what NumPy says the same view holds. Under the simulator a
handle's memory is host memory that no CUDA consumer could use: the export is refused.
"""

from __future__ import annotations

import ctypes
import gc
import weakref

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube

from _cuda_setup import only

TPB = 64
_HOST = np.arange(6 * 8, dtype=np.float64).reshape(6, 8)

_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", ctypes.pythonapi))
_get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
# A capsule keeps the name's ``char *``: these live as long as the module.
_USED_NAMES = {name: ctypes.create_string_buffer(b"used_" + name)
               for name in (b"dltensor", b"dltensor_versioned")}


@cube.kernel
def fill_index(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = i


@cube.kernel
def copy_into(src, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = src[i]


def _managed(capsule):
    """The capsule's managed tensor (versioned or not), read as a consumer would."""
    from numba_cube.backends.cuda.memory.dlpack import DLManagedTensor
    from numba_cube.backends.cuda.memory.dlpack_export import DLManagedTensorVersioned

    name = _get_name(capsule)
    struct = DLManagedTensorVersioned if name == b"dltensor_versioned" else DLManagedTensor
    return struct.from_address(_get_pointer(capsule, name))


def _bytes_at(tensor, dtype) -> np.ndarray:
    """What the tensor describes, read from its (fake device = host) memory with its strides."""
    ndim = tensor.ndim
    shape = tuple(tensor.shape[i] for i in range(ndim))
    strides = tuple(tensor.strides[i] * dtype.itemsize for i in range(ndim))
    low = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
    high = sum(max(0, (n - 1) * s) for n, s in zip(shape, strides)) + dtype.itemsize
    raw = (ctypes.c_char * (high - low)).from_address(tensor.data + tensor.byte_offset + low)
    return np.ndarray(shape, dtype, buffer=raw, offset=-low, strides=strides).copy()


@only("fake", why="reads the capsule's memory on the host")
def test_capsule_fields_describe_numpys_view(client):
    """A versioned capsule (max_version=(1, 0)) of a strided view says kDLCUDA on device 0,
    float64 (code 2, 64 bits, 1 lane), NumPy's shape and strides in elements, DLPack 1.0 with the
    read-only flag, and points at exactly NumPy's elements of the same view."""
    h = client.create(_HOST)
    view = h[::2, 1:7:3]
    expected = _HOST[::2, 1:7:3]
    assert view.__dlpack_device__() == (2, 0)
    capsule = view.__dlpack__(max_version=(1, 0))
    assert _get_name(capsule) == b"dltensor_versioned"
    managed = _managed(capsule)
    assert (managed.version.major, managed.version.minor) == (1, 0)
    assert managed.flags & 1                                    # DLPACK_FLAG_BITMASK_READ_ONLY
    t = managed.dl_tensor
    assert (t.device.device_type, t.device.device_id) == (2, 0)
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (2, 64, 1)
    assert tuple(t.shape[i] for i in range(t.ndim)) == expected.shape
    assert tuple(t.strides[i] for i in range(t.ndim)) == tuple(s // 8 for s in expected.strides)
    np.testing.assert_array_equal(_bytes_at(t, np.dtype(np.float64)), expected)


@only("fake", why="reads the capsule's memory on the host")
def test_unversioned_capsule_and_dtypes(client):
    """Without max_version the capsule is the DLManagedTensor named "dltensor"; int32, uint8,
    bool, float32 and complex64 handles carry DLPack's codes (0, 1, 6, 2, 5) and their bits, and
    a C-contiguous handle gets C strides in elements."""
    for dtype, code in ((np.int32, 0), (np.uint8, 1), (np.bool_, 6), (np.float32, 2),
                        (np.complex64, 5)):
        host = (np.arange(12) % 3).astype(dtype).reshape(3, 4)
        capsule = client.create(host).__dlpack__()
        assert _get_name(capsule) == b"dltensor"
        t = _managed(capsule).dl_tensor
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (code, host.itemsize * 8, 1)
        assert (t.strides[0], t.strides[1]) == (4, 1)
        np.testing.assert_array_equal(_bytes_at(t, host.dtype), host)


@only("fake", why="the fake driver runs queued work only when the host waits")
@pytest.mark.parametrize("stream", [None, -1, 1, 2, 0x1234])
def test_export_waits_for_the_pending_writer(client, stream):
    """The fake driver leaves a launch queued until the host blocks: a capsule made right after
    the launch (whatever stream the consumer names) already points at the kernel's result, so no
    consumer stream can read the buffer before its writer ran."""
    out = client.empty(1000)
    client.launch(fill_index, 16, TPB, out)
    capsule = out.__dlpack__(stream=stream, max_version=(1, 0))
    t = _managed(capsule).dl_tensor
    np.testing.assert_array_equal(_bytes_at(t, np.dtype(np.float64)), np.arange(1000.0))


@only("fake", "gpu", why="the simulator refuses the export")
def test_a_failed_buffer_raises_its_failure(client):
    """A DLPack export of a buffer whose writer failed (a cube of 2048 units, refused) raises that
    LaunchFailure, as a read does, and hands out no capsule."""
    out = client.create(np.zeros(32))
    client.launch(copy_into, 1, 2048, client.create(np.arange(32.0)), out)
    with pytest.raises(cube.LaunchFailure) as info:
        out.__dlpack__(max_version=(1, 0))
    assert isinstance(info.value.root, cube.LaunchArgumentError)


@only("fake", "gpu", why="the simulator refuses the export")
def test_an_unconsumed_capsule_keeps_the_memory_until_it_dies(client):
    """Dropping every handle of a buffer does not give its memory back while a capsule of it is
    alive: the handle stays referenced and new buffers of the same size get other memory; once
    the unconsumed capsule is garbage, its destructor lets the handle go."""
    from numba_cube.backends.cuda.memory.dlpack_export import live_exports

    before = live_exports()
    h = client.create(_HOST)
    alive = weakref.ref(h)
    capsule = h.__dlpack__(max_version=(1, 0))
    pointer = _managed(capsule).dl_tensor.data
    del h
    gc.collect()
    client.sync()
    assert alive() is not None and live_exports() == before + 1
    others = [client.create(np.zeros_like(_HOST)) for _ in range(4)]
    client.sync()
    assert pointer not in {_managed(o.__dlpack__(max_version=(1, 0))).dl_tensor.data for o in others}
    del capsule
    gc.collect()
    assert alive() is None
    del others
    gc.collect()
    assert live_exports() == before


@only("fake", "gpu", why="the simulator refuses the export")
@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_a_consumer_lets_go_through_the_deleter(client, max_version):
    """A consumer takes the capsule (renames it "used_..."), which then no longer frees anything
    when it dies; the handle is let go when the consumer calls the tensor's deleter."""
    h = client.create(_HOST)
    alive = weakref.ref(h)
    capsule = h.__dlpack__(max_version=max_version)
    del h
    name = _get_name(capsule)
    address = _get_pointer(capsule, name)
    managed = _managed(capsule)
    assert _set_name(capsule, _USED_NAMES[name]) == 0
    del capsule
    gc.collect()
    assert alive() is not None
    managed.deleter(ctypes.cast(address, ctypes.POINTER(type(managed))))
    gc.collect()
    assert alive() is None


@only("fake", "gpu", why="the simulator refuses the export")
def test_requests_the_export_cannot_honour_are_buffer_errors(client):
    """stream 0 (ambiguous in the protocol) or not an int, copy=True, another device, and a
    dtype DLPack has no code for are BufferErrors saying so; nothing waits or is exported."""
    h = client.create(_HOST)
    for kwargs, words in (({"stream": 0}, "names no CUDA stream"), ({"stream": "s"}, "takes an int"),
                          ({"copy": True}, "copy=True"), ({"dl_device": (1, 0)}, "another device")):
        with pytest.raises(BufferError, match=words):
            h.__dlpack__(max_version=(1, 0), **kwargs)
    records = client.create(np.zeros(4, dtype=[("a", np.int32), ("b", np.float32)]))
    with pytest.raises(BufferError, match="no DLPack dtype"):
        records.__dlpack__(max_version=(1, 0))


@only("sim", why="the simulator's handles are host memory")
def test_the_simulators_handles_refuse_the_export(client):
    """Under the simulator a handle's memory is host memory a CUDA consumer cannot use: its
    __dlpack__ and __dlpack_device__ are BufferErrors naming np.asarray, never a device alias."""
    h = client.create(_HOST)
    with pytest.raises(BufferError, match="np.asarray"):
        h.__dlpack__(max_version=(1, 0))
    with pytest.raises(BufferError, match="np.asarray"):
        h.__dlpack_device__()


@only("gpu", why="a real consumer on the device")
def test_round_trip_through_torch_or_cupy(client):
    """torch.from_dlpack (or cupy.from_dlpack) of a handle just written by a kernel, and of a
    strided view, holds NumPy's values of the same view on the same device."""
    try:
        import torch

        def to_host(h):
            return torch.from_dlpack(h).cpu().numpy()
    except ImportError:
        cupy = pytest.importorskip("cupy", reason="needs torch or cupy")

        def to_host(h):
            return cupy.asnumpy(cupy.from_dlpack(h))
    out = client.empty(1000)
    client.launch(fill_index, 16, TPB, out)
    np.testing.assert_array_equal(to_host(out), np.arange(1000.0))
    h = client.create(_HOST)
    np.testing.assert_array_equal(to_host(h[::2, 1:7:3]), _HOST[::2, 1:7:3])
