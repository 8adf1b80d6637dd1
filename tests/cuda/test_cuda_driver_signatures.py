"""Every driver call the CUDA backend makes is accepted by the installed cuda-bindings.

Without a GPU nothing can be called for real, but cuda-bindings converts and checks the
arguments *before* it loads the driver library: a call with arguments of the wrong kind raises
``TypeError``, a well-formed one raises because the driver is missing. So each wrapper of
``driver.Driver`` is called here with arguments of the kinds the server passes, and must not
fail with ``TypeError``/``AttributeError`` (a renamed function, a changed signature).
"""

from __future__ import annotations

import pytest

from numba_cube.backends.cuda.launch import packed_launch
from numba_cube.backends.cuda.driver import probe

pytest.importorskip("cuda.bindings")

pytestmark = pytest.mark.skipif(probe.simulating() or probe.device_count() > 0 or
                                probe.available() is None,
                                reason="only meaningful where the driver library is absent")


def _calls(drv):
    api = drv.api
    stream = api.CUstream(7)
    event = api.CUevent(9)
    return {
        "init": lambda: drv.init(),
        "device_count": lambda: drv.device_count(),
        "device": lambda: drv.device(0),
        "device_name": lambda: drv.device_name(0),
        "device_attribute": lambda: drv.device_attribute("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT", 0),
        "primary_context": lambda: drv.primary_context(0),
        "current_context": lambda: drv.current_context(),
        "set_current": lambda: drv.set_current(api.CUcontext(5)),
        "ctx_synchronize": lambda: drv.ctx_synchronize(),
        "mem_alloc": lambda: drv.mem_alloc(64),
        "mem_free": lambda: drv.mem_free(4096),
        "mem_alloc_host": lambda: drv.mem_alloc_host(64),
        "mem_free_host": lambda: drv.mem_free_host(4096),
        "host_device_pointer": lambda: drv.host_device_pointer(4096),
        "memcpy_htod": lambda: drv.memcpy_htod(4096, 8192, 8),
        "memcpy_dtoh": lambda: drv.memcpy_dtoh(8192, 4096, 8),
        "memcpy_htod_async": lambda: drv.memcpy_htod_async(4096, 8192, 8, stream),
        "memcpy_dtoh_async": lambda: drv.memcpy_dtoh_async(8192, 4096, 8, stream),
        "address_range": lambda: drv.address_range(4096),
        "pointer_device": lambda: drv.pointer_device(4096),
        "stream_create": lambda: drv.stream_create(),
        "stream_synchronize": lambda: drv.stream_synchronize(stream),
        "stream_wait_event": lambda: drv.stream_wait_event(stream, event),
        "stream_wait_event_foreign": lambda: drv.stream_wait_event(api.CUstream(1), event),
        "event_create": lambda: drv.event_create(),
        "event_create_timing": lambda: drv.event_create(timing=True),
        "event_record": lambda: drv.event_record(event, stream),
        "event_query": lambda: drv.event_query(event),
        "event_synchronize": lambda: drv.event_synchronize(event),
        "event_elapsed_ms": lambda: drv.event_elapsed_ms(event, event),
        "begin_capture": lambda: drv.begin_capture(stream),
        "end_capture": lambda: drv.end_capture(stream),
        "graph_instantiate": lambda: drv.graph_instantiate(api.CUgraph(3)),
        "graph_launch": lambda: drv.graph_launch(api.CUgraphExec(3), stream),
        "kernel_function": lambda: drv.kernel_function(api.CUkernel(11)),
        "kernel_function_int": lambda: drv.kernel_function(11),
        "occupancy": lambda: drv.occupancy(api.CUfunction(12), 256, 0),
        "device_attribute_shared_optin": lambda: drv.device_attribute(
            "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", 0),
        "function_attribute": lambda: drv.function_attribute(
            "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", api.CUfunction(12)),
        "set_function_attribute": lambda: drv.set_function_attribute(
            "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", api.CUfunction(12), 65536),
        "launch_shared": lambda: drv.check("cuLaunchKernel", api.cuLaunchKernel(
            api.CUfunction(12), 1, 1, 1, 32, 1, 1, 65536, stream, 123456, 0)),
        "launch": lambda: drv.check("cuLaunchKernel", api.cuLaunchKernel(
            api.CUfunction(12), 1, 1, 1, 32, 1, 1, 0, stream, 123456, 0)),
        "launch_cooperative": lambda: drv.check("cuLaunchCooperativeKernel", packed_launch.cooperative_launcher(api)(
            api.CUfunction(12), 1, 1, 1, 32, 1, 1, 0, stream, 123456, 0)),
        "ctx_get_current_raw": lambda: api.cuCtxGetCurrent(),
        "module_load_data": lambda: drv.module_load_data(b"\x7fELF fake cubin"),
        "module_get_function": lambda: drv.module_get_function(api.CUmodule(13), "_Z4axpy"),
        "driver_version": lambda: drv.driver_version(),
        "device_attribute_cc": lambda: drv.device_attribute(
            "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR", 0),
    }


NAMES = ["init", "device_count", "device", "device_name", "device_attribute", "primary_context",
         "current_context", "set_current", "ctx_synchronize", "mem_alloc", "mem_free", "mem_alloc_host",
         "mem_free_host", "host_device_pointer", "memcpy_htod", "memcpy_dtoh", "memcpy_htod_async", "memcpy_dtoh_async",
         "address_range", "pointer_device", "stream_create", "stream_synchronize", "stream_wait_event",
         "stream_wait_event_foreign", "event_create", "event_create_timing", "event_record",
         "event_query", "event_synchronize", "event_elapsed_ms", "begin_capture", "end_capture",
         "graph_instantiate", "graph_launch", "kernel_function", "kernel_function_int", "occupancy",
         "device_attribute_shared_optin", "function_attribute", "set_function_attribute",
         "launch_shared", "launch", "launch_cooperative", "ctx_get_current_raw",
         "module_load_data", "module_get_function", "driver_version", "device_attribute_cc"]


def test_every_call_is_listed():
    """The list below covers every call the table above makes (no call silently untested)."""
    from numba_cube.backends.cuda.driver.driver import Driver

    assert sorted(NAMES) == sorted(_calls(Driver()))


@pytest.mark.parametrize("name", NAMES)
def test_driver_call_is_well_formed(name):
    """The wrapper's call reaches the driver loader (no TypeError/AttributeError on the way)."""
    from numba_cube.backends.cuda.driver.driver import Driver

    drv = Driver()
    call = _calls(drv)[name]
    try:
        call()
    except (TypeError, AttributeError) as exc:
        pytest.fail(f"{name}: {type(exc).__name__}: {exc}")
    except Exception:  # noqa: BLE001 - the missing driver: expected
        pass
