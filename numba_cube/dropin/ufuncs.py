"""``@cuda.vectorize`` and ``@numba.vectorize(target="cuda")`` under the layer: element-wise
functions run as numba_cube kernels.

numba-cuda builds a CUDA ufunc from a scalar function and its signatures: a device function
compiled for each signature, and a kernel that applies it to every element. Here the same
happens through the layer: ``cuda.jit(device=True)`` of the function (numba-cuda's own device
function, which the CPU translator inlines) and one kernel per number of arguments, launched on
the installed client. The function is always called with arguments of exactly one declared
signature's types (the inputs are converted to them first, as numba's ufunc loops convert), and
its result is stored into an output of that signature's return type, so it computes what the
declared signature would.

As numba's CUDA ufuncs: host inputs give a host result, a device array among the inputs (or
``out=``) gives a device array; inputs broadcast as NumPy broadcasts them (host inputs; device
arrays must have the result's shape); the loop is the first declared signature whose types the
inputs have exactly, else the first they convert to safely; none is NumPy's ``TypeError``. A
function without signatures (lazy ``vectorize``) is an ``UnsupportedAPIError``: numba-cuda
requires them too.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedAPIError
from numba_cube.runtime.memory.handle import Handle
from .devicearray import DeviceNDArray
from .memory import device_array, to_device

__all__ = ["vectorize", "CubeVectorize", "CubeUFunc"]

def _kernel(device_function, nargs: int):
    """The kernel applying ``device_function`` to ``nargs`` flat inputs (its text is generated, as
    numba's ufunc kernels are; the function is a global of it, which the translator inlines)."""
    from numba import cuda

    names = ", ".join(f"a{i}" for i in range(nargs))
    items = ", ".join(f"a{i}[i]" for i in range(nargs))
    source = (f"def apply_elementwise({names}, out):\n"
              f"    i = cuda.grid(1)\n"
              f"    if i < out.size:\n"
              f"        out[i] = f({items})\n")
    namespace = {"cuda": cuda, "f": device_function}
    exec(compile(source, f"<numba_cube vectorize kernel of {nargs} inputs>", "exec"), namespace)
    return cuda.jit(namespace["apply_elementwise"])


class CubeVectorize:
    """What ``numba.vectorize(..., target="cuda")`` builds on (numba's builder protocol:
    ``add(sig)``, ``disable_compile()``, ``build_ufunc()``)."""

    def __init__(self, func, identity=None, cache=False, targetoptions=None):
        self.pyfunc = func
        self.signatures: list = []

    def add(self, sig) -> None:
        from numba.cuda.core import sigutils
        from numba.np import numpy_support

        argtypes, restype = sigutils.normalize_signature(sig)
        if restype is None:
            raise TypeError("cuda.vectorize needs signatures with a return type")
        self.signatures.append((tuple(numpy_support.as_dtype(t) for t in argtypes),
                                numpy_support.as_dtype(restype)))

    def disable_compile(self) -> None:
        """Only the declared signatures are loops (what the ufunc does anyway)."""

    def build_ufunc(self) -> "CubeUFunc":
        if not self.signatures:
            raise UnsupportedAPIError("cuda.vectorize without signatures",
                                      "declare them: @vectorize(['float32(float32)'], "
                                      "target='cuda'), as numba-cuda requires")
        return CubeUFunc(self.pyfunc, self.signatures)


def vectorize(ftylist_or_function=(), **kws):
    """``cuda.vectorize(signatures)(func)``: a CUDA ufunc running on numba_cube."""
    if callable(ftylist_or_function):
        return CubeVectorize(ftylist_or_function).build_ufunc()
    signatures = ([ftylist_or_function] if isinstance(ftylist_or_function, str)
                  else list(ftylist_or_function))

    def wrap(func):
        builder = CubeVectorize(func)
        for sig in signatures:
            builder.add(sig)
        return builder.build_ufunc()

    return wrap


class CubeUFunc:
    """An element-wise function over host or device arrays (module docstring)."""

    def __init__(self, pyfunc, signatures: list):
        from numba import cuda

        self.pyfunc = pyfunc
        self.__name__ = getattr(pyfunc, "__name__", "ufunc")
        self.signatures = signatures
        self.nin, self.nout = len(signatures[0][0]), 1
        self._kernel = _kernel(cuda.jit(device=True)(pyfunc), self.nin)

    def _loop(self, dtypes: tuple):
        for rule in ("equiv", "safe"):
            for argtypes, restype in self.signatures:
                if all(np.can_cast(have, want, rule) for have, want in zip(dtypes, argtypes)):
                    return argtypes, restype
        raise TypeError(f"ufunc {self.__name__!r} not supported for the input types "
                        f"({', '.join(map(str, dtypes))}): its loops are "
                        f"{[tuple(map(str, a)) for a, _ in self.signatures]}")

    def __call__(self, *args, out=None, stream=0):
        if len(args) != self.nin:
            raise TypeError(f"ufunc {self.__name__!r} takes {self.nin} inputs, got {len(args)}")
        on_device = out is not None or any(isinstance(a, Handle) for a in args)
        arrays = [a if isinstance(a, Handle) else np.asarray(a) for a in args]
        argtypes, restype = self._loop(tuple(a.dtype for a in arrays))
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        flat = []
        for a, want in zip(arrays, argtypes):
            if isinstance(a, Handle):
                if a.shape != shape or a.dtype != want:
                    raise UnsupportedAPIError(
                        f"a CUDA ufunc on a device array of shape {a.shape} and dtype {a.dtype} "
                        f"(the loop needs {shape} and {want})",
                        "broadcast and convert it on the host, or pass a matching array")
                flat.append((a if isinstance(a, DeviceNDArray) else to_device(a)).ravel())
            else:
                host = np.ascontiguousarray(np.broadcast_to(a, shape).astype(want))
                flat.append(to_device(host.reshape(-1), stream=stream))
        size = int(np.prod(shape, dtype=np.int64))
        if out is None:
            result = device_array(size, restype, stream=stream)
        else:
            if out.shape != shape or out.dtype != restype:
                raise ValueError(f"out= must have shape {shape} and dtype {restype}")
            result = out.ravel()
        if size:
            self._kernel.forall(size, stream=stream)(*flat, result)
        if out is not None:
            return out
        if not shape:                                   # scalars in: a scalar out, as NumPy's
            return result[0]
        result = result.reshape(shape)
        return result if on_device else result.copy_to_host()
