"""``ForeignArray``: a CUDA array another library owns, described for adoption as a launch argument.

Both ways in describe an array with it: the CUDA array interface (``interop.parse_cai``) and
DLPack (``dlpack.parse_dlpack``); ``interop.py`` then adopts it as a borrowed handle. It lives in
its own module, below both parsers, so that neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from numba_cube.runtime.memory.layout import byte_extent

__all__ = ["ForeignArray"]


@dataclass
class ForeignArray:
    """One foreign array, described: device pointer (of element ``[0, ..., 0]``), shape, dtype,
    the stream to order after, and byte strides (``None``: C-contiguous)."""

    ptr: int
    shape: tuple
    dtype: np.dtype
    stream: int | None
    owner: Any
    strides: tuple | None = None

    @property
    def extent(self) -> tuple[int, int]:
        """``(low, high)``: the device addresses of every byte the view can touch."""
        low, high = byte_extent(self.shape, self.strides, self.dtype.itemsize)
        return self.ptr + low, self.ptr + high

    @property
    def nbytes(self) -> int:
        n = self.dtype.itemsize
        for s in self.shape:
            n *= s
        return n
