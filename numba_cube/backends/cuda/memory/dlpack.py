"""DLPack import: a CUDA array that speaks only DLPack, bound as a launch argument without a copy.

Most GPU libraries export ``__cuda_array_interface__`` (``interop.py`` adopts those first).
``parse_dlpack`` covers the others: an object with ``__dlpack__`` and ``__dlpack_device__`` on a
CUDA device is described as the same ``ForeignArray`` the interface gives, and adopted the same
way (borrowed memory, keyed by its allocation).

The protocol, as used here (the unversioned ``DLManagedTensor`` capsule, which every producer
still returns when the consumer does not ask for ``max_version``):

- ``obj.__dlpack_device__()`` names the device: ``(2, id)`` is CUDA memory (``kDLCUDA``); managed
  memory (13) is CUDA-addressable too. Any other device is refused: it is not device memory.
- ``obj.__dlpack__(stream=1)``: the *consumer* names a stream, and the producer makes that stream
  wait for its pending work on the array before handing it out. We name the legacy default
  stream (1) and then order our launch after it with an event on the device (``ForeignArray
  .stream = 1``, exactly like a CUDA-array-interface array that names the legacy stream): no host
  synchronization anywhere.
- The capsule holds a ``DLManagedTensor``; we read the tensor's fields through ``ctypes`` and do
  **not** consume the capsule (it keeps its name ``"dltensor"``), so when it is garbage its
  destructor calls the producer's deleter, as the protocol requires of an unconsumed capsule. The
  memory stays valid because the borrowed entry holds ``obj`` itself until the launches that use
  it are done, which is how the array interface's adoption keeps it alive too.

Strided tensors are taken with their strides (DLPack counts them in elements; a binding in
bytes), like the interface path: adoption checks that they stay inside the allocation.
"""

from __future__ import annotations

import ctypes

import numpy as np

from numba_cube.errors import ForeignHandleError, LaunchArgumentError
from numba_cube.runtime.memory.layout import layout_strides
from numba_cube.backends.cuda.memory.foreign_array import ForeignArray

__all__ = ["parse_dlpack", "DLManagedTensor", "DLManagedTensorDeleter", "DLTensor", "DLDataType",
           "DLDevice", "DLPACK_CUDA", "DLPACK_CUDA_DEVICES", "DLPACK_DTYPE_KINDS"]

#: DLPack's device type of CUDA device memory (``kDLCUDA``).
DLPACK_CUDA = 2
#: DLPack device types whose memory is addressable by CUDA kernels: kDLCUDA, kDLCUDAManaged.
DLPACK_CUDA_DEVICES = (DLPACK_CUDA, 13)
_DEVICE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
                 10: "ROCm", 13: "CUDA managed"}
#: DLDataType codes to NumPy kinds: kDLInt, kDLUInt, kDLFloat, kDLComplex, kDLBool.
DLPACK_DTYPE_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}
#: The legacy default stream, named to the producer (see the module docstring).
LEGACY_STREAM = 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


#: ``void (*deleter)(DLManagedTensor *)``: what the consumer calls once it is done with the memory.
DLManagedTensorDeleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", DLManagedTensorDeleter)]

_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def parse_dlpack(obj, device_index: int):
    """The DLPack view of ``obj`` as a ``ForeignArray``; ``None`` if it speaks no DLPack.

    Raises ``LaunchArgumentError`` for a DLPack array a kernel argument cannot bind (not on a
    CUDA device, vector lanes, an unknown dtype) and ``ForeignHandleError`` for one on
    another GPU than ``device_index`` (said by ``__dlpack_device__``, before the producer is asked
    for a capsule: some refuse to export from a device that is not current). Adoption checks the
    memory itself again, as for any foreign array."""
    dlpack, device_of = getattr(obj, "__dlpack__", None), getattr(obj, "__dlpack_device__", None)
    if dlpack is None or device_of is None:
        return None
    name = type(obj).__name__
    try:
        device_type, device_id = (int(v) for v in device_of())
    except Exception as exc:  # noqa: BLE001 - a broken producer is an argument error here
        raise LaunchArgumentError(f"{name}.__dlpack_device__() failed: {exc}") from exc
    if device_type not in DLPACK_CUDA_DEVICES:
        where = _DEVICE_NAMES.get(device_type, f"device type {device_type}")
        raise LaunchArgumentError(f"{name} argument is a DLPack array in {where} memory, not on a "
                                  f"CUDA device: copy it to the GPU first")
    if device_type == 2 and device_id != device_index:
        raise ForeignHandleError(f"{name} argument lives on cuda:{device_id}, passed to a client of "
                                 f"cuda:{device_index}; copy it to this device first")
    try:
        capsule = dlpack(stream=LEGACY_STREAM)
        address = _get_pointer(capsule, b"dltensor")
    except Exception as exc:  # noqa: BLE001
        raise LaunchArgumentError(f"{name}.__dlpack__(stream=1) failed: {exc}") from exc
    tensor = DLManagedTensor.from_address(address).dl_tensor
    ndim = tensor.ndim
    shape = tuple(tensor.shape[i] for i in range(ndim))
    code, bits, lanes = tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
    if lanes != 1 or code not in DLPACK_DTYPE_KINDS or bits % 8:
        raise LaunchArgumentError(f"{name} argument has DLPack dtype (code {code}, {bits} bits, "
                                  f"{lanes} lanes), which no kernel argument type matches")
    kind = DLPACK_DTYPE_KINDS[code]
    dtype = np.dtype(np.bool_) if kind == "b" else np.dtype(f"{kind}{bits // 8}")
    strides = None
    if tensor.strides:
        strides = layout_strides(shape, tuple(tensor.strides[i] * dtype.itemsize   # elements -> bytes
                                              for i in range(ndim)), dtype.itemsize)
    ptr = (tensor.data or 0) + tensor.byte_offset
    # The capsule dies here, unconsumed: its destructor calls the producer's deleter. ``obj``
    # (held by the adoption) keeps the memory alive.
    del capsule
    return ForeignArray(ptr, shape, dtype, LEGACY_STREAM, obj, strides)
