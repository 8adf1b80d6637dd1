"""A kernel's exceptions on a GPU: the ``debug=True`` path as numba-cuda reports them, and the
decoding of the error words of every other kernel (``KernelErrors``).

Without debug (``exception_codegen.py``, ``error_slots.py``) a launch's error word holds the
exception id a unit raised; ``KernelErrors.exception`` makes the exception from it, with the
message as written, as a CPU launch raises it (no location prefix: that is debug's).

With debug:

numba-cuda compiles a kernel with ``debug=True`` (or ``NUMBA_CUDA_DEBUGINFO=1``) so that a Python
exception raised in it (``raise ValueError(...)``, a ``ZeroDivisionError``, a failed bounds
check) is not lost: the first unit that raises writes an exception code into a module global
``<kernel>__errcode__`` and its coordinates into ``<kernel>__tidx__`` ... ``__ctaidz__``.
numba-cuda clears the code before its launch, reads it back after (a blocking copy) and raises
the exception class the code stands for, its message prefixed with where it happened::

    In function 'f', file /path/k.py, line 12, tid=[0, 0, 3] ctaid=[0, 0, 1]: msg

``KernelExceptions`` does the same around numba_cube's own launch of the kernel: ``arm`` clears
the code in stream order before the launch, ``check`` waits for the stream and raises the
kernel's exception. ``check`` raises inside the launch's execute scope, so the exception is the
root cause recorded on the launch's write set, as any launch failure (``LaunchFailure[ValueError]``
on a read; ``kernel[grid, block](...)`` raises it at once, as numba.cuda does). A debug launch is
therefore blocking, as it is in numba-cuda.
"""

from __future__ import annotations

import ctypes
import os

from numba_cube.backends.cuda.kernels.exception_codegen import EXCEPTIONS, decode

__all__ = ["KernelExceptions", "KernelErrors", "for_kernel"]


class KernelErrors:
    """How the error word of numba-cuda's compiled ``kernel`` becomes its exception."""

    __slots__ = ("kernel",)

    def __init__(self, kernel):
        self.kernel = kernel

    def exception(self, code: int) -> BaseException:
        return decode(code, self.kernel)


def for_kernel(kernel, driver) -> "KernelExceptions | None":
    """The exception reporting of numba-cuda's compiled ``kernel`` (loaded in the current
    context), or None when it was not compiled with ``debug=True``."""
    if not getattr(kernel, "debug", False):
        return None
    return KernelExceptions(kernel, driver)


class KernelExceptions:
    """The error flag of one debug kernel in one context (see the module docstring)."""

    __slots__ = ("_kernel", "_driver", "_module", "_prefix", "_code_ptr")

    def __init__(self, kernel, driver):
        cufunc = kernel._codelibrary.get_cufunc()
        self._kernel = kernel
        self._driver = driver
        self._module = cufunc.module
        self._prefix = cufunc.name
        self._code_ptr = self._symbol("errcode")

    def _symbol(self, name: str) -> int:
        mem, size = self._module.get_global_symbol(f"{self._prefix}__{name}__")
        if size != ctypes.sizeof(ctypes.c_int):
            raise RuntimeError(f"numba-cuda's {name} flag of {self._prefix} has {size} bytes")
        return int(mem.device_ctypes_pointer.value)

    def _read(self, ptr: int) -> int:
        value = ctypes.c_int()
        self._driver.memcpy_dtoh(ctypes.addressof(value), ptr, ctypes.sizeof(value))
        return value.value

    def arm(self, stream) -> None:
        """Clear the exception code, in ``stream``'s order, before the kernel runs."""
        zero = ctypes.c_int(0)
        self._driver.memcpy_htod_async(self._code_ptr, ctypes.addressof(zero), ctypes.sizeof(zero),
                                       stream)
        # (the copy is staged from pageable memory: the driver has read it when the call returns)

    def check(self, stream) -> None:
        """Wait for ``stream`` and raise the kernel's exception, if one of its units raised."""
        self._driver.stream_synchronize(stream)
        code = self._read(self._code_ptr)
        if code == 0:
            return
        tid = [self._read(self._symbol("tid" + axis)) for axis in "zyx"]
        ctaid = [self._read(self._symbol("ctaid" + axis)) for axis in "zyx"]
        # Ids numba_cube handed out are unique (exception_codegen.py): a device function's
        # exception is found too, where numba-cuda's own table would name another one.
        found = EXCEPTIONS.get(code)
        exc_class, exc_args, loc = found if found is not None else \
            self._kernel.call_helper.get_exception(code)
        where = ""
        if loc is not None:
            sym, path, lineno = loc
            where = f"In function {sym!r}, file {os.path.abspath(path)}, line {lineno}, "
        prefix = f"{where}tid={tid} ctaid={ctaid}"
        exc_args = ((f"{prefix}: {exc_args[0]}",) + tuple(exc_args[1:])) if exc_args else (prefix,)
        raise exc_class(*exc_args)
