"""What a backend supplies: the mechanism the runtime's policy brackets (CONTRACT.md section 8).

The runtime (``numba_cube/runtime/``) decides *what* happens and in which order: the gates, the
launch mode, the compile cache, the read and write sets, the ledger and the stream ordering. A
backend only says *how*: allocate bytes, view them as arrays, compile a kernel for an argument
signature, run a compiled kernel. It never re-implements the ledger, the gates or the mode
decision.

``HostBackend`` is the interface for backends whose kernels run on host threads (the built-in
CPU backend, the CUDA-simulator plugin): the runtime's ``HostServer`` drives it with per-stream
worker threads.
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np

from ..runtime.memory import ALIGNMENT

__all__ = ["HostBackend", "BACKEND_API_VERSION"]

#: Version of this interface. A plugin declares the version it was built for; a mismatch is
#: refused with a clear message (see plugins.py).
BACKEND_API_VERSION = 1


class HostBackend(abc.ABC):
    """Mechanism of a backend whose kernels run on the host."""

    #: short backend name, e.g. "cpu"
    name: str = "?"

    #: The client options (``cube.client(device, **options)``) ``compile`` understands; a client
    #: with any other option is refused (``OptionError``) rather than compiling as if it were
    #: not there. ``boundscheck`` is the runtime's portable one; a plugin adds its own here.
    compile_options: frozenset = frozenset({"boundscheck"})

    #: The most dynamic shared memory (bytes per cube, ``cuda.shared.array(0, dtype)``) a launch
    #: may ask for. 0 (the default): none; a launch asking for some is refused on the issuing
    #: thread (``LaunchArgumentError``). A backend that sets it gets the size of every launch that
    #: asks for some as a fourth argument of its artifact: ``artifact(count, dim, args,
    #: shared_bytes)`` (a launch without any calls ``artifact(count, dim, args)``, as before).
    max_dynamic_shared_bytes: int = 0

    def allocate(self, nbytes: int) -> Any:
        """Fresh memory of ``nbytes`` bytes, 64-byte aligned. The default is host memory: NumPy
        bytes, over-allocated and sliced so every buffer starts on the pool alignment (the
        compile-cache key's alignment, CONTRACT.md 1.2, is only true if the base is aligned)."""
        raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
        shift = (-raw.ctypes.data) % ALIGNMENT
        return raw[shift:shift + nbytes]

    def release(self, memory: Any) -> None:
        """Give memory back (the default lets the garbage collector do it)."""

    def array(self, memory: Any, offset: int, shape: tuple, dtype: np.dtype) -> np.ndarray:
        """A NumPy view of ``memory`` (no copy): how kernels and host copies see the bytes."""
        nbytes = dtype.itemsize
        for s in shape:
            nbytes *= s
        return memory[offset:offset + nbytes].view(dtype).reshape(shape)

    def strided_array(self, memory: Any, offset: int, shape: tuple, dtype: np.dtype,
                      strides: tuple) -> np.ndarray:
        """A NumPy view of ``memory`` with byte ``strides`` (not C-contiguous: an F-ordered,
        transposed, strided or broadcast view), element ``[0, ..., 0]`` at byte ``offset``. The
        default works for the default memory; NumPy itself refuses a view that would reach
        outside it."""
        return np.ndarray(shape, dtype, memory, offset, strides)

    def foreign_memory(self, obj: Any) -> Any:
        """How to bind ``obj``, a launch argument that is no ``Handle`` but another library's
        array, without a copy: a ``numba_cube.runtime.borrowed.ForeignMemory`` describing the
        allocation that holds it and the view (``describe_host_array`` makes one for NumPy
        memory), or ``None``: the backend does not adopt ``obj`` and the launch refuses it as
        unsupported. The runtime does the rest (``runtime/borrowed.py``: one memory id per
        allocation, bounds, lifetime, frees). Called on the issuing thread, so it only reads
        ``obj``. The default adopts nothing."""
        return None

    @abc.abstractmethod
    def arg_type(self, value: Any) -> Any:
        """The hashable compile-time type of one argument (an array view or a scalar)."""

    def cache_extras(self, count, dim) -> tuple:
        """What the backend bakes into a compiled artifact beyond the argument types."""
        return ()

    @abc.abstractmethod
    def compile(self, kernel, arg_types: tuple, extras: tuple, options: dict) -> Any:
        """Compile ``kernel`` for ``arg_types``; return a callable
        ``artifact(count_xyz, dim_xyz, args)`` (and ``shared_bytes`` as a fourth argument, see
        ``max_dynamic_shared_bytes``). Raise ``CompileError`` when it cannot."""
