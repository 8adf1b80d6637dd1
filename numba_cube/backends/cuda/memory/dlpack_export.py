"""DLPack export: a CUDA handle handed to another library without a copy (``torch.from_dlpack(h)``,
``cupy.from_dlpack(h)``), the mirror of the import in ``dlpack.py``.

``Handle.__dlpack__`` (``runtime/memory/array_like.py``) first waits on the host for the buffer's writers
and raises the buffer's failure, as a read does; only then is a capsule made here. That host wait
is also how the protocol's stream rule is kept: the consumer names a stream (``1`` the legacy
default, ``2`` per-thread, else a ``CUstream``; ``None`` or ``-1`` none) that must not run ahead
of our pending writes, and once they are complete on the device no stream can. It
over-synchronizes (the host waits where a ``cuStreamWaitEvent`` would not), which the protocol
allows; a pending write cannot be reported as a failure any other way.

The capsule:

- ``max_version`` of 1.0 or more (what current consumers pass): a ``DLManagedTensorVersioned``
  named ``"dltensor_versioned"`` with DLPack 1.0's read-only flag, as the CPU export's is: a write
  through it would bypass the runtime's dependency tracking and failure ledger.
- ``max_version=None`` (consumers older than DLPack 1.0): the ``DLManagedTensor`` named
  ``"dltensor"``, which has no way to say read-only. It is exported all the same, like the
  handle's ``__cuda_array_interface__`` (whose read-only bit is False too): refusing would break
  the consumers that predate the flag, and a write through it is the consumer's own doing.

Either holds the element ``[0, ..., 0]`` pointer of the view, its shape and its strides in
elements (always given, also for a C-contiguous view), on ``(kDLCUDA, device index)``.

Lifetime: the capsule's manager context is an ``_Export`` that holds the ``Handle`` (so the
allocation is neither freed nor reused by the pool) and the ctypes arrays the tensor points
into. It lives in ``_LIVE`` until the deleter runs: called by the consumer when it is done, or by
the capsule's destructor when no consumer took it (the name is still ours), as the protocol
requires. A later launch that writes the buffer is not ordered against the consumer's reads, as
for the CPU export: export again after it.
"""

from __future__ import annotations

import ctypes
import operator

import numpy as np

from numba_cube.backends.cuda.memory.dlpack import (
    DLPACK_CUDA, DLPACK_DTYPE_KINDS, DLManagedTensor, DLManagedTensorDeleter, DLTensor,
)

__all__ = ["DLPackExporter", "DLManagedTensorVersioned", "DLPackVersion", "FLAG_READ_ONLY",
           "live_exports"]

#: ``DLPACK_FLAG_BITMASK_READ_ONLY`` of DLPack 1.0.
FLAG_READ_ONLY = 1
#: The DLPack version a versioned capsule says it follows.
_EXPORTED_VERSION = (1, 0)
#: Stream values of the protocol that name no CUstream (``-1``: no synchronization asked; ``1``,
#: ``2``: the legacy and per-thread default streams); ``0`` is ambiguous and refused.
_NAMED_STREAMS = (-1, 1, 2)
_KIND_CODES = {kind: code for code, kind in DLPACK_DTYPE_KINDS.items()}


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


#: ``void (*deleter)(DLManagedTensorVersioned *)``.
DLManagedTensorVersionedDeleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
    ("deleter", DLManagedTensorVersionedDeleter), ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor)]

# The capsule API through ctypes with raw pointers: the destructor runs while the capsule is
# being deallocated, when a ``py_object`` reference to it would resurrect it.
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", ctypes.pythonapi))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
# The names live as long as the module: a capsule keeps the ``char *`` it was given.
_UNVERSIONED_NAME = ctypes.create_string_buffer(b"dltensor")
_VERSIONED_NAME = ctypes.create_string_buffer(b"dltensor_versioned")

#: Managed-tensor address -> its ``_Export``, until the deleter runs.
_LIVE: dict[int, "_Export"] = {}


def live_exports() -> int:
    """How many exports a consumer (or an unconsumed capsule) still holds."""
    return len(_LIVE)


def _release(address: int | None) -> None:
    """The deleter: let go of the export at ``address`` (and so of its handle)."""
    if address:
        _LIVE.pop(address, None)


def _delete_managed(pointer) -> None:
    _release(ctypes.cast(pointer, ctypes.c_void_p).value)


# Kept referenced here: ctypes callbacks must outlive every capsule that points at them.
_UNVERSIONED_DELETER = DLManagedTensorDeleter(_delete_managed)
_VERSIONED_DELETER = DLManagedTensorVersionedDeleter(_delete_managed)


def _capsule_freed(capsule: int) -> None:
    """The capsule's destructor: a capsule no consumer renamed still owns its tensor (protocol)."""
    for name in (_UNVERSIONED_NAME, _VERSIONED_NAME):
        if _capsule_is_valid(capsule, name):
            _release(_capsule_pointer(capsule, name))
            return


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_capsule_freed)


class _Export:
    """What one capsule keeps alive: the managed tensor, the shape and strides it points into, and
    the handle whose memory it describes."""

    def __init__(self, handle, ptr: int, device_index: int, versioned: bool):
        binding = handle.binding()
        shape, dtype = binding.shape, binding.dtype
        ndim = len(shape)
        self.handle = handle
        self.shape = (ctypes.c_int64 * max(ndim, 1))(*shape)
        self.strides = (ctypes.c_int64 * max(ndim, 1))(*_element_strides(binding))
        if versioned:
            self.managed = DLManagedTensorVersioned()
            self.managed.version.major, self.managed.version.minor = _EXPORTED_VERSION
            self.managed.flags = FLAG_READ_ONLY
            self.managed.deleter = _VERSIONED_DELETER
        else:
            self.managed = DLManagedTensor()
            self.managed.deleter = _UNVERSIONED_DELETER
        tensor = self.managed.dl_tensor
        tensor.data, tensor.ndim, tensor.byte_offset = ptr, ndim, 0
        tensor.device.device_type, tensor.device.device_id = DLPACK_CUDA, device_index
        tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes = _dtype_code(dtype), dtype.itemsize * 8, 1
        tensor.shape, tensor.strides = self.shape, self.strides
        self.address = ctypes.addressof(self.managed)
        self.managed.manager_ctx = self.address


def _dtype_code(dtype: np.dtype) -> int:
    code = _KIND_CODES.get(dtype.kind)
    if code is None or not dtype.isnative or dtype.fields is not None:
        raise BufferError(f"a handle of dtype {dtype} has no DLPack dtype (DLPack holds booleans, "
                          "integers, floats and complex numbers in native byte order); view it "
                          "as one with h.view_as(...)")
    return code


def _element_strides(binding) -> tuple:
    """The view's strides in elements, as DLPack counts them (a binding's are bytes, or None)."""
    itemsize = binding.dtype.itemsize
    if binding.strides is None:
        strides, step = [], 1
        for extent in reversed(binding.shape):
            strides.append(step)
            step *= extent
        return tuple(reversed(strides))
    if any(s % itemsize for s in binding.strides):
        raise BufferError(f"a view with byte strides {binding.strides} is not a whole number of "
                          f"{itemsize}-byte elements apart, which DLPack strides cannot say")
    return tuple(s // itemsize for s in binding.strides)


class DLPackExporter:
    """``Handle.__dlpack__`` and ``__dlpack_device__`` for the handles of one CUDA device.
    ``pointer_of(binding) -> int``: the device address of a binding's element ``[0, ..., 0]``."""

    def __init__(self, device_index: int, pointer_of):
        self._device_index = device_index
        self._pointer_of = pointer_of

    def device(self) -> tuple[int, int]:
        return (DLPACK_CUDA, self._device_index)

    def check_request(self, stream, max_version, dl_device, copy) -> None:
        """Refuse, before anything waits, what this export cannot honour (``BufferError``, the
        protocol's error, as NumPy raises for a CPU export)."""
        if stream is not None:
            try:
                value = operator.index(stream)
            except TypeError:
                raise BufferError(f"__dlpack__(stream=...) takes an int (a CUstream, or 1 for the "
                                  f"legacy default stream, 2 per-thread) or None, got "
                                  f"{type(stream).__name__}") from None
            if value == 0 or (value < 0 and value not in _NAMED_STREAMS):
                raise BufferError(f"__dlpack__(stream={value}) names no CUDA stream: the protocol "
                                  "takes 1 for the legacy default stream, 2 for the per-thread "
                                  "one, -1 for none, or a CUstream handle")
        if dl_device is not None and tuple(int(v) for v in dl_device) != self.device():
            raise BufferError(f"__dlpack__(dl_device={tuple(dl_device)}) asks for another device "
                              f"than the handle's {self.device()}: copy it there first")
        if copy:
            raise BufferError("__dlpack__(copy=True): a CUDA handle exports its own memory only; "
                              "take the export and copy it in the consumer (torch's .clone())")
        if max_version is not None and len(tuple(max_version)) != 2:
            raise BufferError(f"__dlpack__(max_version={max_version!r}) is a (major, minor) pair")

    def export(self, handle, max_version):
        """The capsule of ``handle``'s memory (module docstring); its writers are done."""
        versioned = max_version is not None and int(tuple(max_version)[0]) >= _EXPORTED_VERSION[0]
        export = _Export(handle, self._pointer_of(handle.binding()), self._device_index, versioned)
        _LIVE[export.address] = export
        name = _VERSIONED_NAME if versioned else _UNVERSIONED_NAME
        try:
            return _capsule_new(export.address, name, ctypes.cast(_CAPSULE_DESTRUCTOR, ctypes.c_void_p))
        except BaseException:
            _release(export.address)
            raise
