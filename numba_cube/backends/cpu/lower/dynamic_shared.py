"""Dynamic shared memory on the CPU: ``cuda.shared.array(0, dtype)`` as a view of one buffer.

numba.cuda's rules, which this module reproduces (numba-cuda's ``cudaimpl._generic_array`` and
its simulator agree on them):

- a *1-D* shared array of *zero* elements (``cuda.shared.array(0, dtype)``, or shape ``(0,)``)
  is the cube's dynamic shared memory, sized by the launch (``kernel[count, dim, stream,
  nbytes]``, ``client.launch(..., shared_bytes=nbytes)``); any other shape without elements
  (``(0, 4)``) is an error at compile time;
- every such declaration of a kernel aliases the *same* bytes, each viewed with its own dtype:
  ``nbytes // itemsize`` elements (a size that is not a multiple of the itemsize leaves its tail
  unreachable from that view, as on a GPU); slices of it are views;
- a launch with 0 bytes gives every declaration an empty array.

How: a kernel that declares dynamic shared memory takes one more run-time parameter after the
six geometry values, ``__dsb`` (the size in bytes: a launch parameter, never a recompile), and
each worker chunk allocates one ``uint8`` buffer of that size next to its static shared arrays
(``cube_kernel.CubeKernel._chunk_prologue``; reused across the chunk's cubes, as shared memory is
uninitialised in CUDA anyway). Each declaration becomes ``name = __dynsh[:k].view(dtype)`` with
``k`` the size rounded down to a multiple of the itemsize. Kernels without such a declaration
keep their generated text and signature exactly as before.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SIZE_PARAM", "BUFFER", "is_dynamic_shape", "uses_dynamic_shared", "buffer_line",
           "view_line"]

#: the hidden parameter carrying the launch's dynamic shared memory size, in bytes
SIZE_PARAM = "__dsb"
#: the per-chunk buffer every dynamic declaration views
BUFFER = "__dynsh"


def is_dynamic_shape(value) -> bool:
    """Is an evaluated ``cuda.shared.array`` shape the dynamic one (0 or ``(0,)``)?"""
    return value == 0 or value == (0,)


def uses_dynamic_shared(lowered) -> bool:
    """Does a lowered kernel declare dynamic shared memory (so takes ``SIZE_PARAM``)?"""
    return any(getattr(d, "dynamic", False) for d in lowered.shared)


def buffer_line() -> str:
    """The chunk-level allocation of the dynamic buffer."""
    return f"{BUFFER} = __np.empty({SIZE_PARAM}, __np.uint8)"


def view_line(name: str, dtype: str) -> str:
    """``name = <the dynamic buffer viewed as dtype>``: ``nbytes // itemsize`` elements."""
    itemsize = np.dtype(getattr(np, dtype)).itemsize
    return f"{name} = {BUFFER}[:({SIZE_PARAM} // {itemsize}) * {itemsize}].view(__np.{dtype})"
