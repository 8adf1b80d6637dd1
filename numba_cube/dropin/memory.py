"""numba.cuda's memory API: ``to_device``, ``device_array(_like)``, pinned, mapped and managed
arrays, ``as_cuda_array``, ``is_cuda_array``.

Device arrays are numba_cube handles of the installed client (``devicearray.py``). Pinned, mapped
and managed arrays are host memory in numba.cuda too: here they are plain NumPy arrays, which a
launch copies in and (when the kernel writes them) back before it returns, so what a kernel
writes into one is visible on the host after the launch, as it is after numba's synchronize.

Layouts are numba's: an F-ordered array stays F-ordered on the device, a broadcast array keeps its
stride-0 axes over one copy of its core, and an array with no contiguous core is a ``ValueError``
with numba's words. A ``stream`` argument orders the copy on that stream; numba_cube's copies in
are staged at once (the host array may be reused on return) and its copies out wait for the
writers, so each completes no later than numba's would.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..errors import UnsupportedAPIError
from numba_cube.runtime.memory.handle import Handle
from .devicearray import DeviceNDArray, device_view
from .state import layer_client
from .streams import client_for

__all__ = ["to_device", "device_array", "device_array_like", "pinned_array",
           "pinned_array_like", "mapped_array", "mapped_array_like", "managed_array",
           "as_cuda_array", "is_cuda_array", "pinned", "mapped", "from_cuda_array_interface"]

_NON_CONTIGUOUS = ("Array contains non-contiguous buffer and cannot be transferred as a single "
                   "memory region. Please ensure contiguous buffer with numpy "
                   ".ascontiguousarray()")


def to_device(obj, stream=0, copy=True, to=None):
    """A device array holding a copy of ``obj`` (``to``: copy into that device array instead and
    return it; a device array ``obj`` is returned as it is, as numba does)."""
    if to is not None:
        to.copy_to_device(obj, stream=stream)
        return to
    if isinstance(obj, DeviceNDArray):
        return obj
    if isinstance(obj, Handle):
        return device_view(obj, stream)
    if isinstance(obj, np.void):
        raise UnsupportedAPIError(
            "cuda.to_device of a NumPy record (numba's DeviceRecord)",
            "pass the record to the kernel as it is (the launch copies it in and back), or a "
            "one-element array of its dtype")
    ary = np.asarray(obj)
    client = client_for(stream)
    core, broadcast = _core(ary)
    if copy:
        handle = client.create(core)
    else:
        order = "F" if core.ndim > 1 and core.flags.f_contiguous and \
            not core.flags.c_contiguous else "C"
        handle = client.empty(core.shape, core.dtype, order=order)
    if broadcast:
        core_strides = iter(handle.strides)
        strides = tuple(0 if s == 0 else next(core_strides) for s in ary.strides)
        handle = handle.strided_view(0, ary.shape, strides)
    return device_view(handle, stream)


def _core(ary: np.ndarray) -> tuple[np.ndarray, bool]:
    """numba's ``array_core`` (the array without its stride-0 axes) and whether it had any;
    ``ValueError`` (numba's ``sentry_contiguous``) for a core that is no contiguous block."""
    if ary.size == 0 or 0 not in ary.strides:
        core, broadcast = ary, False
    else:
        core = ary[tuple(0 if s == 0 else slice(None) for s in ary.strides)]
        broadcast = True
    if not (core.flags.c_contiguous or core.flags.f_contiguous):
        raise ValueError(_NON_CONTIGUOUS)
    return core, broadcast


def device_array(shape, dtype=np.float64, strides=None, order="C", stream=0):
    """A new device array, contents undefined (``order="F"``: column-major)."""
    dtype = np.dtype(dtype)
    handle = client_for(stream).empty(shape, dtype, order=order)
    if strides is not None and tuple(strides) != tuple(handle.strides):
        raise UnsupportedAPIError(
            f"cuda.device_array(strides={tuple(strides)}) (strides that are neither C- nor "
            "F-contiguous)", "allocate a contiguous array and pass a view of it (d[:, ::2])")
    return device_view(handle, stream)


def _order_like(ary) -> str:
    c, f = _flags(ary)
    return "F" if f and not c else "C"


def _flags(ary) -> tuple[bool, bool]:
    if isinstance(ary, DeviceNDArray):
        return ary.flags["C_CONTIGUOUS"], ary.flags["F_CONTIGUOUS"]
    ary = np.asarray(ary)
    return ary.flags.c_contiguous, ary.flags.f_contiguous


def device_array_like(ary, stream=0):
    """A new device array of ``ary``'s shape and dtype, F-ordered when ``ary`` is only
    F-contiguous."""
    return device_array(ary.shape, ary.dtype, order=_order_like(ary), stream=stream)


def pinned_array(shape, dtype=np.float64, strides=None, order="C"):
    """numba's page-locked host array: a NumPy array (host memory needs no pinning here)."""
    ary = np.empty(shape, dtype, order=order)
    if strides is not None and tuple(strides) != ary.strides:
        raise UnsupportedAPIError(f"cuda.pinned_array(strides={tuple(strides)})",
                                  "allocate a contiguous array and take a view of it")
    return ary


def pinned_array_like(ary):
    return pinned_array(ary.shape, ary.dtype, order=_order_like(ary))


def mapped_array(shape, dtype=np.float64, strides=None, order="C", stream=0, portable=False,
                 wc=False):
    """numba's host array mapped into the device's address space: a NumPy array here, which a
    kernel launch copies in and back (module docstring)."""
    return pinned_array(shape, dtype, strides, order)


def mapped_array_like(ary, stream=0, portable=False, wc=False):
    return pinned_array(ary.shape, ary.dtype, order=_order_like(ary))


def managed_array(shape, dtype=np.float64, strides=None, order="C", stream=0,
                  attach_global=True):
    """numba's managed (unified) memory: a NumPy array here (module docstring)."""
    return pinned_array(shape, dtype, strides, order)


@contextlib.contextmanager
def pinned(*arylist):
    """numba's context that page-locks host arrays: nothing to do for host memory here."""
    yield


@contextlib.contextmanager
def mapped(*arylist, **kws):
    """numba's context that maps host arrays into the device: yields the host arrays themselves
    (one array alone, as numba yields it), which launches copy in and back."""
    yield arylist[0] if len(arylist) == 1 else list(arylist)


def is_cuda_array(obj) -> bool:
    """Whether ``obj`` is device memory: a numba_cube handle (a device array), or an object
    exporting ``__cuda_array_interface__``."""
    return isinstance(obj, Handle) or hasattr(obj, "__cuda_array_interface__")


def as_cuda_array(obj, sync=True):
    """``obj`` as a device array without a copy: a device array itself, or a numba_cube handle
    (of a program that also uses numba_cube's client) as a view of the same memory."""
    if isinstance(obj, DeviceNDArray):
        return obj
    if isinstance(obj, Handle):
        return device_view(obj)
    if hasattr(obj, "__cuda_array_interface__"):
        raise UnsupportedAPIError(
            f"cuda.as_cuda_array of a {type(obj).__name__} (foreign CUDA memory)",
            f"the {layer_client().device} backend's memory is its own; copy the data in with "
            "cuda.to_device(host_array)")
    raise TypeError("*obj* doesn't implement the cuda array interface.")


def from_cuda_array_interface(desc, owner=None, sync=True):
    raise UnsupportedAPIError("cuda.from_cuda_array_interface (raw device pointers)",
                              "copy the data in with cuda.to_device(host_array)")
