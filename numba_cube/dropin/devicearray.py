"""numba.cuda's ``DeviceNDArray`` over a numba_cube ``Handle``.

A ``DeviceNDArray`` *is* a ``Handle`` (a subclass), so a program that mixes the drop-in layer with
numba_cube's own client passes it to ``client.launch``, ``client.read`` or a ``cube.kernel``
without a copy. It behaves as numba-cuda's ``numba/cuda/cudadrv/devicearray.py`` says, where that
differs from a handle's own rules:

- ``d[i, j]`` with an int per axis is a NumPy scalar read from the device (after the writers);
  any other basic index is a view (a bare int drops its axis, as in NumPy); a record element is
  refused (numba's ``DeviceRecord`` is not served);
- ``d[key] = value`` writes in stream order (after earlier work on the buffer, before later);
  ``value`` broadcasts as numba's assignment kernel broadcasts it;
- ``reshape``/``ravel`` are views or ``NotImplementedError("operation requires copying")``;
  ``T``/``transpose()`` of a 2-D array is a new C-contiguous array (numba's transpose kernel
  makes a copy too), of any other a ``NotImplementedError``;
- ``copy_to_host(ary=None, stream=0)`` blocks until the writers are done (numba's copy on a
  stream completes before that stream's next synchronize; ours before the call returns) and
  raises the buffer's ``LaunchFailure``; the host array has the device array's strides.

Launches take ``handle``, a plain ``Handle`` of the same view made once per device array: the
warm launch path matches handles by the identity of their bindings and arms plain handles only.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import UnsupportedAPIError
from numba_cube.runtime.memory.handle import Handle
from numba_cube.runtime.memory.layout import contiguity
from .state import layer_client

__all__ = ["DeviceNDArray", "device_view"]


def device_view(handle: Handle, stream=0) -> "DeviceNDArray":
    """``handle`` (a plain handle, or a view of one) as a numba-style device array."""
    arr = handle.recast(DeviceNDArray)
    arr.stream = stream
    return arr


class DeviceNDArray(Handle):
    """numba.cuda's device array: a numba_cube handle with numba's methods and semantics."""

    __slots__ = ("handle", "stream")

    def __init__(self, alloc, offset, shape, dtype, strides=None):
        super().__init__(alloc, offset, shape, dtype, strides)
        #: the same view as a plain ``Handle``: what launches bind (module docstring)
        self.handle = Handle(alloc, offset, shape, dtype, strides)
        #: numba's default stream of operations on this array (``bind``, ``stream=`` arguments)
        self.stream = 0

    def _view(self, handle: Handle, stream=0) -> "DeviceNDArray":
        return device_view(handle, stream or self.stream)

    # -- numba's descriptors ----------------------------------------------------------------------
    @property
    def flags(self) -> dict:
        c, f = contiguity(self.shape, self.strides, self.dtype.itemsize)
        return {"C_CONTIGUOUS": c, "F_CONTIGUOUS": f}

    def is_c_contiguous(self) -> bool:
        return self.flags["C_CONTIGUOUS"]

    def is_f_contiguous(self) -> bool:
        return self.flags["F_CONTIGUOUS"]

    @property
    def _numba_type_(self):
        """The Numba type a kernel is typed with for this array (numba's rule: C, else F, else
        A; a broadcast array is A), so ``numba.typeof`` and ``kernel.specialize`` work."""
        from numba.core import types
        from numba.np import numpy_support

        broadcast = 0 in self.strides and self.size != 0
        c, f = contiguity(self.shape, self.strides, self.dtype.itemsize)
        layout = "C" if c and not broadcast else "F" if f and not broadcast else "A"
        return types.Array(numpy_support.from_dtype(self.dtype), self.ndim, layout)

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"<numba_cube DeviceNDArray shape={self.shape} dtype={self.dtype} "
                f"strides={self.strides} on {self.device}>")

    def bind(self, stream=0) -> "DeviceNDArray":
        """A view whose operations default to ``stream``."""
        return self._view(self.handle, stream)

    # -- host copies ------------------------------------------------------------------------------
    def copy_to_host(self, ary=None, stream=0) -> np.ndarray:
        """The contents as a new host array (with this array's strides), or copied into ``ary``
        (same dtype, same shape up to axes of length 1, as numba checks); waits for the writers
        and raises the buffer's ``LaunchFailure``."""
        if any(s < 0 for s in self.strides):
            raise NotImplementedError(
                f"D->H copy not implemented for negative strides: {self.strides}")
        data = layer_client().read(self.handle)
        if ary is None:
            if self.ndim > 1 and not self.flags["C_CONTIGUOUS"] and self.flags["F_CONTIGUOUS"]:
                return np.asfortranarray(data)
            return data
        _check_compatible(self, ary)
        ary[...] = data.reshape(ary.shape)
        return ary

    def copy_to_device(self, ary, stream=0) -> None:
        """Copy ``ary`` (a host array, or another device array: through the host) into this array,
        in stream order."""
        if ary.size == 0:
            return
        _sentry_contiguous(self)
        client = layer_client()
        if isinstance(ary, Handle):
            _sentry_contiguous(ary)
            ary = client.read(ary.handle if isinstance(ary, DeviceNDArray) else ary)
        else:
            ary = np.asarray(ary)
        _check_compatible(self, ary)
        client.write(self.handle, ary.reshape(self.shape))

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        if copy is False:
            raise ValueError("`copy=False` is not supported. A copy is always created.")
        data = self.copy_to_host()
        return data if dtype is None else data.astype(dtype)

    # -- indexing ---------------------------------------------------------------------------------
    def __getitem__(self, item):
        return self.getitem(item)

    def getitem(self, item, stream=0):
        """numba's indexing: an int for every axis reads a scalar, anything else is a view."""
        if self.ndim == 0:
            if item not in ((), Ellipsis):
                raise IndexError(f"too many indices for a 0-d device array: {item!r}")
            view = self.handle
        else:
            view = Handle.__getitem__(self.handle, item if isinstance(item, tuple) else (item,))
        if view.shape == ():
            if self.dtype.fields is not None:
                raise UnsupportedAPIError(
                    "indexing one record of a structured DeviceNDArray (numba's DeviceRecord)",
                    "read the array with copy_to_host() and index the host copy, or pass the "
                    "array to the kernel and index it there")
            return layer_client().read(view)[()]
        return self._view(view, stream)

    def __setitem__(self, key, value) -> None:
        self.setitem(key, value)

    def setitem(self, key, value, stream=0) -> None:
        """``self[key] = value``: ``value`` (a scalar, a host or device array) broadcast over the
        view as numba's assignment does, written in stream order."""
        client = layer_client()
        if self.ndim == 0:
            lhs = self.handle
        else:
            lhs = Handle.__getitem__(self.handle, key if isinstance(key, tuple) else (key,))
        if isinstance(value, Handle):
            value = client.read(value.handle if isinstance(value, DeviceNDArray) else value)
        rhs = np.asarray(value)
        if rhs.ndim > lhs.ndim:
            raise ValueError(f"Can't assign {rhs.ndim}-D array to {lhs.ndim}-D self")
        rhs = rhs.reshape((1,) * (lhs.ndim - rhs.ndim) + rhs.shape)
        for axis, (left, right) in enumerate(zip(lhs.shape, rhs.shape)):
            if right != 1 and left != right:
                raise ValueError(f"Can't copy sequence with size {right} to array axis {axis} "
                                 f"with dimension {left}")
        with np.errstate(all="ignore"):     # numba's kernel casts as C does, without warnings
            staged = np.broadcast_to(rhs, lhs.shape).astype(self.dtype)
        client.write(lhs, staged)

    # -- views ----------------------------------------------------------------------------------
    def reshape(self, *newshape, order="C") -> "DeviceNDArray":
        """A view in another shape; ``NotImplementedError`` when that needs a copy."""
        if len(newshape) == 1 and isinstance(newshape[0], (tuple, list)):
            newshape = tuple(newshape[0])
        if order == "A":
            order = "F" if self.flags["F_CONTIGUOUS"] and not self.flags["C_CONTIGUOUS"] else "C"
        if order not in ("C", "F"):
            raise ValueError("order not C|F|A")
        if tuple(newshape) == self.shape:
            return self._view(self.handle)
        try:
            view = Handle.reshape(self.handle, *newshape, order=order)
        except ValueError as exc:
            if "copy" in str(exc):
                raise NotImplementedError("operation requires copying") from None
            raise
        return self._view(view)

    def ravel(self, order="C", stream=0) -> "DeviceNDArray":
        """A 1-D view of a contiguous array (``NotImplementedError`` for any other)."""
        if order not in ("C", "F", "A"):
            raise ValueError("order not C|F|A")
        c, f = self.flags["C_CONTIGUOUS"], self.flags["F_CONTIGUOUS"]
        if order in "CA" and c:
            return self._view(Handle.reshape(self.handle, self.size), stream)
        if order in "FA" and f:
            return self._view(Handle.reshape(self.handle, self.size, order="F"), stream)
        raise NotImplementedError("operation requires copying")

    def squeeze(self, axis=None, stream=0) -> "DeviceNDArray":
        """The view without axes of length 1 (``axis``: only those, each of length 1)."""
        if axis is None:
            keep = [i for i, n in enumerate(self.shape) if n != 1]
        else:
            axes = axis if isinstance(axis, tuple) else (axis,)
            axes = {a % self.ndim for a in axes}
            if any(self.shape[a] != 1 for a in axes):
                raise ValueError("cannot select an axis to squeeze out which has size not equal "
                                 "to one")
            keep = [i for i in range(self.ndim) if i not in axes]
        index = tuple(slice(None) if i in keep else 0 for i in range(self.ndim))
        return self._view(Handle.__getitem__(self.handle, index), stream)

    @property
    def T(self) -> "DeviceNDArray":
        return self.transpose()

    def transpose(self, axes=None) -> "DeviceNDArray":
        """numba's transpose: the array itself for the identity axes; a 2-D array as a new
        C-contiguous array (a copy, as numba's transpose kernel makes); else
        ``NotImplementedError``."""
        if axes and tuple(axes) == tuple(range(self.ndim)):
            return self
        if self.ndim != 2:
            raise NotImplementedError("transposing a non-2D DeviceNDArray isn't supported")
        if axes is not None and set(axes) != set(range(self.ndim)):
            raise ValueError(f"invalid axes list {axes!r}")
        client = layer_client()
        host = client.read(self.handle)
        return device_view(client.create(np.ascontiguousarray(host.T)))

    def split(self, section, stream=0):
        """Views of ``section`` elements each (the last may be shorter), of a 1-D array with unit
        stride."""
        if self.ndim != 1:
            raise ValueError("only support 1d array")
        if self.strides[0] != self.dtype.itemsize:
            raise ValueError("only support unit stride")
        for i in range(int(math.ceil(float(self.size) / section))):
            begin = i * section
            yield self._view(Handle.__getitem__(self.handle, (slice(begin, begin + section),)),
                             stream)

    def view(self, dtype) -> "DeviceNDArray":
        """The same bytes read as ``dtype``: numba's rule (another item size changes the last
        axis, and needs a C-contiguous array)."""
        dtype = np.dtype(dtype)
        if dtype.itemsize == self.dtype.itemsize:
            return self._view(self.handle.recast(Handle, dtype))
        if not self.flags["C_CONTIGUOUS"]:
            raise ValueError("To change to a dtype of a different size, the array must be "
                             "C-contiguous")
        last, rem = divmod(self.shape[-1] * self.dtype.itemsize, dtype.itemsize)
        if rem != 0:
            raise ValueError("When changing to a larger dtype, its size must be a divisor of the "
                             "total size in bytes of the last axis of the array.")
        return self._view(self.handle.view_as(dtype, self.shape[:-1] + (last,)))

    # -- numba.cuda internals that have no meaning here -------------------------------------------
    def get_ipc_handle(self):
        raise UnsupportedAPIError("DeviceNDArray.get_ipc_handle (CUDA IPC)",
                                  "share host data between processes instead")


def _sentry_contiguous(ary) -> None:
    """numba's ``sentry_contiguous``: the array without its broadcast (stride 0) axes must be C-
    or F-contiguous, else ``ValueError`` with numba's words."""
    shape = tuple(1 if s == 0 else n for n, s in zip(ary.shape, ary.strides))
    c, f = contiguity(shape, ary.strides, ary.dtype.itemsize)
    if not (c or f):
        raise ValueError(
            "Array contains non-contiguous buffer and cannot be transferred as a single memory "
            "region. Please ensure contiguous buffer with numpy .ascontiguousarray()")


def _check_compatible(device, host) -> None:
    """numba's ``check_array_compatibility``: the same dtype, the same shape up to axes of 1."""
    if device.dtype != host.dtype:
        raise TypeError(f"incompatible dtype: {device.dtype} vs. {host.dtype}")
    left = tuple(n for n in device.shape if n != 1)
    right = tuple(n for n in host.shape if n != 1)
    if left != right:
        raise ValueError(f"incompatible shape: {device.shape} vs. {host.shape}")
