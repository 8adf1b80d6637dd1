"""Contracts of the CPU backend's compile stage (numba_cube.backends.cpu.server): one program per
kernel identity, the kernel's and the client's compile options, and Numba's NUMBA_BOUNDSCHECK.

Answers are checked against NumPy; what reached Numba is read from Numba's own output (the LLVM
IR of the compiled function).
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, types
from numba.core import config as numba_config

import numba_cube as cube
from numba_cube import config
from numba_cube.backends.cpu.server import CpuBackend, cpu_flags
from numba_cube.errors import CompileError, LaunchFailure

F64 = types.Array(types.float64, 1, "C")


def make_add(k):
    @cube.kernel
    def add_k(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + k
    return add_k


def make_block_sum(tpb):
    @cube.kernel
    def block_sum(x, out):
        buf = cuda.shared.array(tpb, np.float64)
        t = cuda.threadIdx.x
        buf[t] = x[cuda.grid(1)]
        cuda.syncthreads()
        if t == 0:
            acc = 0.0
            for j in range(tpb):
                acc += buf[j]
            out[cuda.blockIdx.x] = acc
    return block_sum


def make_apply(dev):
    @cube.kernel
    def apply(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = dev(x[i])
    return apply


@cuda.jit(device=True)
def dev_triple(v):
    return v * 3.0


@cuda.jit(device=True)
def dev_square(v):
    return v * v


def _axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def _shifted(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i + 1]              # one past the end for the last unit


@pytest.fixture
def client():
    return cube.client("cpu", boundscheck=False)


def test_factory_kernels_each_run_their_own_code(client):
    """Two kernels of one factory (closure value, shared-array size, device function), launched
    one after the other on one client, each give NumPy's answer."""
    x = np.arange(256.0)
    hx = client.create(x)
    for k in (1.0, 2.0):
        out = client.empty(256, np.float64)
        client.launch(make_add(k), 1, 256, hx, out)
        np.testing.assert_array_equal(client.read(out), x + k)
    for tpb in (32, 64):
        out = client.empty(256 // tpb, np.float64)
        client.launch(make_block_sum(tpb), 256 // tpb, tpb, hx, out)
        np.testing.assert_array_equal(client.read(out), x.reshape(-1, tpb).sum(axis=1))
    for dev, expected in ((dev_triple, x * 3.0), (dev_square, x * x)):
        out = client.empty(256, np.float64)
        client.launch(make_apply(dev), 1, 256, hx, out)
        np.testing.assert_array_equal(client.read(out), expected)


def _axpy_fm(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def test_fastmath_of_a_wrapped_dispatcher_reaches_numba(tmp_path, monkeypatch):
    """cube.kernel(cuda.jit(fastmath=True)(f)) compiles with Numba's fast-math flags (``fmul
    fast`` in Numba's LLVM IR), cube.kernel(f) without; both compute axpy."""
    # A kernel of this test only, and a cache of its own: Numba shows no IR for cached code.
    monkeypatch.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path))
    backend = CpuBackend()
    sig = (types.float64, F64, F64, F64)
    extras = ("serial", (256, 1, 1))
    fast = backend.compile(cube.kernel(cuda.jit(fastmath=True)(_axpy_fm)), sig, extras, {})
    plain = backend.compile(cube.kernel(_axpy_fm), sig, extras, {})
    for run, fastmath in ((fast, True), (plain, False)):
        assert run.program.serial.targetoptions.get("fastmath", False) is fastmath
    ir = {name: run.program.serial.inspect_llvm(run.program.serial.signatures[0])
          for name, run in (("fast", fast), ("plain", plain))}
    assert "fmul fast" in ir["fast"]
    assert "fmul fast" not in ir["plain"] and "fmul" in ir["plain"]
    x, y = np.arange(64.0), np.ones(64)
    for run in (fast, plain):
        out = np.zeros(64)
        run((1, 1, 1), (64, 1, 1), (2.0, x, y, out))
        np.testing.assert_allclose(out, 2.0 * x + y)


def test_client_options_win_over_kernel_options():
    """A client's boundscheck/fastmath wins over the kernel's; options without a CPU meaning are
    accepted and change nothing; link= (PTX, CUDA C) is a CompileError."""
    k = cube.kernel(_axpy, boundscheck=True, fastmath=True, lineinfo=True, max_registers=32,
                    opt=False, debug=True)
    assert cpu_flags(k, {}) == (True, True, "python")
    assert cpu_flags(k, {"boundscheck": False, "fastmath": False}) == (False, False, "python")
    assert cpu_flags(cube.kernel(_axpy), {"fastmath": True}) == (True, True, "numpy")
    assert cpu_flags(cube.kernel(_axpy, fastmath={"nsz", "arcp"}), {}) == (True, ("arcp", "nsz"),
                                                                           "numpy")
    assert cpu_flags(cube.kernel(_axpy, debug=True), {}) == (True, False, "python")
    with pytest.raises(CompileError, match="link"):
        cpu_flags(cube.kernel(_axpy, link=["extra.ptx"]), {})


def test_bounds_checking_is_on_unless_something_says_false(monkeypatch):
    """The CPU default (issue 30): with nothing said anywhere -- no client option, no kernel
    option, neither NUMBA_CUBE_BOUNDSCHECK nor NUMBA_BOUNDSCHECK -- kernels compile checked. A
    False given anywhere turns it off: the client's option, the kernel's (``cube.kernel(f,
    boundscheck=False)`` and numba-cuda's ``cuda.jit(boundscheck=False)``, the only value
    numba-cuda accepts), or the environment's; numba-cuda's unset option (None) is not a False."""
    monkeypatch.delenv("NUMBA_CUBE_BOUNDSCHECK", raising=False)
    monkeypatch.delenv("NUMBA_BOUNDSCHECK", raising=False)
    assert "boundscheck" not in cube.client("cpu").options
    assert cpu_flags(cube.kernel(_axpy), {})[0] is True
    assert cpu_flags(cube.kernel(cuda.jit(_axpy)), {})[0] is True
    assert cpu_flags(cube.kernel(_axpy), {"boundscheck": None})[0] is True
    assert cpu_flags(cube.kernel(_axpy), {"boundscheck": False})[0] is False
    assert cpu_flags(cube.kernel(_axpy, boundscheck=False), {})[0] is False
    assert cpu_flags(cube.kernel(cuda.jit(boundscheck=False)(_axpy)), {})[0] is False
    assert cpu_flags(cube.kernel(_axpy, boundscheck=False), {"boundscheck": True})[0] is True
    monkeypatch.setenv("NUMBA_CUBE_BOUNDSCHECK", "0")
    assert cube.client("cpu").options["boundscheck"] is False


def test_kernel_boundscheck_option_checks_indexing():
    """cube.kernel(f, boundscheck=True) on a client that says nothing about bounds checking:
    an out-of-bounds read fails the launch with IndexError (LaunchFailure on its output)."""
    client = cube.client("cpu")
    if "boundscheck" in client.options:
        pytest.skip("the environment decides bounds checking for every CPU client")
    x = client.create(np.arange(8.0))
    out = client.empty(8, np.float64)
    client.launch(cube.kernel(_shifted, boundscheck=True), 1, 8, x, out)
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    assert isinstance(info.value.root, IndexError)


@pytest.fixture
def numba_boundscheck(monkeypatch):
    """Set NUMBA_BOUNDSCHECK for one test; Numba's config is reloaded from the environment after
    it, so that later compiles in this process are not checked."""
    def setenv(value: str):
        monkeypatch.setenv("NUMBA_BOUNDSCHECK", value)
    yield setenv
    monkeypatch.delenv("NUMBA_BOUNDSCHECK", raising=False)
    numba_config.reload_config()
    assert numba_config.BOUNDSCHECK is None
    # numba_cube reloads Numba's config only when the variable changed since it last looked: it
    # did not see this reload, and a next test setting the same value must make it look again
    config._numba_boundscheck_seen[0] = None


def test_environment_decides_a_cpu_clients_boundscheck(numba_boundscheck, monkeypatch):
    """Without a client option, NUMBA_CUBE_BOUNDSCHECK decides, and Numba's NUMBA_BOUNDSCHECK
    wins over it; an explicit client option is kept as given; with neither, the client has none
    (the kernel's option, else the default, decides)."""
    monkeypatch.delenv("NUMBA_CUBE_BOUNDSCHECK", raising=False)
    monkeypatch.delenv("NUMBA_BOUNDSCHECK", raising=False)
    assert "boundscheck" not in cube.client("cpu").options
    monkeypatch.setenv("NUMBA_CUBE_BOUNDSCHECK", "1")
    assert cube.client("cpu").options["boundscheck"] is True
    numba_boundscheck("0")
    assert cube.client("cpu").options["boundscheck"] is False
    assert cube.client("cpu", boundscheck=True).options["boundscheck"] is True


def test_numba_boundscheck_turns_checks_on(numba_boundscheck):
    """NUMBA_BOUNDSCHECK=1 (Numba's own variable) makes cube.client("cpu") a checked client: an
    out-of-bounds read fails the launch with IndexError."""
    numba_boundscheck("1")
    client = cube.client("cpu")
    assert client.options["boundscheck"] is True
    x = client.create(np.arange(8.0))
    out = client.empty(8, np.float64)
    client.launch(cube.kernel(_shifted), 1, 8, x, out)
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    assert isinstance(info.value.root, IndexError)


def test_numba_boundscheck_zero_alone_means_unchecked(numba_boundscheck, monkeypatch):
    """NUMBA_BOUNDSCHECK=0 with nothing else said is an opt-out, as in Numba: kernels compile
    unchecked, whether through a client (which takes it as its option) or not, and no
    CompileError is raised about a check nobody asked for."""
    monkeypatch.delenv("NUMBA_CUBE_BOUNDSCHECK", raising=False)
    numba_boundscheck("0")
    assert cpu_flags(cube.kernel(_axpy), {})[0] is False
    assert cube.client("cpu").options["boundscheck"] is False


def test_numba_boundscheck_zero_refuses_a_checked_client(numba_boundscheck):
    """NUMBA_BOUNDSCHECK=0 makes Numba compile without checks whatever it is told: a client that
    asks for them gets a CompileError saying so instead of silently unchecked code."""
    numba_boundscheck("0")
    client = cube.client("cpu", boundscheck=True)
    x = client.create(np.arange(8.0))
    out = client.empty(8, np.float64)
    client.launch(cube.kernel(_axpy), 1, 8, 1.0, x, x, out)
    with pytest.raises(LaunchFailure) as info:
        client.read(out)
    assert isinstance(info.value.root, CompileError)
    assert "NUMBA_BOUNDSCHECK" in str(info.value.root)


def test_global_changed_after_first_use_is_refused_for_a_new_signature(client):
    """A kernel is frozen at its first use: after a global it reads is rebound, the signatures
    already compiled keep running what they compiled (as numba.cuda's do), and a new signature
    fails with a CompileError naming the global instead of compiling new code under the old id."""
    import types as pytypes

    def scaled(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] * SCALE      # noqa: F821 - from the globals below

    g = {"cuda": cuda, "SCALE": 2.0}
    k = cube.kernel(pytypes.FunctionType(scaled.__code__, g, "scaled"))
    x = np.arange(8.0)
    hx, out = client.create(x), client.empty(8, np.float64)
    client.launch(k, 1, 8, hx, out)
    np.testing.assert_array_equal(client.read(out), x * 2.0)
    g["SCALE"] = 3.0
    client.launch(k, 1, 8, hx, out)
    np.testing.assert_array_equal(client.read(out), x * 2.0)
    hx32, out32 = client.create(x.astype(np.float32)), client.empty(8, np.float32)
    client.launch(k, 1, 8, hx32, out32)
    with pytest.raises(LaunchFailure) as info:
        client.read(out32)
    assert isinstance(info.value.root, CompileError)
    assert "global SCALE" in str(info.value.root)


def test_device_function_defined_after_the_kernel(client):
    """A kernel may call a device function bound after the kernel was made (numba.cuda resolves
    it at the first compile): the id is fixed at first use, and the launch gives NumPy's answer."""
    def make():
        @cube.kernel
        def calls_later(x, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = later(x[i])

        @cuda.jit(device=True)
        def later(v):
            return v + 0.5
        return calls_later

    x = np.arange(16.0)
    out = client.empty(16, np.float64)
    client.launch(make(), 1, 16, client.create(x), out)
    np.testing.assert_array_equal(client.read(out), x + 0.5)


def _divide(r, x, y):
    i = cuda.grid(1)
    if i < r.size:
        r[i] = y[i] / x[i]


@pytest.mark.parametrize("units", [4, 1 << 16])      # the serial and the parallel variant
def test_debug_kernels_use_pythons_error_model(units):
    """As numba-cuda compiles them: a ``debug=True`` kernel's division by zero raises
    ``ZeroDivisionError`` (a launch failure), a plain kernel's gives NumPy's ``inf``."""
    x, y = np.zeros(units), np.ones(units)
    r = np.zeros(units)
    with cube.client("cpu"):
        cube.kernel(_divide)[(units + 255) // 256, 256](r, x, y)
        with np.errstate(divide="ignore"):
            np.testing.assert_array_equal(r, y / x)
        with pytest.raises(cube.LaunchFailure) as info:
            cube.kernel(cuda.jit(debug=True, opt=False)(_divide))[(units + 255) // 256, 256](r, x, y)
    assert isinstance(info.value.root, ZeroDivisionError)
