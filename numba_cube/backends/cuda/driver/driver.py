"""Thin, checked wrappers over the CUDA driver API (``cuda.bindings.driver``).

Every driver call of the CUDA backend goes through this module: ``Driver.check`` turns the
``(CUresult, *values)`` tuples of cuda-python into values or a ``CudaError`` that names the call,
the error code and the driver's own description (the error's class and its classification live
in ``driver/errors.py``, which the rooms that only handle failures import instead). Nothing here decides policy; the server does.

Why a ``Driver`` object over an ``api`` module rather than module-level functions: the api is
injectable. The real one is ``cuda.bindings.driver``; the tests of the GPU path's logic on a
machine without a GPU pass a fake with the same function names (``tests/cuda/fake_driver.py``).

Handles are passed to the driver as the binding's handle objects where we hold them (streams,
events, functions) and as plain ints for device pointers, as numba-cuda does; both forms are
accepted by cuda-bindings 12.x and 13.x.

The launch hot paths do not go through ``check``: the general one calls ``api.cuLaunchKernel``
directly and compares the result with ``Driver.SUCCESS`` (a Python call frame is a measurable
share of a 4 us launch); the warm one calls what ``Driver.launcher`` built for it, which on a real
driver is libcuda's own entry point behind a compiled trampoline (``launch_call.py``). Everything
else is checked here.
"""

from __future__ import annotations

import threading

# CudaError is what every checked call raises: named here too, as part of the driver's interface.
from numba_cube.backends.cuda.driver.errors import STICKY_ERRORS, CudaError, error_class

__all__ = ["CudaError", "Driver", "load_api", "STICKY_ERRORS"]


def load_api():
    """The ``cuda.bindings.driver`` module (cuda-python 12.6+ / 13), or the older ``cuda.cuda``.

    Raises ``ImportError`` saying what to install."""
    try:
        from cuda.bindings import driver as api
    except ImportError:
        try:
            from cuda import cuda as api  # cuda-python < 12.6
        except ImportError as exc:
            raise ImportError("the CUDA backend needs cuda-python (cuda-bindings): "
                              "pip install 'numba_cube[cuda]'") from exc
    return api


class Driver:
    """Checked calls into one driver ``api``. Stateless apart from cached constants."""

    def __init__(self, api=None):
        self.api = api if api is not None else load_api()
        self.SUCCESS = self.api.CUresult.CUDA_SUCCESS
        self.NOT_READY = self.api.CUresult.CUDA_ERROR_NOT_READY
        self._names: dict = {}
        self._lock = threading.Lock()
        self._entry_points: dict | None = None     # C launch entry points, once looked up

    # -- the warm launch's call -------------------------------------------------------------------
    def launcher(self, function, grid, block, shared_bytes: int, stream, params: int,
                 cooperative: bool = False, install=None):
        """A zero-argument callable that launches ``function`` with these fixed arguments and
        returns the ``CUresult`` (falsy on success): the api's Python method, or where libcuda's
        entry point can be called directly, its compiled trampoline (``launch_call.py``), at once
        or, given ``install``, after the Python form's first ``launch_call.COMPILE_AFTER`` calls
        (``install`` then receives it). The caller keeps ``function``, ``stream`` and the
        parameter block at ``params`` alive as long as the callable."""
        from numba_cube.backends.cuda.driver import launch_call

        name = "cuLaunchCooperativeKernel" if cooperative else "cuLaunchKernel"
        python_call = launch_call.api_launcher(getattr(self.api, name), function, grid, block,
                                               shared_bytes, stream, params, cooperative)
        entry = self.c_entry_point(name)
        if not entry:
            return python_call

        def compiled():
            return launch_call.c_launcher(entry, int(function), grid, block, shared_bytes, int(stream),
                                          params, cooperative)
        return compiled() if install is None else launch_call.warming(python_call, compiled, install)

    def stream_waiter(self, event, producer, consumer, install=None):
        """``(record_and_wait, wait)`` for one producer stream's event and one consumer stream
        (``launch_call.c_stream_waiter``), compiled as ``launcher`` is."""
        from numba_cube.backends.cuda.driver import launch_call

        python_pair = launch_call.api_stream_waiter(self.api, event, producer, consumer)
        record, wait = self.c_entry_point("cuEventRecord"), self.c_entry_point("cuStreamWaitEvent")
        if not (record and wait):
            return python_pair

        def compiled():
            return launch_call.c_stream_waiter(record, wait, int(event), int(producer), int(consumer))
        return compiled() if install is None else launch_call.warming_pair(python_pair, compiled, install)

    def c_entry_point(self, name: str) -> int:
        """The address of libcuda's ``name`` in this process, or 0 where the api's method is to be
        used instead (``launch_call.c_entry_points``)."""
        with self._lock:
            if self._entry_points is None:
                from numba_cube.backends.cuda.driver import launch_call

                self._entry_points = launch_call.c_entry_points(self.api)
            return self._entry_points.get(name, 0)

    def use_entry_points(self, points: dict) -> None:
        """Call these C functions (symbol -> address, ``launch_call.C_SYMBOLS``' names) for the
        warm calls made from now on, instead of libcuda's: what a stand-in driver with C
        functions of the same prototypes offers (``benchmarks/bench_launch_python.py`` times the
        warm path's compiled calls over do-nothing ones). Calls already made keep theirs."""
        with self._lock:
            self._entry_points = dict(points)

    # -- errors -----------------------------------------------------------------------------------
    def error(self, call: str, code, detail: str = "") -> CudaError:
        """The ``CudaError`` for ``code`` returned by ``call`` (never raises itself)."""
        if type(code) is int:         # a launch through the C entry point returns a plain int
            try:
                code = self.api.CUresult(code)
            except Exception:  # noqa: BLE001 - an unknown code is still described by its number
                pass
        name, description = self._describe(code)
        return error_class()(call, code, name, description, detail)

    def _describe(self, code) -> tuple[str, str]:
        cached = self._names.get(code)
        if cached is not None:
            return cached
        name = getattr(code, "name", None) or f"CUresult({int(code) if _intlike(code) else code})"
        description = ""
        try:
            err, text = self.api.cuGetErrorString(code)
            if err == self.SUCCESS and text:
                description = text.decode() if isinstance(text, bytes) else str(text)
        except Exception:  # noqa: BLE001 - a description is a nicety; the name is enough
            pass
        self._names[code] = (name, description)
        return name, description

    def check(self, call: str, result):
        """``result`` of ``api.<call>``: its value(s) if the call succeeded, else raise."""
        err = result[0]
        if err != self.SUCCESS:
            raise self.error(call, err)
        if len(result) == 1:
            return None
        if len(result) == 2:
            return result[1]
        return result[1:]

    def call(self, name: str, *args):
        """``api.<name>(*args)``, checked."""
        return self.check(name, getattr(self.api, name)(*args))

    # -- devices and contexts ---------------------------------------------------------------------
    def init(self) -> None:
        self.call("cuInit", 0)

    def device_count(self) -> int:
        return int(self.call("cuDeviceGetCount"))

    def device(self, ordinal: int):
        return self.call("cuDeviceGet", ordinal)

    def device_name(self, dev) -> str:
        raw = self.call("cuDeviceGetName", 256, dev)
        raw = bytes(raw) if not isinstance(raw, bytes) else raw
        return raw.split(b"\0", 1)[0].decode(errors="replace")

    def device_attribute(self, name: str, dev) -> int:
        attr = getattr(self.api.CUdevice_attribute, name)
        return int(self.call("cuDeviceGetAttribute", attr, dev))

    def primary_context(self, dev):
        return self.call("cuDevicePrimaryCtxRetain", dev)

    def current_context(self) -> int:
        """The current context of this thread as an int (0: none)."""
        return int(self.call("cuCtxGetCurrent"))

    def set_current(self, ctx) -> None:
        self.call("cuCtxSetCurrent", ctx)

    def ctx_synchronize(self) -> None:
        self.call("cuCtxSynchronize")

    def driver_version(self) -> int:
        return int(self.call("cuDriverGetVersion"))

    # -- memory -----------------------------------------------------------------------------------
    def mem_alloc(self, nbytes: int) -> int:
        return int(self.call("cuMemAlloc", nbytes))

    def mem_free(self, ptr: int) -> None:
        self.call("cuMemFree", ptr)

    def mem_alloc_host(self, nbytes: int) -> int:
        return int(self.call("cuMemAllocHost", nbytes))

    def mem_free_host(self, ptr: int) -> None:
        self.call("cuMemFreeHost", ptr)

    def host_device_pointer(self, ptr: int) -> int:
        """The device address of pinned host memory ``ptr`` (``cuMemAllocHost``'s memory is
        mapped; with unified addressing, as on every 64-bit platform, it is ``ptr`` itself)."""
        return int(self.call("cuMemHostGetDevicePointer", ptr, 0))

    def memcpy_htod(self, dst: int, src_ptr: int, nbytes: int) -> None:
        self.call("cuMemcpyHtoD", dst, src_ptr, nbytes)

    def memcpy_dtoh(self, dst_ptr: int, src: int, nbytes: int) -> None:
        self.call("cuMemcpyDtoH", dst_ptr, src, nbytes)

    def memcpy_htod_async(self, dst: int, src_ptr: int, nbytes: int, stream) -> None:
        self.call("cuMemcpyHtoDAsync", dst, src_ptr, nbytes, stream)

    def memcpy_dtoh_async(self, dst_ptr: int, src: int, nbytes: int, stream) -> None:
        self.call("cuMemcpyDtoHAsync", dst_ptr, src, nbytes, stream)

    def memcpy_dtod_async(self, dst: int, src: int, nbytes: int, stream) -> None:
        self.call("cuMemcpyDtoDAsync", dst, src, nbytes, stream)

    def mem_get_info(self) -> tuple[int, int]:
        free, total = self.call("cuMemGetInfo")
        return int(free), int(total)

    def address_range(self, ptr: int) -> tuple[int, int]:
        """``(base, size)`` of the allocation that holds device pointer ``ptr``."""
        base, size = self.call("cuMemGetAddressRange", ptr)
        return int(base), int(size)

    def pointer_device(self, ptr: int) -> int:
        """The ordinal of the device that owns ``ptr`` (raises for host or unknown pointers)."""
        attr = self.api.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
        return int(self.call("cuPointerGetAttribute", attr, ptr))

    # -- streams and events -----------------------------------------------------------------------
    def stream_create(self):
        flags = int(self.api.CUstream_flags.CU_STREAM_NON_BLOCKING)
        return self.call("cuStreamCreate", flags)

    def stream_destroy(self, stream) -> None:
        self.call("cuStreamDestroy", stream)

    def stream_synchronize(self, stream) -> None:
        self.call("cuStreamSynchronize", stream)

    def stream_wait_event(self, stream, event) -> None:
        self.call("cuStreamWaitEvent", stream, event, 0)

    def event_create(self, timing: bool = False):
        flags = 0 if timing else int(self.api.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        return self.call("cuEventCreate", flags)

    def event_destroy(self, event) -> None:
        self.call("cuEventDestroy", event)

    def event_record(self, event, stream) -> None:
        self.call("cuEventRecord", event, stream)

    def event_query(self, event) -> bool:
        """True when the work the event captured is complete, False while it runs."""
        err = self.api.cuEventQuery(event)[0]
        if err == self.SUCCESS:
            return True
        if err == self.NOT_READY:
            return False
        raise self.error("cuEventQuery", err)

    def event_synchronize(self, event) -> None:
        self.call("cuEventSynchronize", event)

    def event_elapsed_ms(self, start, end) -> float:
        return float(self.call("cuEventElapsedTime", start, end))

    # -- graphs -----------------------------------------------------------------------------------
    def begin_capture(self, stream) -> None:
        # Thread-local mode: other threads' unsafe calls (e.g. a cuMemAlloc of another library)
        # do not invalidate this capture, and this thread cannot make one by accident.
        mode = self.api.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self.call("cuStreamBeginCapture", stream, mode)

    def end_capture(self, stream):
        return self.call("cuStreamEndCapture", stream)

    def graph_instantiate(self, graph):
        return self.call("cuGraphInstantiate", graph, 0)

    def graph_launch(self, graph_exec, stream) -> None:
        self.call("cuGraphLaunch", graph_exec, stream)

    def graph_destroy(self, graph) -> None:
        self.call("cuGraphDestroy", graph)

    def graph_exec_destroy(self, graph_exec) -> None:
        self.call("cuGraphExecDestroy", graph_exec)

    # -- functions --------------------------------------------------------------------------------
    def kernel_function(self, handle):
        """The ``CUfunction`` (in the current context) of a numba-cuda / cuda.core kernel handle,
        which is a ``CUkernel`` (library loading, cuda.core >= 0.2) or already a ``CUfunction``."""
        tname = type(handle).__name__
        if "CUfunction" in tname:
            return handle
        if "CUkernel" not in tname:
            handle = self.api.CUkernel(int(handle))
        return self.call("cuKernelGetFunction", handle)

    def module_load_data(self, image: bytes):
        """A ``CUmodule`` of ``image`` (a cubin, or PTX the driver compiles) loaded into the
        current context: how ``diskcache.py`` loads a kernel without numba-cuda."""
        return self.call("cuModuleLoadData", image)

    def module_get_function(self, module, name: str):
        """The ``CUfunction`` called ``name`` (its mangled name) in ``module``."""
        return self.call("cuModuleGetFunction", module, name.encode())

    def function_attribute(self, name: str, func) -> int:
        attr = getattr(self.api.CUfunction_attribute, name)
        return int(self.call("cuFuncGetAttribute", attr, func))

    def set_function_attribute(self, name: str, func, value: int) -> None:
        attr = getattr(self.api.CUfunction_attribute, name)
        self.call("cuFuncSetAttribute", func, attr, value)

    def occupancy(self, func, block_threads: int, shared: int = 0) -> int:
        return int(self.call("cuOccupancyMaxActiveBlocksPerMultiprocessor", func, block_threads, shared))


def _intlike(code) -> bool:
    try:
        int(code)
    except Exception:  # noqa: BLE001
        return False
    return True
