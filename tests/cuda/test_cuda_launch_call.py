"""The warm launch's driver call (``backends/cuda/driver/launch_call.py``): what reaches the C entry point.

No GPU is needed: the entry point is a Numba ``cfunc`` with ``cuLaunchKernel``'s (or
``cuLaunchCooperativeKernel``'s) C prototype that writes the arguments it received into the buffer
its ``kernelParams`` points to, so each test compares what the C side saw with the values given.
The calls are tested in both of their forms (``THUNK``): the thunk of ``thunks.py`` and the
Numba trampoline it stands in for where no thunk can be made.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cfunc, types

from numba_cube.backends.cuda.driver import launch_call, thunks
from numba_cube.backends.cuda.driver.driver import Driver

_U32, _U64, _OUT = types.uint32, types.uint64, types.CPointer(types.uint64)


@cfunc(types.int32(_U64, _U32, _U32, _U32, _U32, _U32, _U32, _U32, _U64, _OUT, _U64))
def _record_launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
    params[0], params[1], params[2], params[3], params[4] = f, gx, gy, gz, bx
    params[5], params[6], params[7], params[8], params[9] = by, bz, shared, stream, extra
    return 719          # any CUresult: the caller must get it back unchanged


@cfunc(types.int32(_U64, _U32, _U32, _U32, _U32, _U32, _U32, _U32, _U64, _OUT))
def _record_cooperative(f, gx, gy, gz, bx, by, bz, shared, stream, params):
    params[0], params[1], params[2], params[3], params[4] = f, gx, gy, gz, bx
    params[5], params[6], params[7], params[8] = by, bz, shared, stream
    return 0


#: both forms of a compiled call: a thunk (thunks.py) and the Numba trampoline over a block
THUNK = pytest.mark.parametrize("thunk", [True, False], ids=["thunk", "trampoline"])


@THUNK
def test_c_launcher_passes_every_argument_at_its_width(thunk):
    """Each of cuLaunchKernel's 11 arguments reaches the C function at its position: the handles
    as full 64-bit values, the dimensions and shared size as 32-bit unsigned ints, extra as NULL;
    the CUresult comes back as the call's result, on every call of the same callable."""
    seen = np.zeros(10, np.uint64)
    function, stream = 2**40 + 5, 2**50 + 3
    call = launch_call.c_launcher(_record_launch.address, function, (3, 4, 5), (6, 7, 8), 49152,
                                  stream, seen.ctypes.data, thunk=thunk)
    assert isinstance(call, thunks.Thunk) is thunk
    for _ in range(3):
        assert call() == 719
    np.testing.assert_array_equal(seen, [function, 3, 4, 5, 6, 7, 8, 49152, stream, 0])


@THUNK
def test_c_launcher_cooperative_takes_no_extra(thunk):
    """A cooperative launch calls a 10-parameter entry point (cuLaunchCooperativeKernel has no
    ``extra``) with the same values in the same order, and success is 0 (falsy)."""
    seen = np.zeros(10, np.uint64)
    call = launch_call.c_launcher(_record_cooperative.address, 77, (2, 1, 1), (64, 2, 1), 0, 99,
                                  seen.ctypes.data, cooperative=True, thunk=thunk)
    assert not call()
    np.testing.assert_array_equal(seen[:9], [77, 2, 1, 1, 64, 2, 1, 0, 99])


class _PythonApi:
    """A driver api that is not cuda-python's module (what the fake driver is): records calls."""

    class CUresult:
        CUDA_SUCCESS = 0
        CUDA_ERROR_NOT_READY = 600

    def __init__(self):
        self.calls = []

    def cuLaunchKernel(self, *args):
        self.calls.append(("cuLaunchKernel", args))
        return (0,)

    def cuLaunchCooperativeKernel(self, *args):
        self.calls.append(("cuLaunchCooperativeKernel", args))
        return (0,)


def test_driver_launcher_uses_the_api_method_of_a_python_api():
    """Over an api that is not cuda-python's module, ``Driver.launcher`` calls the api's own
    method with cuLaunchKernel's argument list (``extra`` 0), or cuLaunchCooperativeKernel's
    (no ``extra``), and returns its CUresult."""
    api = _PythonApi()
    driver = Driver(api)
    assert driver.launcher("f", (1, 2, 3), (4, 5, 6), 8, "s", 1234)() == 0
    assert driver.launcher("f", (1, 1, 1), (32, 1, 1), 0, "s", 99, cooperative=True)() == 0
    assert api.calls == [("cuLaunchKernel", ("f", 1, 2, 3, 4, 5, 6, 8, "s", 1234, 0)),
                         ("cuLaunchCooperativeKernel", ("f", 1, 1, 1, 32, 1, 1, 0, "s", 99))]


def test_error_of_a_plain_int_code_is_named():
    """A refusal returned as a plain int (the C entry point's CUresult) is described as the
    enum member of cuda-python's ``CUresult`` with that value."""
    from cuda.bindings import driver as api

    code = int(api.CUresult.CUDA_ERROR_INVALID_VALUE)
    err = Driver(api).error("cuLaunchKernel", code)
    assert err.name == "CUDA_ERROR_INVALID_VALUE"
    assert "cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE" in str(err)


# A stream waiter's entry points: the "event" handle they are given is the address of a buffer in
# which they note what they saw: [record's stream, records, wait's stream, wait's flags, waits,
# call order (1: record, 2: wait, as decimal digits), record's result, wait's result].
@cfunc(types.int32(_OUT, _U64))
def _record_event(event, stream):
    event[0] = stream
    event[1] += 1
    event[5] = event[5] * 10 + 1
    return event[6]


@cfunc(types.int32(_U64, _OUT, _U32))
def _wait_event(stream, event, flags):
    event[2] = stream
    event[3] = flags
    event[4] += 1
    event[5] = event[5] * 10 + 2
    return event[7]


def _waiter(seen, thunk):
    return launch_call.c_stream_waiter(_record_event.address, _wait_event.address, seen.ctypes.data,
                                       2**45 + 1, 2**46 + 2, thunk=thunk)


@THUNK
def test_stream_waiter_records_on_the_producer_then_waits_on_the_consumer(thunk):
    """``record_and_wait`` records the event on the producer stream, then makes the consumer
    stream wait on it with flags 0, in that order, and returns 0; ``wait`` alone only waits."""
    seen = np.zeros(8, np.uint64)
    record_and_wait, wait = _waiter(seen, thunk)
    assert record_and_wait() == 0
    np.testing.assert_array_equal(seen[:6], [2**45 + 1, 1, 2**46 + 2, 0, 1, 12])
    assert wait() == 0
    np.testing.assert_array_equal(seen[[1, 4, 5]], [1, 2, 122])


@THUNK
def test_stream_waiter_reports_which_call_failed(thunk):
    """A failed record is returned as its CUresult and nothing waits; a failed wait comes back
    shifted, and ``failed_call`` names the call and the code either way."""
    seen = np.zeros(8, np.uint64)
    record_and_wait, wait = _waiter(seen, thunk)
    seen[6] = 700
    err = record_and_wait()
    assert err == 700 and seen[4] == 0
    assert launch_call.failed_call(err) == ("cuEventRecord", 700)
    seen[6], seen[7] = 0, 400
    err = wait()
    assert launch_call.failed_call(err) == ("cuStreamWaitEvent", 400)
    assert launch_call.failed_call(record_and_wait()) == ("cuStreamWaitEvent", 400)


def test_warming_switches_to_the_compiled_call_once():
    """``warming`` calls the Python form; at its ``after``-th call it compiles the replacement
    once and installs it (the holder calls that from then on); the pair form counts its two
    calls together."""
    made, installed, calls = [], [], []

    def compile_call():
        made.append(1)
        return "compiled"
    call = launch_call.warming(lambda: calls.append(1) or 0, compile_call, installed.append, after=3)
    for _ in range(5):
        assert call() == 0
    assert (len(calls), made, installed) == (5, [1], ["compiled"])
    pair_installed = []
    record_and_wait, wait = launch_call.warming_pair((lambda: 1, lambda: 2), lambda: "pair",
                                                     pair_installed.append, after=2)
    assert (record_and_wait(), pair_installed) == (1, [])
    assert (wait(), pair_installed) == (2, ["pair"])


class _DriverWithEntryPoints(Driver):
    """A driver whose libcuda entry points are the recording cfuncs above (no GPU here)."""

    ENTRY_POINTS = {"cuLaunchKernel": _record_launch.address, "cuEventRecord": _record_event.address,
                    "cuStreamWaitEvent": _wait_event.address}

    def c_entry_point(self, name: str) -> int:
        return self.ENTRY_POINTS.get(name, 0)


def test_driver_launcher_goes_through_the_api_then_the_entry_point():
    """With entry points, ``Driver.launcher(install=...)`` launches through the api's method for
    its first ``COMPILE_AFTER`` calls and then hands ``install`` the compiled call of the entry
    point, with the same arguments; without ``install`` the compiled call comes at once."""
    api = _PythonApi()
    driver = _DriverWithEntryPoints(api)
    seen = np.zeros(10, np.uint64)
    installed = []
    call = driver.launcher(41, (2, 1, 1), (64, 1, 1), 0, 43, seen.ctypes.data, install=installed.append)
    for _ in range(launch_call.COMPILE_AFTER):
        assert not call()
    assert len(api.calls) == launch_call.COMPILE_AFTER and len(installed) == 1
    assert installed[0]() == 719
    np.testing.assert_array_equal(seen, [41, 2, 1, 1, 64, 1, 1, 0, 43, 0])
    assert driver.launcher(41, (1, 1, 1), (1, 1, 1), 0, 43, seen.ctypes.data)() == 719
