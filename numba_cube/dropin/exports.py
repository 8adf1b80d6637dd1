"""Every public name of ``numba.cuda``, in exactly one class.

- **served**: the layer's own object replaces numba's on ``install`` (``SERVED``: name -> the
  dropin module that defines it);
- **kept**: left as numba-cuda made it, because it needs no GPU: what kernels use on the device
  (``threadIdx``, ``grid``, ``shared``, ``atomic``, warp intrinsics: numba's ``Stub`` classes),
  Numba types (``float32``, ``void``, ``dim3``), submodules, argument hints (``In``/``Out``,
  honoured by launches), exception and memory classes, constants (``KEPT`` and ``is_kept``);
- **refused**: replaced by a function that raises ``UnsupportedAPIError`` naming the API and
  what to use instead (``REFUSED``: name -> that advice), because it needs a GPU, its compiler or
  raw device memory, which numba_cube does not emulate.

``tests/dropin/test_exports.py`` walks ``dir(numba.cuda)`` and checks that every public name is
in exactly one class, so a numba-cuda release that adds a name fails until it is classified.
"""

from __future__ import annotations

import types as pytypes

from ..errors import UnsupportedAPIError

__all__ = ["SERVED", "REFUSED", "KEPT", "is_kept", "classify", "refusal"]

_MEMORY, _STREAMS, _DEVICES, _DISPATCH = "memory", "streams", "devices", "dispatcher"

SERVED = {
    "jit": _DISPATCH,
    # memory
    "to_device": _MEMORY, "device_array": _MEMORY, "device_array_like": _MEMORY,
    "pinned_array": _MEMORY, "pinned_array_like": _MEMORY, "mapped_array": _MEMORY,
    "mapped_array_like": _MEMORY, "managed_array": _MEMORY, "as_cuda_array": _MEMORY,
    "is_cuda_array": _MEMORY, "pinned": _MEMORY, "mapped": _MEMORY,
    # streams and events
    "stream": _STREAMS, "default_stream": _STREAMS, "legacy_default_stream": _STREAMS,
    "per_thread_default_stream": _STREAMS, "event": _STREAMS, "event_elapsed_time": _STREAMS,
    "synchronize": _STREAMS,
    # devices and contexts
    "gpus": _DEVICES, "list_devices": _DEVICES, "select_device": _DEVICES,
    "get_current_device": _DEVICES, "current_context": _DEVICES, "is_available": _DEVICES,
    "detect": _DEVICES, "close": _DEVICES, "is_supported_version": _DEVICES,
    "profile_start": _DEVICES, "profile_stop": _DEVICES, "defer_cleanup": _DEVICES,
    "is_float16_supported": _DEVICES, "is_bfloat16_supported": _DEVICES,
    "is_fp8_supported": _DEVICES, "cuda_error": _DEVICES,
    # element-wise functions and reductions
    "vectorize": "ufuncs", "reduce": "reduction", "Reduce": "reduction",
}

_NO_GPU_COMPILE = ("numba_cube compiles kernels for its own backend at their launch; there is no "
                   "PTX, cubin or LTO-IR to produce without a GPU toolchain")
REFUSED = {
    "compile": _NO_GPU_COMPILE,
    "compile_all": _NO_GPU_COMPILE,
    "compile_for_current_device": _NO_GPU_COMPILE,
    "compile_ptx": _NO_GPU_COMPILE,
    "compile_ptx_for_current_device": _NO_GPU_COMPILE,
    "declare_device": "a foreign (CUDA C/C++ or PTX) device function cannot run on this "
                      "backend; write the function in Python with @cuda.jit(device=True)",
    "external_stream": "use cuda.stream() or the default stream",
    "from_cuda_array_interface": "copy the data in with cuda.to_device(host_array)",
    "open_ipc_array": "share host data between processes and cuda.to_device it there",
    "set_memory_manager": "numba_cube manages device memory itself (a pool per device)",
}

#: names kept as numba-cuda made them that no rule of ``is_kept`` covers
KEPT = frozenset({
    # argument hints, honoured by launches
    "In", "Out", "InOut",
    # @cuda.guvectorize: numba-cuda's gufunc machinery (cuda.jit kernels, device arrays), run
    # by the layer
    "guvectorize",
    # classes of numba's driver layer (exceptions, memory objects, linkable code), for isinstance
    "CudaSupportError", "KernelRuntimeError", "Archive", "CUSource", "Cubin", "Fatbin", "LTOIR",
    "LinkableCode", "PTXSource", "Object", "BaseCUDAMemoryManager",
    "HostOnlyCUDAMemoryManager", "GetIpcHandleMixin", "IpcHandle", "MappedMemory",
    "MemoryInfo", "MemoryPointer", "PinnedMemory",
    # device-side helpers and constants
    "literal_unroll", "HAS_NUMBA", "alias", "implementation", "config_default_cc",
    "numba_cuda_default_ptx_cc", "prepare_shape_strides_dtype", "require_context",
    "profiling", "runtime",
})


#: where numba-cuda defines what kernels call on the device (intrinsics, cache-hinted loads and
#: stores, the stubs of ``threadIdx``, ``shared``, ``atomic``, vector types)
_DEVICE_SIDE_MODULES = frozenset({"numba.cuda.intrinsics", "numba.cuda.cache_hints",
                                  "numba.cuda.stubs"})


def is_kept(name: str, value) -> bool:
    """Whether numba.cuda's ``value`` stays as it is by rule or by ``KEPT``."""
    if name in KEPT or isinstance(value, pytypes.ModuleType):
        return True
    if getattr(value, "__module__", None) in _DEVICE_SIDE_MODULES:
        return True
    from numba.core import types
    from numba.cuda.stubs import Stub

    if isinstance(value, types.Type):
        return True
    return isinstance(value, type) and (issubclass(value, types.Type) or issubclass(value, Stub))


def classify(name: str, value) -> list[str]:
    """The classes ``name`` is in (exactly one for a classified name)."""
    found = []
    if name in SERVED:
        found.append("served")
    if name in REFUSED:
        found.append("refused")
    if is_kept(name, value):
        found.append("kept")
    return found


def refusal(name: str):
    """What replaces the refused ``numba.cuda.<name>``: a function raising
    ``UnsupportedAPIError``."""
    instead = REFUSED[name]

    def refused(*args, **kwargs):
        raise UnsupportedAPIError(f"numba.cuda.{name}", instead)

    refused.__name__ = refused.__qualname__ = name
    refused.__doc__ = f"numba.cuda.{name}: not served by numba_cube ({instead})."
    return refused
