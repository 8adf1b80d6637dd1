"""Array layouts as byte strides: what NumPy's flags and ``numba.typeof`` say about a view.

A binding (``memory/handle.py``) keeps its strides as ``None`` when it is C-contiguous and as a tuple
of byte strides otherwise; these functions answer, from shape, strides and itemsize alone, what
the runtime and the backends need to know of such a view: its layout as numba types it (C, F or
A, from the same rules as NumPy's ``C_CONTIGUOUS``/``F_CONTIGUOUS`` flags), the bytes it can
touch (its extent: the dependency tracker's and the ledger's region), and whether its elements
tile that extent exactly (then host copies move it as one block of bytes).

``host_staging`` and ``from_extent`` are those host copies for backends whose memory is not a
NumPy array (CUDA): the bytes of a view's extent as they must lie in device memory, and the view
over bytes read back from there.
"""

from __future__ import annotations

import numpy as np

from numba_cube.errors import ShapeError

__all__ = ["c_strides", "f_strides", "contiguity", "layout_strides", "byte_extent", "is_compact",
           "host_staging", "from_extent"]


def c_strides(shape: tuple, itemsize: int) -> tuple:
    """The byte strides of a C-ordered array of ``shape``."""
    strides, stride = [], itemsize
    for d in reversed(shape):
        strides.append(stride)
        stride *= d
    return tuple(reversed(strides))


def f_strides(shape: tuple, itemsize: int) -> tuple:
    """The byte strides of an F-ordered (column-major) array of ``shape``."""
    strides, stride = [], itemsize
    for d in shape:
        strides.append(stride)
        stride *= d
    return tuple(strides)


def contiguity(shape: tuple, strides: tuple, itemsize: int) -> tuple[bool, bool]:
    """``(C-contiguous, F-contiguous)`` as NumPy's flags say it (``numba.typeof`` reads them):
    dimensions of length 1 do not count, and an array without elements is both."""
    if 0 in shape:
        return True, True

    def compact(dims):
        expected = itemsize
        for d, s in dims:
            if d != 1:
                if s != expected:
                    return False
                expected *= d
        return True

    pairs = tuple(zip(shape, strides))
    return compact(reversed(pairs)), compact(pairs)


def layout_strides(shape: tuple, strides, itemsize: int):
    """``strides`` as a binding keeps them: ``None`` when the view is C-contiguous, else a tuple
    of Python ints (one per dimension: ``ShapeError`` otherwise)."""
    if strides is None:
        return None
    strides = tuple(int(s) for s in strides)
    if len(strides) != len(shape):
        raise ShapeError(f"{len(strides)} strides for a shape of {len(shape)} dimensions {shape}")
    return None if contiguity(shape, strides, itemsize)[0] else strides


def byte_extent(shape: tuple, strides, itemsize: int) -> tuple[int, int]:
    """``(low, high)``: the bytes a view can touch, relative to its element ``[0, ..., 0]``
    (``low`` <= 0 with negative strides; ``(0, 0)`` for a view without elements)."""
    if 0 in shape:
        return 0, 0
    if strides is None:
        n = itemsize
        for d in shape:
            n *= d
        return 0, n
    low, high = 0, itemsize
    for d, s in zip(shape, strides):
        if s < 0:
            low += (d - 1) * s
        else:
            high += (d - 1) * s
    return low, high


def is_compact(shape: tuple, strides: tuple, itemsize: int) -> bool:
    """Do the elements of a view of ``shape`` and byte ``strides`` tile their extent exactly,
    each byte once? Sorted by the size of its stride, each axis longer than 1 must step over
    exactly the axes before it (a stride 0, a gap or an overlap each break that)."""
    if 0 in shape:
        return True
    expected = itemsize
    for d, s in sorted(((d, abs(s)) for d, s in zip(shape, strides) if d != 1), key=lambda p: p[1]):
        if s != expected:
            return False
        expected *= d
    return True


def host_staging(b, data) -> np.ndarray:
    """The bytes of binding ``b``'s extent holding ``data`` (broadcast to its shape) laid out as
    ``b``'s strides say: what one host-to-device copy to ``b.extent[0]`` writes. Only for a
    compact binding (``b.compact``): one whose extent has no byte that is not an element (a
    gap would overwrite bytes the view does not own)."""
    low, high = b.extent
    raw = np.empty(high - low, np.uint8)
    if high > low:
        view = np.ndarray(b.shape, b.dtype, raw, b.offset - low, _strides_of(b))
        view[...] = data
    return raw


def from_extent(b, raw: np.ndarray) -> np.ndarray:
    """The array of binding ``b`` over ``raw``, the bytes of its extent read from the device,
    as a new array of ``b``'s layout (F stays F; a strided or broadcast view becomes compact)."""
    low, _ = b.extent
    if raw.size == 0:
        return np.empty(b.shape, b.dtype, order="F" if b.layout == "F" else "C")
    view = np.ndarray(b.shape, b.dtype, raw, b.offset - low, _strides_of(b))
    return view if b.compact and b.layout != "A" else view.copy(order="K")


def _strides_of(b) -> tuple:
    return c_strides(b.shape, b.dtype.itemsize) if b.strides is None else b.strides
