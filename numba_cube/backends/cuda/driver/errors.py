"""What a failed CUDA driver call is: ``CudaError``, and which errors break the context.

Split from ``driver.py`` (the checked calls themselves) because every room of the CUDA backend
that handles a failure (memory, copies, streams, graphs, the disk cache, the launch tasks) needs
the error's class and its classification (``sticky``: the context is unusable, reported as
``DeviceFault``; ``out_of_memory``), while only a few need the driver. The class is combined
with cuda.core's ``CUDAError`` once numba-cuda has loaded it (``error_class``), so code written
for numba.cuda that catches ``CUDAError`` catches numba_cube's too.
"""

from __future__ import annotations

import sys

__all__ = ["CudaError", "STICKY_ERRORS", "error_class"]

#: Errors after which the CUDA context is unusable (every later call in it fails the same way):
#: a kernel faulted on the device. They are reported as ``DeviceFault`` by ``sync()``.
STICKY_ERRORS = frozenset({
    "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_ASSERT", "CUDA_ERROR_LAUNCH_TIMEOUT",
    "CUDA_ERROR_ECC_UNCORRECTABLE", "CUDA_ERROR_CONTEXT_IS_DESTROYED", "CUDA_ERROR_DEINITIALIZED",
    "CUDA_ERROR_EXTERNAL_DEVICE", "CUDA_ERROR_UNKNOWN",
})


class CudaError(RuntimeError):
    """A CUDA driver call failed. ``call`` names it, ``code`` is the ``CUresult``, ``name`` its
    name (e.g. ``"CUDA_ERROR_INVALID_VALUE"``)."""

    def __init__(self, call: str, code, name: str, description: str = "", detail: str = ""):
        self.call = call
        self.code = code
        self.name = name
        self._parts = (description, detail)
        msg = f"{call} failed: {name}"
        if description:
            msg += f" ({description})"
        if detail:
            msg += f": {detail}"
        super().__init__(msg)

    def __reduce__(self):
        # The class may be the combined one made at run time (``error_class``): rebuild through it.
        return (_restore_error, (self.call, self.code, self.name, *self._parts))

    @property
    def sticky(self) -> bool:
        """Whether the context is broken after this error (a device-side fault)."""
        return self.name in STICKY_ERRORS

    @property
    def out_of_memory(self) -> bool:
        return self.name == "CUDA_ERROR_OUT_OF_MEMORY"


_CUDA_CORE_ERRORS = "cuda.core._utils.cuda_utils"
_combined_error: list = []


def error_class() -> type:
    """``CudaError``, or, once numba-cuda's driver layer (cuda.core) is loaded in this process,
    ``CudaError`` combined with cuda.core's ``CUDAError``: what numba-cuda raises for a failed
    driver call, so code written for numba.cuda that catches ``CUDAError`` around a launch
    (a launch over a kernel's ``launch_bounds``, say) catches numba_cube's too. Looked up, not
    imported: importing cuda.core costs a third of a second, and without it loaded no caller can
    be catching its class."""
    if _combined_error:
        return _combined_error[0]
    module = sys.modules.get(_CUDA_CORE_ERRORS)
    foreign = getattr(module, "CUDAError", None) if module is not None else None
    if not (isinstance(foreign, type) and issubclass(foreign, Exception)):
        return CudaError
    combined = type("CudaError", (CudaError, foreign), {"__module__": __name__,
                                                        "__doc__": CudaError.__doc__})
    _combined_error.append(combined)
    return combined


def _restore_error(call, code, name, description, detail):
    return error_class()(call, code, name, description, detail)
