"""Compiling a kernel with numba-cuda for one argument signature, and loading it on one device.

``numba.cuda.jit(py_func)`` makes a dispatcher once per (kernel, compile options); each argument
signature is compiled explicitly with ``dispatcher.compile(sig)`` (what a dry run needs: compile
without launching). The signature comes from the bindings, not from values: a buffer of dtype D
and ``ndim`` N is ``types.Array(D, N, "C")`` (handles are C-contiguous), a scalar is the Numba
type of its NumPy type. Because numba_cube packs arguments itself (``launch_plan.py``), the
kernel object is used only for what it loaded: the ``CUkernel`` handle of its code library, turned
into this context's ``CUfunction``, plus the attributes a refused launch is explained with.

numba-cuda loads modules into *its* current context; each device's server compiles inside
``numba.cuda.gpus[index]`` so the module lands on the right GPU, in the device's primary context,
which is also the context the server uses (one context per device, shared with numba-cuda,
CuPy and PyTorch).

Compile options a client can pass (``cube.client("cuda", fastmath=True)``): ``fastmath``,
``lineinfo``, ``debug``, ``opt``, ``max_registers``. ``boundscheck`` (a CPU-backend option) has no
numba-cuda equivalent and is ignored here.
"""

from __future__ import annotations

import threading

import numpy as np

from .launch_plan import ArgLayout, CompiledKernel

__all__ = ["NumbaCudaCompiler", "numba_types", "arg_kinds"]

_JIT_OPTIONS = ("fastmath", "lineinfo", "debug", "opt", "max_registers")


def arg_kinds(args: tuple) -> tuple:
    """Per argument: ``("array", ndim, itemsize)`` for a binding, ``("scalar", dtype)`` else."""
    kinds = []
    for a in args:
        if hasattr(a, "memory_id"):
            kinds.append(("array", len(a.shape), a.dtype.itemsize))
        else:
            kinds.append(("scalar", np.dtype(type(a)) if isinstance(a, np.generic) else np.asarray(a).dtype))
    return tuple(kinds)


def numba_types(args: tuple) -> tuple:
    """The Numba signature of a launch's arguments (bindings and scalars)."""
    import numba
    from numba.core import types

    out = []
    for a in args:
        if hasattr(a, "memory_id"):
            out.append(types.Array(numba.from_dtype(a.dtype), len(a.shape), "C"))
        else:
            out.append(numba.typeof(a))
    return tuple(out)


class NumbaCudaCompiler:
    """numba-cuda as the compile stage of one device's server."""

    def __init__(self, driver, index: int):
        self.driver = driver
        self.index = index
        self._dispatchers: dict = {}
        self._lock = threading.Lock()

    def _dispatcher(self, key, py_func, options: dict):
        with self._lock:
            disp = self._dispatchers.get(key)
            if disp is None:
                from numba import cuda

                jit_options = {k: v for k, v in options.items() if k in _JIT_OPTIONS}
                disp = self._dispatchers[key] = cuda.jit(**jit_options)(py_func)
            return disp

    def compile(self, key, py_func, name: str, args: tuple, options: dict) -> CompiledKernel:
        """Compile ``py_func`` for the types of ``args`` and load it; ``key`` names the function
        and options (dispatchers are cached by it). Raises Numba's errors as they are."""
        from numba import cuda

        disp = self._dispatcher(key, py_func, options)
        sig = numba_types(args)
        with cuda.gpus[self.index]:
            kernel = disp.compile(sig)
            kernel.bind()
            cufunc = kernel._codelibrary.get_cufunc()
            function = self.driver.kernel_function(cufunc.handle)
        attrs = cufunc.attrs
        driver = self.driver

        def occupancy(block_threads: int) -> int:
            return driver.occupancy(function, block_threads, 0)

        return CompiledKernel(name, function, ArgLayout(arg_kinds(args)), int(attrs.maxthreads),
                              int(attrs.shared), occupancy, kernel)
