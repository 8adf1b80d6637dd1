"""Handles (user-facing buffers) and bindings (what crosses the hand-off).

A ``Handle`` is what users hold: a typed, shaped window (``offset`` bytes into an allocation) of
one buffer of device memory. Views made by slicing share the allocation. The allocation is given
back to its server when the last handle or view of it is dropped; the server then keeps the
memory out of reuse until no stream still uses it (``pool.py``). Handles are array-like as
numba's device arrays are where that is a view or a read (``np.asarray``, ``copy_to_host``,
``reshape``, DLPack): ``memory/array_like.py`` says how.

A ``Binding`` is the plain-value description of one buffer argument that travels from the issuing
thread to the server: which memory, which bytes, which shape, dtype and byte strides. It is made
on the issuing thread, and never refers back to thread-local state.

Layout: ``strides`` is ``None`` for a C-contiguous view, which is nearly every binding (the CUDA
warm launch path hashes and compares bindings, and a short tuple with ``None`` costs least);
otherwise it is the byte strides, as NumPy's, of an F-ordered array, a transpose, a strided or
broadcast (stride 0) view. ``layout.layout_strides`` turns strides that happen to be C-contiguous
back into ``None``, so two descriptions of the same C view are one binding. ``offset`` is always the
byte of element ``[0, ..., 0]``; ``region``, what the dependency tracker and the ledger see, runs
from the lowest to the highest byte the view can touch (with negative or zero strides that is not
``offset`` to ``offset + nbytes``; gaps in between are covered too: over-synchronizing is allowed,
missing a byte is not).

``buffer_shape``, ``buffer_dtype`` and ``buffer_nbytes`` check what a new buffer is made of, on
the issuing thread, before anything reaches the server: a dtype of Python objects, a negative or
non-integer dimension, or a byte size no buffer can address would otherwise be allocated wrongly
(an int64 product that wraps around allocates a few bytes for an enormous shape) or break the
device thread.
"""

from __future__ import annotations

import operator
import weakref
from typing import NamedTuple

import numpy as np

from numba_cube.errors import DTypeError, ShapeError
from numba_cube.runtime.memory.array_like import (
    copy_to_host, dlpack_device, dlpack_export, host_array, index_items, reshape_layout,
)
from numba_cube.runtime.memory.layout import (
    byte_extent, c_strides, contiguity, is_compact, layout_strides,
)

__all__ = ["Handle", "Binding", "Allocation", "buffer_shape", "buffer_dtype", "buffer_nbytes",
           "MAX_BUFFER_BYTES"]

#: The largest byte size of one buffer. Offsets into buffers are signed 64-bit everywhere (NumPy,
#: Numba, the CUDA array interface); half of that range leaves room for the pool's rounding up.
MAX_BUFFER_BYTES = 2**62


def buffer_shape(shape) -> tuple[int, ...]:
    """``shape`` (an int or a sequence of ints) as a tuple of Python ints; ``ShapeError`` for a
    negative or non-integer dimension (a float would be truncated otherwise)."""
    try:
        dims = (operator.index(shape),)
    except TypeError:
        try:
            dims = tuple(operator.index(d) for d in shape)
        except TypeError:
            raise ShapeError(f"a buffer shape is an int or a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ShapeError(f"buffer dimensions must not be negative, got {dims}")
    return dims


def buffer_dtype(dtype) -> np.dtype:
    """``dtype`` as a NumPy dtype a buffer can hold; ``DTypeError`` for one that holds Python
    objects (pointers into this process's heap: meaningless in device memory, untypeable in a
    kernel) or one NumPy does not understand."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise DTypeError(f"{dtype!r} is not a NumPy dtype: {exc}") from None
    if dt.hasobject:
        raise DTypeError(f"buffers cannot hold Python objects (dtype {dt}): use a numeric dtype")
    return dt


def buffer_nbytes(shape: tuple, dtype: np.dtype) -> int:
    """The byte size of a buffer of ``shape`` and ``dtype`` (exact: Python ints); ``ShapeError``
    past ``MAX_BUFFER_BYTES``."""
    nbytes = dtype.itemsize
    for d in shape:
        nbytes *= d
    if nbytes > MAX_BUFFER_BYTES:
        raise ShapeError(f"a buffer of shape {shape} and dtype {dtype} would be {nbytes} bytes, more "
                         f"than one buffer can address ({MAX_BUFFER_BYTES}); nothing was allocated")
    return nbytes


class Binding(NamedTuple):
    """One buffer argument, as a value: memory id, byte offset of element ``[0, ..., 0]``, shape,
    dtype, and byte strides (``None``: C-contiguous; see the module docstring)."""

    memory_id: int
    offset: int
    shape: tuple
    dtype: np.dtype
    strides: tuple | None = None

    @property
    def nbytes(self) -> int:
        """The bytes of the elements (not of the span a strided view covers: ``extent``)."""
        n = self.dtype.itemsize
        for s in self.shape:
            n *= s
        return n

    @property
    def layout(self) -> str:
        """``"C"``, ``"F"`` or ``"A"``: the layout ``numba.typeof`` gives a NumPy array of these
        strides (C wins when both hold, as for 1-D arrays)."""
        if self.strides is None:
            return "C"
        return "F" if contiguity(self.shape, self.strides, self.dtype.itemsize)[1] else "A"

    @property
    def extent(self) -> tuple[int, int]:
        """``(low, high)`` byte offsets into the memory of everything the view can touch."""
        low, high = byte_extent(self.shape, self.strides, self.dtype.itemsize)
        return self.offset + low, self.offset + high

    @property
    def compact(self) -> bool:
        """True when the view's elements fill its extent exactly, each byte once (C, F, or any
        order of the axes): host copies then move the extent as one block of bytes."""
        return self.strides is None or is_compact(self.shape, self.strides, self.dtype.itemsize)

    @property
    def region(self) -> tuple:
        """The ledger's and the scheduler's name for these bytes (module docstring: layout)."""
        if self.strides is None:
            return (self.memory_id, self.offset, self.offset + self.nbytes)
        low, high = self.extent
        return (self.memory_id, low, high)


class Allocation:
    """One buffer of a server's memory. Gives itself back when garbage."""

    __slots__ = ("memory_id", "nbytes", "server", "_finalizer", "__weakref__")

    def __init__(self, server, memory_id: int, nbytes: int):
        self.memory_id = memory_id
        self.nbytes = nbytes
        self.server = server
        # weakref.finalize rather than __del__: it runs exactly once, also at interpreter exit, and
        # does not keep the object alive through reference cycles.
        #
        # Fix (tests/runtime/memory/test_handle.py): the release goes through the channel, in FIFO order
        # after every operation submitted before the handle was dropped. Calling
        # server.release_memory directly queued the id at once, so with a ThreadChannel a launch
        # submitted just before the drop (``client.launch(k, n, d, client.create(a), out)``) found
        # its memory already freed by the drain at the start of op_launch (KeyError on the device
        # thread: a DeviceFault), or not yet registered as a user, so reusable too early.
        # ``post``, not ``submit``: a finalizer must never block (streams/channel.py says why).
        self._finalizer = weakref.finalize(self, server.channel.post, server.release_memory, memory_id)


class Handle:
    """A typed window of device memory. ``h[a:b]`` is a view sharing the memory."""

    __slots__ = ("_alloc", "offset", "shape", "dtype", "_strides", "_binding", "__weakref__")

    def __init__(self, alloc: Allocation, offset: int, shape: tuple, dtype, strides=None):
        """``strides``: byte strides (``None``: C-contiguous), as NumPy's; ``offset``: the byte of
        element ``[0, ..., 0]`` in the allocation."""
        self._alloc = alloc
        self.offset = offset
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self._strides = layout_strides(self.shape, strides, self.dtype.itemsize)
        # A handle never changes, so its binding is made once (a launch binds it every time).
        self._binding = Binding(alloc.memory_id, offset, self.shape, self.dtype, self._strides)

    # -- descriptors ----------------------------------------------------------------------------
    @property
    def device(self) -> str:
        """The name of the device that owns the memory (e.g. ``"cpu:0"``)."""
        return self._alloc.server.device

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def strides(self) -> tuple:
        """Byte strides, as NumPy's ``ndarray.strides``."""
        if self._strides is None:
            return c_strides(self.shape, self.dtype.itemsize)
        return self._strides

    @property
    def layout(self) -> str:
        """``"C"``, ``"F"`` or ``"A"``: how ``numba.typeof`` types a NumPy array laid out so, and
        so how a kernel is compiled for this handle."""
        return self._binding.layout

    @property
    def memory_id(self) -> int:
        return self._alloc.memory_id

    @property
    def server(self):
        return self._alloc.server

    def binding(self) -> Binding:
        return self._binding

    @property
    def __cuda_array_interface__(self) -> dict:
        """The CUDA array interface (version 3, with its stream) of a handle of a CUDA device.

        Asked of the server, so handles of other devices pay nothing for it; there it raises
        ``AttributeError``, which is what ``hasattr`` and consumers expect of a non-CUDA array.
        """
        export = getattr(self._alloc.server, "cuda_array_interface", None)
        if export is None:
            raise AttributeError(f"handles of device {self.device} have no __cuda_array_interface__")
        return export(self)

    # -- views ----------------------------------------------------------------------------------
    def __getitem__(self, key) -> "Handle":
        """A view sharing memory. ``h[i]`` and ``h[a:b:c]`` index the first axis; an int alone
        keeps its axis (``h[1]`` of shape ``(1, ...)``: a handle stays a buffer), as it always
        has. A tuple of ints, slices, ``None`` and ``...`` (``h[:, 1]``, ``h[::2, 1:]``,
        ``h[..., 0]``) indexes axis by axis as NumPy's basic indexing does, ints dropping their
        axis, ``None`` adding one of length 1. Views with steps, of a column, or of an F-ordered
        handle are strided (``layout``); kernels get them with their strides. An index that
        would be a copy (a list, an array, a boolean) is a ``TypeError`` (``memory/array_like.py``)."""
        if not self.shape:
            raise IndexError("a 0-d handle cannot be sliced")
        items, keep_int_axis = index_items(key, len(self.shape))
        strides = self.strides
        offset, shape, new_strides = self.offset, [], []
        axis = 0
        for item in items:
            if item is None:
                shape.append(1)
                new_strides.append(0)      # (a length-1 axis: its stride is never stepped)
                continue
            dim, stride = self.shape[axis], strides[axis]
            if isinstance(item, slice):
                start, stop, step = item.indices(dim)
                count = len(range(start, stop, step))
                offset += start * stride if count else 0
                shape.append(count)
                new_strides.append(stride * step)
                axis += 1
                continue
            index = operator.index(item)
            if index < 0:
                index += dim
            if not 0 <= index < dim:
                raise IndexError(f"index {item} out of range for axis {axis} of a handle of shape "
                                 f"{self.shape}")
            offset += index * stride
            if keep_int_axis:
                shape.append(1)
                new_strides.append(stride)
            axis += 1
        shape.extend(self.shape[axis:])
        new_strides.extend(strides[axis:])
        return Handle(self._alloc, offset, tuple(shape), self.dtype, tuple(new_strides))

    def reshape(self, *shape, order: str = "C") -> "Handle":
        """A view of the same memory in another shape (NumPy's ``reshape``: ints or a tuple, one
        of them may be ``-1``), of a C-contiguous handle (``order="F"``: an F-contiguous one);
        a reshape that would be a copy is a ``ValueError`` (``array_like.reshape_layout``)."""
        new_shape, strides = reshape_layout(self, shape, order)
        return Handle(self._alloc, self.offset, new_shape, self.dtype, strides)

    # -- array-like: NumPy and numba.cuda read handles (memory/array_like.py) ---------------------------
    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """``np.asarray(h)``: waits for the handle's writers, then a host copy of its contents
        (``LaunchFailure`` if the buffer was not written; ``copy=False``: ``ValueError``)."""
        return host_array(self, dtype, copy)

    def copy_to_host(self, ary=None, stream=0) -> np.ndarray:
        """numba's name: the contents as a host array, or copied into ``ary`` (returned); blocks
        until the writers are done (``array_like.copy_to_host``)."""
        return copy_to_host(self, ary, stream)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack export of a CPU handle, or a CUDA one on a GPU: read-only, after its writers
        (``memory/array_like.py``)."""
        return dlpack_export(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return dlpack_device(self)

    def view_as(self, dtype, shape=None) -> "Handle":
        """The same bytes, read as another dtype/shape (sizes must match). Only a C-contiguous
        handle can be reinterpreted (``ValueError`` otherwise): the bytes of a strided view are
        not one run in element order."""
        if self._strides is not None:
            raise ValueError(f"view_as needs a C-contiguous handle; this one has layout "
                             f"{self.layout} (strides {self._strides})")
        dtype = buffer_dtype(dtype)
        if shape is None:
            if self.nbytes % dtype.itemsize:
                raise ValueError(f"{self.nbytes} bytes are not a whole number of {dtype}")
            shape = (self.nbytes // dtype.itemsize,)
        shape = buffer_shape(shape)
        if buffer_nbytes(shape, dtype) != self.nbytes:
            raise ValueError(f"shape {shape} of {dtype} does not cover {self.nbytes} bytes")
        return Handle(self._alloc, self.offset, shape, dtype)

    def recast(self, cls: type | None = None, dtype=None) -> "Handle":
        """This view (same memory, offset, shape and strides) as an instance of ``cls``, a
        ``Handle`` subclass (the drop-in layer's numba-style device arrays, ``dropin/``), and/or
        reading its elements as ``dtype``, which must have the same item size (``ValueError``
        otherwise: the strides count bytes of the old items)."""
        cls = type(self) if cls is None else cls
        if not (isinstance(cls, type) and issubclass(cls, Handle)):
            raise TypeError(f"recast needs a Handle subclass, got {cls!r}")
        new_dtype = self.dtype if dtype is None else buffer_dtype(dtype)
        if new_dtype.itemsize != self.dtype.itemsize:
            raise ValueError(f"recast to {new_dtype} ({new_dtype.itemsize} bytes) of a view of "
                             f"{self.dtype} ({self.dtype.itemsize} bytes): use view_as")
        return cls(self._alloc, self.offset, self.shape, new_dtype, self._strides)

    def strided_view(self, offset: int, shape, strides) -> "Handle":
        """A view of this handle's memory at byte ``offset`` (of its element ``[0, ..., 0]``,
        counted from this handle's own) with ``shape`` and byte ``strides`` (0 repeats an
        element: a broadcast). ``ValueError`` when the view would reach outside the bytes this
        handle spans (its extent), which a kernel would then read or write past."""
        shape = buffer_shape(shape)
        strides = tuple(int(s) for s in strides)
        low, high = byte_extent(shape, strides, self.dtype.itemsize)
        own_low, own_high = self._binding.extent
        if 0 not in shape and (self.offset + offset + low < own_low
                               or self.offset + offset + high > own_high):
            raise ValueError(f"a view of shape {shape} and strides {strides} at byte {offset} "
                             f"reaches outside a handle of {self.nbytes} bytes")
        return Handle(self._alloc, self.offset + offset, shape, self.dtype, strides)

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0

    def __repr__(self) -> str:
        layout = "" if self._strides is None else f" strides={self._strides}"
        return (f"<Handle {self.device} mem={self._alloc.memory_id} offset={self.offset} "
                f"shape={self.shape} dtype={self.dtype}{layout}>")
