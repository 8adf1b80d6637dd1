"""Handles (user-facing buffers) and bindings (what crosses the hand-off).

A ``Handle`` is what users hold: a typed, shaped window (``offset`` bytes into an allocation) of
one buffer of device memory. Views made by slicing share the allocation. The allocation is given
back to its server when the last handle or view of it is dropped; the server then keeps the
memory out of reuse until no stream still uses it (``memory.py``).

A ``Binding`` is the plain-value description of one buffer argument that travels from the issuing
thread to the server: which memory, which bytes, which shape and dtype. It is made on the issuing
thread, and never refers back to thread-local state.

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

from ..errors import DTypeError, ShapeError

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
    """One buffer argument, as a value: memory id, byte offset, shape, dtype."""

    memory_id: int
    offset: int
    shape: tuple
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        n = self.dtype.itemsize
        for s in self.shape:
            n *= s
        return n

    @property
    def region(self) -> tuple:
        """The ledger's and the scheduler's name for these bytes."""
        return (self.memory_id, self.offset, self.offset + self.nbytes)


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
        # Fix (tests/runtime/test_handle.py): the release goes through the channel, in FIFO order
        # after every operation submitted before the handle was dropped. Calling
        # server.release_memory directly queued the id at once, so with a ThreadChannel a launch
        # submitted just before the drop (``client.launch(k, n, d, client.create(a), out)``) found
        # its memory already freed by the drain at the start of op_launch (KeyError on the device
        # thread: a DeviceFault), or not yet registered as a user, so reusable too early.
        self._finalizer = weakref.finalize(self, server.channel.submit, server.release_memory, memory_id)


class Handle:
    """A typed window of device memory. ``h[a:b]`` is a view sharing the memory."""

    __slots__ = ("_alloc", "offset", "shape", "dtype", "_binding", "__weakref__")

    def __init__(self, alloc: Allocation, offset: int, shape: tuple, dtype):
        self._alloc = alloc
        self.offset = offset
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        # A handle never changes, so its binding is made once (a launch binds it every time).
        self._binding = Binding(alloc.memory_id, offset, self.shape, self.dtype)

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
        """Slice along the first axis: a contiguous view sharing memory (steps other than 1 are
        refused, since a view must stay one contiguous byte range)."""
        if not self.shape:
            raise IndexError("a 0-d handle cannot be sliced")
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            if step != 1:
                raise ValueError("handle views must be contiguous: slice steps other than 1 are not supported")
            stop = max(stop, start)
        else:
            try:
                start = operator.index(key)
            except TypeError:
                raise TypeError(f"handles are sliced with a slice or an int, got {type(key).__name__}") from None
            if start < 0:
                start += self.shape[0]
            if not 0 <= start < self.shape[0]:
                raise IndexError(f"index {key} out of range for a handle of shape {self.shape}")
            stop = start + 1
        row_bytes = self.nbytes // self.shape[0] if self.shape[0] else 0
        return Handle(self._alloc, self.offset + start * row_bytes,
                      (stop - start,) + self.shape[1:], self.dtype)

    def view_as(self, dtype, shape=None) -> "Handle":
        """The same bytes, read as another dtype/shape (sizes must match)."""
        dtype = buffer_dtype(dtype)
        if shape is None:
            if self.nbytes % dtype.itemsize:
                raise ValueError(f"{self.nbytes} bytes are not a whole number of {dtype}")
            shape = (self.nbytes // dtype.itemsize,)
        shape = buffer_shape(shape)
        if buffer_nbytes(shape, dtype) != self.nbytes:
            raise ValueError(f"shape {shape} of {dtype} does not cover {self.nbytes} bytes")
        return Handle(self._alloc, self.offset, shape, dtype)

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0

    def __repr__(self) -> str:
        return (f"<Handle {self.device} mem={self._alloc.memory_id} offset={self.offset} "
                f"shape={self.shape} dtype={self.dtype}>")
