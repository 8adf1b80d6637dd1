"""Bad inputs, buffer-less failures and scalar types on the CUDA backend: the twin of
``tests/runtime/test_bad_inputs.py``, ``ledger/test_lost_failures.py`` and ``launch/test_arg_types.py``, as far
as they apply. The CUDA servers (the simulator's and the GPU path's: both the policy server
``DeviceServer``) share the runtime's launch policy: the same typed errors on the issuing thread,
the same launch limits as failures on the write set, the same reports of failures no buffer
carries."""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube import (CaptureError, DTypeError, LaunchArgumentError, LaunchModeError, OptionError,
                        ShapeError, StreamIdError, UnrecordedFailureWarning)

from _cuda_setup import DEVICE, KIND, only


@cube.kernel
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cube.kernel
def fill_index(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = i


@cube.kernel
def scalar_only(n):
    if cuda.grid(1) == n:
        raise ValueError("injected")


def _no_compile(n):
    if cuda.grid(1) == n:
        undefined_name_in_kernel()  # noqa: F821 - the point of the test


_no_compile.refuse_compile = True       # the fake driver's compiler refuses it like numba-cuda
does_not_compile = cube.kernel(_no_compile)


@cube.kernel
def scale(x, s, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * s


@cube.kernel
def invert(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = ~a


@cube.kernel
def count_leading_zeros(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = cuda.clz(a)


@pytest.fixture(autouse=True)
def _collect_garbage_here():
    """Free the cyclic garbage each test leaves (tracebacks of expected errors hold its frame and
    handles) on this thread, before the next test: see the table test for why it matters."""
    yield
    gc.collect()


def assert_device_works(client, unrelated=None, expected=None) -> None:
    """A valid launch gives NumPy's answer, sync() does not raise (nor report anything), an
    unrelated buffer stays readable."""
    x, y = np.arange(64.0), np.full(64, 0.5)
    out = client.empty(64)
    client.launch(axpy, 1, 64, 3.0, client.create(x), client.create(y), out)
    np.testing.assert_array_equal(client.read(out), 3.0 * x + y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnrecordedFailureWarning)
        client.sync()
    if unrelated is not None:
        np.testing.assert_array_equal(client.read(unrelated), expected)


def _two_exits(mode):
    guard = mode()
    guard.__enter__()
    guard.__exit__(None, None, None)
    guard.__exit__(None, None, None)


def _inside_a_capture(client, operation):
    client.graph_prepare()
    client.start_capture()
    try:
        operation()
    finally:
        with pytest.raises(CaptureError):
            client.stop_capture()


def _count(client, dtype, n=3):
    return cube.CubeCount.dynamic(client.create(np.array([2, 1, 1, 1][:n], dtype)))


BAD_INPUTS = {
    "create of dtype object": (lambda c: c.create(np.array([1, "a", None], dtype=object)),
                               DTypeError, TypeError, "object"),
    "empty of dtype object": (lambda c: c.empty(4, object), DTypeError, TypeError, "object"),
    "byte size overflows": (lambda c: c.empty((2**32, 2**32)), ShapeError, ValueError, "bytes"),
    "negative dim": (lambda c: c.empty(-5), ShapeError, ValueError, "negative"),
    "unhashable stream id": (lambda c: c.set_stream([1]), StreamIdError, TypeError, "StreamId"),
    "dynamic count of int64": (lambda c: _count(c, np.int64), LaunchArgumentError, TypeError, "uint32"),
    "dynamic count of float32": (lambda c: _count(c, np.float32), LaunchArgumentError, TypeError,
                                 "uint32"),
    "dynamic count of four uint32": (lambda c: _count(c, np.uint32, 4), LaunchArgumentError,
                                     TypeError, "three"),
    "int beyond int64 and uint64": (lambda c: c.launch(axpy, 1, 4, 2**70, *[c.create(np.ones(4))] * 3),
                                    LaunchArgumentError, TypeError, "'a'"),
    "not a kernel": (lambda c: c.launch(42, 1, 1), LaunchArgumentError, TypeError, "kernel"),
    "misspelt client option": (lambda c: cube.client(f"{DEVICE}:0", fastmat=True), OptionError,
                               TypeError, "fastmath"),
    "dry_run exited twice": (lambda c: _two_exits(cube.dry_run), LaunchModeError, RuntimeError,
                             "dry_run"),
    "profile inside a capture": (lambda c: _inside_a_capture(c, lambda: c.profile(lambda: None)),
                                 CaptureError, cube.CubeError, "profiling"),
    "allocation the pool cannot serve in a capture": (
        lambda c: _inside_a_capture(c, lambda: c.empty(50_000_000)), CaptureError, cube.CubeError,
        "allocation"),
}


@pytest.mark.parametrize("row", list(BAD_INPUTS))
def test_bad_input_is_a_typed_error_and_breaks_nothing(client, row):
    """Each bad input raises its typed error at the call; the device keeps working after it."""
    action, error, builtin, names = BAD_INPUTS[row]
    unrelated = client.create(np.arange(16.0))
    with pytest.raises(error, match=names) as info:
        action(client)
    assert isinstance(info.value, builtin) and isinstance(info.value, cube.CubeError)
    # The traceback and this frame refer to each other, keeping the handles the action made
    # alive as garbage in a cycle. Collected later, at a random point, their finalizers could run
    # inside a simulator thread the fake driver starts while it holds its lock, and deadlock it
    # (the fake's limitation: a real driver starts no Python threads). Free them here, now.
    del info
    gc.collect()
    assert cube.launch_mode() is cube.LaunchMode.EXECUTE
    assert_device_works(client, unrelated, np.arange(16.0))


def test_cuda_compile_options_are_known(client):
    """numba-cuda's compile options are accepted on every CUDA backend (the simulator ignores
    them): code written for cube.client("cuda", ...) runs unchanged."""
    fast = cube.client(f"{DEVICE}:0", fastmath=True, lineinfo=False)
    out = fast.create(np.zeros(8))
    fast.launch(fill_index, 1, 8, out)
    np.testing.assert_array_equal(fast.read(out), np.arange(8.0))


BEYOND_LIMITS = {
    "2048 units per cube": (1, 2048, "1024 units"),
    "cube dim z above 64": (1, (1, 1, 65), "per-dimension"),
    "cube count x of 2**31": (2**31, 1, "grid limits"),
    "cube count y above 65535": ((1, 65536), 1, "grid limits"),
}


@pytest.mark.parametrize("row", list(BEYOND_LIMITS))
def test_launch_beyond_the_limits_fails_its_write_set(client, row):
    """A launch beyond CUDA's launch limits is refused before it is dispatched, the same on every
    CUDA backend as on the CPU: a LaunchFailure on its output whose root is a LaunchArgumentError
    naming the limit, known at once; relaunching within the limits repairs it."""
    count, dim, names = BEYOND_LIMITS[row]
    out = client.create(np.full(8, -1.0))
    client.launch(fill_index, count, dim, out)
    with pytest.raises(cube.LaunchFailure) as known:
        client.check(out)
    with pytest.raises(cube.LaunchFailure) as info:
        client.read(out)
    for failure in (known.value, info.value):
        assert isinstance(failure.root, LaunchArgumentError) and names in str(failure.root)
    client.launch(fill_index, 1, 8, out)
    np.testing.assert_array_equal(client.read(out), np.arange(8.0))
    assert_device_works(client)


# -- failures no buffer carries ------------------------------------------------------------------
def _cases():
    cases = {
        "does not compile": (does_not_compile, 1, 4, lambda c: (0,),
                             NameError if KIND == "sim" else cube.CompileError),
        "beyond the launch limits": (scalar_only, 1, 2048, lambda c: (0,), LaunchArgumentError),
    }
    if KIND == "sim":   # on a GPU (and the fake driver) a kernel that faults breaks the context
        cases["kernel raises, scalar only"] = (scalar_only, 1, 4, lambda c: (0,), ValueError)
    return cases


CASES = _cases()


@pytest.mark.parametrize("case", list(CASES))
def test_numba_style_launch_raises_its_own_failure(client, case):
    """kernel[count, dim](...) raises its own launch's failure although it writes no buffer."""
    kernel, count, dim, args, root = CASES[case]
    with client, pytest.raises(cube.LaunchFailure) as info:
        kernel[count, dim](*args(client))
    assert isinstance(info.value.root, root), info.value.root
    assert_device_works(client)


@pytest.mark.parametrize("case", list(CASES))
def test_client_launch_reports_an_unrecorded_failure_warning(client, case):
    """client.launch of such a launch: the next sync() issues one UnrecordedFailureWarning with
    the root cause."""
    kernel, count, dim, args, root = CASES[case]
    with pytest.warns(UnrecordedFailureWarning) as record:
        client.launch(kernel, count, dim, *args(client))
        client.sync()
    (warning,) = [w for w in record if w.category is UnrecordedFailureWarning]
    assert isinstance(warning.message.failure.root, root)
    assert_device_works(client)


def test_dry_run_lists_what_would_fail_before_running(client, kind):
    """run.failures, complete when the dry run exits: the launch beyond the limits, and (where
    something is compiled: not on the simulator) the kernel that does not compile."""
    with cube.dry_run() as run:
        client.launch(scalar_only, 1, 2048, 0)
        client.launch(does_not_compile, 1, 4, 0)
    found = {f.kernel_id: f.error for f in run.failures}
    assert isinstance(found[scalar_only.id], LaunchArgumentError)
    if kind != "sim":
        assert isinstance(found[does_not_compile.id], cube.CompileError)
    assert_device_works(client)


# -- scalar types ------------------------------------------------------------------------------------
def test_float32_scalar_keeps_float32_arithmetic(client):
    """x * np.float32(1/3) with x float32, stored into float64: NumPy's float32 product."""
    x = np.linspace(0.1, 7.3, 64, dtype=np.float32)
    s = np.float32(1 / 3)
    out = client.empty(64)
    client.launch(scale, 1, 64, client.create(x), s, out)
    float32_product = (x * s).astype(np.float64)
    assert not np.array_equal(float32_product, x.astype(np.float64) * np.float64(s))
    np.testing.assert_array_equal(client.read(out), float32_product)


def test_uint8_scalar_keeps_its_type(client):
    """~np.uint8(200) is 55 in the kernel, as in NumPy (an int64 would give -201)."""
    out = client.empty(8, np.int64)
    client.launch(invert, 1, 8, np.uint8(200), out)
    np.testing.assert_array_equal(client.read(out), np.full(8, ~np.uint8(200), np.int64))


@only("gpu", why="the simulator's clz counts 32 bits whatever the type")
def test_clz_of_int32_counts_32_bits(client):
    """cuda.clz of an np.int32 counts within 32 bits (31 for 1); of a Python int (int64), 63."""
    out = client.empty(8, np.int64)
    client.launch(count_leading_zeros, 1, 8, np.int32(1), out)
    np.testing.assert_array_equal(client.read(out), np.full(8, 31))
    client.launch(count_leading_zeros, 1, 8, 1, out)
    np.testing.assert_array_equal(client.read(out), np.full(8, 63))
