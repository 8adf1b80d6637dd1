"""What a chunk of the arrays ``numba_cube.dask`` returns is: decided here, and only here.

Two kinds of chunk exist. Under every array that ``map_blocks`` (``map_overlap``, ``reduction``)
returns sits a layer of **handle chunks**: the ``Handle`` each launch wrote, kept on its worker
and taken as they are by the next numba_cube launch. What Dask's own operations and
``compute()`` see are the **array chunks** read from those handles. On every device today an
array chunk is a NumPy array (read on the worker after the handle's writers; on the CPU backend
the device memory is host memory anyway). A device chunk type (CuPy arrays viewing CUDA handles)
would be chosen here, by ``chunk_meta`` and ``array_chunk``, and nowhere else.
"""

from __future__ import annotations

import numpy as np

from numba_cube.errors import LaunchArgumentError


def chunk_meta(dtype, ndim: int) -> np.ndarray:
    """Dask's ``meta`` of an array of array chunks: an empty array of their type."""
    return np.empty((0,) * ndim, dtype=np.dtype(dtype))


def checked_meta(meta, what: str):
    """A ``meta=`` a caller gave, if it is of the chunk type; a ``LaunchArgumentError`` else (a
    meta of another type would make Dask pick functions for chunks they will never get)."""
    if meta is None or isinstance(meta, np.ndarray):
        return meta
    raise LaunchArgumentError(
        f"{what}: meta= is a {type(meta).__module__}.{type(meta).__name__}, but the chunks "
        "numba_cube.dask returns are NumPy arrays; give a NumPy array (np.empty((0,), dtype)), "
        "or dtype=")


def array_chunk(handle, client) -> np.ndarray:
    """The array chunk of a handle chunk: a host copy, after the handle's writers
    (``client.read``: raises the buffer's ``LaunchFailure``)."""
    return client.read(handle)
