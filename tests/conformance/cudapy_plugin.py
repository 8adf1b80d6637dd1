"""A pytest plugin that runs numba-cuda's own ``cudapy`` tests through numba_cube.

numba-cuda ships its kernel tests (``numba.cuda.tests.cudapy``). Each test makes kernels with
``cuda.jit``, launches them as ``kernel[grid, block](*args)`` and compares what they wrote with
what it expected. This plugin leaves the tests exactly as they are and changes one thing: where
a kernel launch goes.

- ``NUMBA_CUBE_CONFORMANCE=baseline``: nothing is routed. The reference run: numba-cuda's
  simulator (``NUMBA_ENABLE_CUDASIM=1``) on a machine without a GPU, plain numba-cuda on a GPU.
- ``NUMBA_CUBE_CONFORMANCE=cpu``: under the simulator, every *launch* of a ``cuda.jit`` kernel
  (``FakeCUDAKernel.__call__`` outside a simulated kernel) is made instead by
  ``cube.kernel(dispatcher)[grid, block](*args)`` on numba_cube's CPU client. Device functions
  and everything else (device arrays, streams, ``cuda.to_device``) stay the simulator's: device
  arrays are host memory there, so a launch passes their NumPy arrays, which the numba-style launch
  copies in and writes back.
- ``NUMBA_CUBE_CONFORMANCE=cuda``: on a GPU, every ``CUDADispatcher.call`` (the launch behind
  ``kernel[grid, block](...)``) is made by numba_cube's CUDA client instead; numba device arrays
  are bound without a copy through ``__cuda_array_interface__``.

Every routed launch is recorded with its outcome, and each test's report carries them, so the
runner (``run_cudapy.py``) can tell a test that failed because numba_cube *refused* a construct
(a typed ``CompileError`` / ``LaunchArgumentError``) from one that failed after every launch had
succeeded: the launches returned, the test's assertion saw different numbers. That last class is
**silently wrong**, the defect this harness exists to find.

Results are written as JSON lines to ``$NUMBA_CUBE_CONFORMANCE_OUT`` (one object per test).
"""

from __future__ import annotations

import json
import os
import threading

import pytest

MODE = os.environ.get("NUMBA_CUBE_CONFORMANCE", "baseline")
OUT = os.environ.get("NUMBA_CUBE_CONFORMANCE_OUT")

_events: list[dict] = []          # the current test's routed launches
_events_lock = threading.Lock()   # cudapy's multithreading tests launch from several threads
_kernels: dict = {}               # dispatcher -> cube.Kernel (one per dispatcher, like numba's)


# -- what numba-cuda's own conftest provides (not shipped in its wheel) ---------------------------

def pytest_addoption(parser):
    parser.addoption("--dump-failed-filechecks", action="store_true",
                     help="(numba-cuda's option; accepted so its test classes initialise)")


@pytest.fixture(scope="class")
def initialize_from_pytest_config(request):
    """The class fixture numba-cuda's ``CUDATestCase`` asks for."""
    request.cls._dump_failed_filechecks = request.config.getoption("dump_failed_filechecks")


# -- outcome of one routed launch ------------------------------------------------------------------

def _classify(exc: BaseException | None) -> str:
    """``ok``; ``refused`` (a typed numba_cube refusal: it said it cannot do this); or ``error``
    (the launch raised anything else, e.g. the kernel's own exception as a ``LaunchFailure``)."""
    if exc is None:
        return "ok"
    import numba_cube as cube

    root = exc.root if isinstance(exc, cube.LaunchFailure) else exc
    if isinstance(root, (cube.CompileError, cube.LaunchArgumentError)):
        return "refused"
    return "error"


def _record(kernel_name: str, exc: BaseException | None) -> None:
    event = {"kernel": kernel_name, "outcome": _classify(exc)}
    if exc is not None:
        event["error"] = f"{type(exc).__name__}: {exc}"[:400]
    with _events_lock:
        _events.append(event)


def _cube_kernel(dispatcher):
    import numba_cube as cube

    k = _kernels.get(dispatcher)
    if k is None:
        k = _kernels[dispatcher] = cube.kernel(dispatcher)
    return k


def _describe(arg) -> str:
    cai = getattr(arg, "__cuda_array_interface__", None)
    if cai is not None:
        return f"{type(arg).__name__}(cai shape={cai['shape']} strides={cai.get('strides')} " \
               f"typestr={cai['typestr']} stream={cai.get('stream')})"
    if hasattr(arg, "shape"):
        return f"{type(arg).__name__}(shape={arg.shape} dtype={arg.dtype})"
    return f"{type(arg).__name__}({arg!r})"


def _launch(dispatcher, client, config, args):
    name = getattr(getattr(dispatcher, "py_func", None), "__name__", repr(dispatcher))
    if os.environ.get("NUMBA_CUBE_CONFORMANCE_TRACE"):
        # What a routed launch receives, for reading a failure (pytest -s shows it).
        print(f"[cudapy_plugin] {name}{tuple(config)}: " + ", ".join(map(_describe, args)),
              flush=True)
    try:
        kern = _cube_kernel(dispatcher)
        with client:
            kern[config](*args)
    except BaseException as exc:
        _record(name, exc)
        raise
    _record(name, None)


# -- routing ----------------------------------------------------------------------------------------

def _route_to_cpu() -> None:
    """Launches of simulator kernels go to numba_cube's CPU client."""
    import numpy as np
    from numba.cuda.simulator import kernel as simkernel
    from numba.cuda.simulator.args import ArgHint
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    import numba_cube as cube

    simulate = simkernel.FakeCUDAKernel.__call__

    def host_array(arg):
        # The simulator's device arrays are host memory: pass the NumPy array itself, so that the
        # numba-style launch copies it in and writes the results back into it, as a kernel writes
        # device memory. (A hint around one is the device array itself, as in numba.cuda; a hint
        # around a host array stays, for numba_cube to honour.)
        if isinstance(arg, ArgHint) and isinstance(arg.value, FakeCUDAArray):
            arg = arg.value
        if isinstance(arg, FakeCUDAArray):
            arg = arg._ary
        return arg

    def routed(self, *args):
        if self._device or simkernel._get_kernel_context() is not None:
            return simulate(self, *args)        # a device function, or a call inside a simulation
        config = (self.grid_dim, self.block_dim, self.stream, self.dynshared_size)
        if config[0] is None:
            return simulate(self, *args)        # unconfigured: let numba raise its own error
        converted = [host_array(a) for a in args]
        _launch(self, cube.client("cpu"), config, converted)

    simkernel.FakeCUDAKernel.__call__ = routed
    del np


def _route_to_cuda() -> None:
    """Launches of numba-cuda dispatchers go to numba_cube's CUDA client."""
    from numba.cuda import dispatcher as cudadispatcher

    import numba_cube as cube

    def routed(self, args, launch_config):
        config = (launch_config.griddim, launch_config.blockdim, launch_config.stream,
                  launch_config.sharedmem)
        _launch(self, cube.client("cuda"), config, list(args))

    cudadispatcher.CUDADispatcher.call = routed


def pytest_configure(config):
    if MODE == "cpu":
        _route_to_cpu()
    elif MODE == "cuda":
        _route_to_cuda()
    elif MODE != "baseline":
        raise pytest.UsageError(f"NUMBA_CUBE_CONFORMANCE must be baseline, cpu or cuda, not {MODE!r}")


# -- per-test report ---------------------------------------------------------------------------------

def pytest_runtest_setup(item):
    with _events_lock:
        _events.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" and not (report.when == "setup" and not report.passed):
        return
    with _events_lock:
        events = list(_events)
    error_type = None
    if report.failed and call.excinfo is not None:
        error_type = call.excinfo.typename
    row = {
        "test": item.nodeid.split("::", 1)[-1],
        "module": item.module.__name__ if getattr(item, "module", None) else item.nodeid,
        "outcome": report.outcome,           # passed / failed / skipped
        "error_type": error_type,
        "error": (str(call.excinfo.value)[:300] if error_type else None),
        "launches": events,
    }
    if OUT:
        with open(OUT, "a") as f:
            f.write(json.dumps(row) + "\n")
