"""What makes a ``Handle`` array-like for NumPy and numba.cuda users: reading it to the host
(``np.asarray(h)``, numba's ``h.copy_to_host()``), ``reshape``, and the checks of N-D indexing
that say why an index cannot be a view.

Reading a handle is a client's ``read`` (it waits for the work that writes the buffer and raises
the buffer's ``LaunchFailure``). The client lives a layer above handles (it makes them), so the
read is handed in by ``client/client.py`` (``set_host_reader``) instead of imported from here, as the
kernel layer is handed its numba-style launch.

``np.asarray(handle)`` is always a copy of the bytes at that moment: the memory is the device's,
and a later launch that writes the buffer must not change an array the caller already holds.
So NumPy 2's ``copy=False`` (which demands no copy) is refused with NumPy's own ``ValueError``.

DLPack (``np.from_dlpack(h)``, ``__dlpack__``/``__dlpack_device__``) is the zero-copy way out.
On the CPU backend, whose memory is host memory, NumPy makes the capsule; a device whose
mechanism has a ``dlpack_exporter`` (the CUDA backend on a GPU: ``backends/cuda/memory/dlpack_export.py``)
makes its own, on the device. The export is a *read at that moment*: it waits on the host for the
buffer's writers (and raises the buffer's ``LaunchFailure``), then hands out the memory itself
(on CUDA that wait also keeps the protocol's promise that the consumer's stream does not run
ahead of our writes). What the consumer holds is a read-only view (DLPack 1.0's read-only flag): a write
through it would bypass the runtime's dependency tracking and failure ledger. A later launch
that writes the buffer is not ordered against the consumer's reads and changes what it sees,
so export again after later launches (or take ``copy=True``). The view keeps the handle (and so
its memory) alive while the consumer holds it. Consumers that cannot take a read-only export
(a DLPack version below 1.0) get NumPy's ``BufferError`` on the CPU (CUDA's unversioned capsule:
``dlpack_export.py`` says why); the handles of devices without an exporter (the simulator's)
get a ``BufferError`` saying what to use instead.
"""

from __future__ import annotations

import operator
from typing import Callable

import numpy as np

from numba_cube.runtime.memory.layout import contiguity, f_strides

__all__ = ["set_host_reader", "host_array", "copy_to_host", "reshape_layout", "reshaped_shape",
           "index_items",
           "dlpack_device", "dlpack_export"]

# ``read(handle) -> np.ndarray``: a client's read of the handle's server; ``wait_written(handle)``:
# the same wait for the writers and failure check, without the copy (both set by client/client.py).
_read_to_host: Callable | None = None
_wait_written: Callable | None = None

# DLPack's device type of host memory (``kDLCPU``), as ``ndarray.__dlpack_device__`` gives it.
_DLPACK_CPU = 1


def set_host_reader(read: Callable, wait_written: Callable) -> None:
    """Set how a handle is read to the host (``client/client.py`` sets reads through its client)."""
    global _read_to_host, _wait_written
    _read_to_host, _wait_written = read, wait_written


def host_array(handle, dtype=None, copy=None) -> np.ndarray:
    """``handle.__array__(dtype, copy)``: wait for the handle's writers, then a new host array of
    its contents (``LaunchFailure`` if the buffer was not written)."""
    if copy is False:
        raise ValueError("a handle's memory is the device's: np.asarray(handle) always copies it "
                         "to the host, so copy=False cannot be honoured (use copy=None or True)")
    data = _read_to_host(handle)
    if dtype is not None and np.dtype(dtype) != data.dtype:
        data = data.astype(dtype)
    return data


def copy_to_host(handle, ary=None, stream=0) -> np.ndarray:
    """numba's ``DeviceNDArray.copy_to_host``: the handle's contents as a new host array, or
    copied into ``ary`` (a writeable NumPy array of the handle's shape and dtype, returned).

    It blocks until the buffer's writers on every stream are done, so the array is complete on
    return, whatever ``stream`` says: numba's asynchronous copy on ``stream`` is complete only
    after that stream's work, which ours has waited for too (``stream`` is accepted so that
    numba code runs unchanged)."""
    data = _read_to_host(handle)
    if ary is None:
        return data
    if not isinstance(ary, np.ndarray):
        raise TypeError(f"copy_to_host(ary=...) takes a NumPy array, got {type(ary).__name__}")
    if ary.shape != handle.shape or ary.dtype != handle.dtype:
        raise ValueError(f"copy_to_host into an array of shape {ary.shape} and dtype {ary.dtype}: "
                         f"the handle has shape {handle.shape} and dtype {handle.dtype}")
    if not ary.flags.writeable:
        raise ValueError("copy_to_host(ary=...) needs a writeable array")
    ary[...] = data
    return ary


def dlpack_device(handle) -> tuple[int, int]:
    """``handle.__dlpack_device__()``: ``(kDLCPU, 0)`` for a CPU handle, the exporter's device
    (``(kDLCUDA, index)``) for a device that has one; ``BufferError`` else."""
    exporter = _device_exporter(handle)
    if exporter is not None:
        return exporter.device()
    _refuse_non_host(handle)
    return (_DLPACK_CPU, 0)


def dlpack_export(handle, stream=None, max_version=None, dl_device=None, copy=None):
    """``handle.__dlpack__(...)``: a read-only DLPack capsule of the handle's memory, after its
    writers (module docstring); the keywords are the DLPack protocol's, handled by NumPy on the
    CPU and by the device's exporter elsewhere."""
    exporter = _device_exporter(handle)
    if exporter is not None:
        exporter.check_request(stream, max_version, dl_device, copy)
        _wait_written(handle)
        return exporter.export(handle, max_version)
    _refuse_non_host(handle)
    if stream is not None:
        raise BufferError(f"a CPU handle's DLPack export takes stream=None, got {stream!r}")
    _wait_written(handle)
    view = handle.server.host_array(handle.binding())
    exported = np.asarray(_KeepsHandle(view, handle))
    exported.flags.writeable = False
    return exported.__dlpack__(max_version=max_version, dl_device=dl_device, copy=copy)


class _KeepsHandle:
    """A view's ``__array_interface__`` with the handle held: NumPy keeps this object as the
    exported array's base, so the memory is not given back to the pool (and reused by another
    buffer) while a consumer of the export still reads it."""

    def __init__(self, view: np.ndarray, handle):
        self.__array_interface__ = view.__array_interface__
        self.view = view
        self.handle = handle


def _device_exporter(handle):
    """The DLPack exporter of the handle's device (``DeviceMechanism.dlpack_exporter``), or None."""
    return getattr(getattr(handle.server, "mechanism", None), "dlpack_exporter", None)


def _refuse_non_host(handle) -> None:
    if handle.device.split(":")[0] != "cpu":
        raise BufferError(
            f"DLPack export is supported for CPU handles and CUDA handles on a GPU, not for "
            f"{handle.device}, whose memory is neither host nor CUDA device memory; read it to "
            "the host with np.asarray(h)")


def reshape_layout(handle, shape, order: str) -> tuple[tuple, tuple | None]:
    """``(shape, strides)`` of ``handle.reshape(*shape, order=order)``, a view: ``order="C"``
    needs a C-contiguous handle (strides ``None``), ``order="F"`` an F-contiguous one. Any other
    reshape would be a copy, which a view cannot be: ``ValueError`` saying what to do."""
    if order not in ("C", "F"):
        raise ValueError(f"order is 'C' or 'F', got {order!r}")
    new_shape = reshaped_shape(handle.size, shape)
    c_contig, f_contig = contiguity(handle.shape, handle.strides, handle.dtype.itemsize)
    if order == "C" and c_contig:
        return new_shape, None
    if order == "F" and f_contig:
        return new_shape, f_strides(new_shape, handle.dtype.itemsize)
    raise ValueError(f"reshape(order={order!r}) of a handle of shape {handle.shape} and strides "
                     f"{handle.strides} would need a copy: only a {order}-contiguous handle "
                     "reshapes to a view. Copy it (client.create(np.asarray(h).reshape(...)))")


def reshaped_shape(size: int, shape) -> tuple[int, ...]:
    """``shape`` (ints, a tuple of them, one of them ``-1``) for ``size`` elements, as NumPy's
    ``reshape`` reads it; ``ValueError`` when it does not hold ``size`` elements."""
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = tuple(shape[0])
    dims = [operator.index(d) for d in shape]
    if dims.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension (-1) in a reshape")
    if any(d < -1 for d in dims):
        raise ValueError(f"negative dimension in reshape {tuple(dims)}")
    if -1 in dims:
        known = 1
        for d in dims:
            if d != -1:
                known *= d
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape a handle of size {size} into shape {tuple(dims)}")
        dims[dims.index(-1)] = size // known
    total = 1
    for d in dims:
        total *= d
    if total != size:
        raise ValueError(f"cannot reshape a handle of size {size} into shape {tuple(dims)}")
    return tuple(dims)


def index_items(key, ndim: int) -> tuple[tuple, bool]:
    """A handle index as ``(items, keep_int_axis)``: one item per indexed axis, ints, slices and
    ``None`` (a new axis of length 1), with ``...`` expanded to the slices it stands for.
    ``keep_int_axis`` is True for a single int (``h[1]`` keeps its axis, see ``Handle``).

    Anything else is not a view of the handle's memory: a list, array or boolean index selects
    elements NumPy would copy, which a handle (device memory, shared by its views) cannot be.
    That is a ``TypeError`` saying what to do instead."""
    items = key if isinstance(key, tuple) else (key,)
    # One pass: slicing is on the path of every launch that binds a view, so the common items
    # (exact ints and slices) cost one type test each.
    indexed, ellipsis_at = 0, None
    for n, item in enumerate(items):
        kind = type(item)
        if kind is slice or kind is int:
            indexed += 1
        elif item is None:
            continue
        elif item is Ellipsis:
            if ellipsis_at is not None:
                raise IndexError("an index can only have a single ellipsis ('...')")
            ellipsis_at = n
        else:
            _check_integer(item)
            indexed += 1
    if indexed > ndim:
        raise IndexError(f"{indexed} indices for a handle of {ndim} dimensions")
    if ellipsis_at is not None:
        items = items[:ellipsis_at] + (slice(None),) * (ndim - indexed) + items[ellipsis_at + 1:]
    keep_int_axis = not isinstance(key, tuple) and indexed == 1 and type(key) is not slice
    return items, keep_int_axis


def _check_integer(item) -> None:
    """An index item that is no int, slice, None or '...': an integer-like one (a NumPy int)
    passes; anything else selects a copy (``TypeError``)."""
    if isinstance(item, (bool, np.bool_)):
        raise TypeError(_not_a_view("a boolean index"))
    try:
        operator.index(item)
    except TypeError:
        what = ("a list or array index (fancy indexing)"
                if isinstance(item, (list, np.ndarray)) or hasattr(item, "__array__")
                else f"an index of type {type(item).__name__}")
        raise TypeError(_not_a_view(what)) from None


def _not_a_view(what: str) -> str:
    return (f"handles are indexed with ints, slices, None and '...' (each result is a view "
            f"sharing the memory); {what} selects a copy, which a handle cannot be: read it "
            "first (np.asarray(h)[index]) and client.create() the result, or do the selection "
            "inside a kernel")
