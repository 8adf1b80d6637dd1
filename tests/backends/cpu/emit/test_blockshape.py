"""A cube kernel's module specialized for its block shape (``emit/block_shape.py``, chosen by
``CpuBackend``).

Pinned here: launched through a client with one shape after another (1-D, 2-D, 3-D; the first
gets a module of its own, the rest share the general one), a warp-shuffle reduction and a
shared-memory tree give NumPy's answer bit for bit, in the serial and the parallel variant; the
first shape's program is specialized, later shapes share one general program, and a flat kernel
keeps one module whatever the shape; a specialized module called with another shape raises
``ValueError`` instead of running that shape's cubes with this one's loops; only the launcher
functions are rebound (not device functions), and the entry points check first."""

import numpy as np
import pytest
from numba import cuda, types

import numba_cube as cube
from numba_cube.backends.cpu.emit.block_shape import SPECIALIZED_HEADER, for_block
from numba_cube.backends.cpu.server import CpuBackend
from numba_cube.backends.cpu.translate import build_program, translate

from kernels_cases import TPB, block_sum as tree_sums

FULL = 0xFFFFFFFF


@cuda.jit(device=True)
def linear_tid():
    return cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y
                                                 + cuda.blockDim.y * cuda.threadIdx.z)


@cuda.jit
def warp_sums(x, out):
    """Each warp's sum by shfl_down, written by its lane 0 (warps by linear thread id)."""
    tid = linear_tid()
    nt = cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z
    g = cuda.blockIdx.x * nt + tid
    v = x[g] if g < x.size else 0.0
    for off in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(FULL, v, off)
    if cuda.laneid == 0 and g < x.size:
        out[g // 32] = v


@cuda.jit
def scaled(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2.0 * x[i]


def warp_tree(x):
    """shfl_down's order: lane l adds lane l + off, for off = 16, 8, 4, 2, 1."""
    v = x.reshape(-1, 32).copy()
    for off in (16, 8, 4, 2, 1):
        v[:, :off] += v[:, off:2 * off]
    return v[:, 0]


def block_tree(x, nt):
    v = x.reshape(-1, nt).copy()
    s = nt // 2
    while s > 0:
        v[:, :s] += v[:, s:2 * s]
        s //= 2
    return v[:, 0]


SHAPES = [(64, 1, 1), (32, 1, 1), (32, 2, 1), (8, 4, 2), (128, 1, 1)]


@pytest.mark.parametrize("cubes", [3, 300])        # 300 cubes run the parallel variant
def test_warp_reduction_for_every_shape_in_turn(cubes, rng):
    """One client, one shape after another: each launch gives shfl_down's sums bit for bit."""
    client = cube.client("cpu")
    kernel = cube.kernel(warp_sums)
    for shape in SHAPES + SHAPES[:1]:
        nt = shape[0] * shape[1] * shape[2]
        x = rng.standard_normal(cubes * nt)
        out = client.empty(x.size // 32, np.float64)
        client.launch(kernel, cubes, shape, client.create(x), out)
        np.testing.assert_array_equal(client.read(out), warp_tree(x), err_msg=str(shape))


@pytest.mark.parametrize("cubes", [2, 400])
def test_shared_tree_for_every_shape_in_turn(cubes, rng):
    """A shared-memory tree whose rounds depend on blockDim.x, one shape after another."""
    client = cube.client("cpu")
    kernel = cube.kernel(tree_sums)
    for nt in (TPB, TPB // 2, 16, TPB):
        x = rng.standard_normal(cubes * nt)
        out = client.empty(cubes, np.float64)
        client.launch(kernel, cubes, nt, client.create(x), out)
        np.testing.assert_array_equal(client.read(out), block_tree(x, nt), err_msg=str(nt))


def _compile(backend, kernel, block, argtypes):
    return backend.compile(kernel, argtypes, ("serial", block), {})


def test_first_shape_specialized_later_shapes_share_the_general_module():
    """The first shape a kernel is compiled for gets its own module; every later shape the
    same general program (two Numba compiles per signature, not one per shape)."""
    backend = CpuBackend()
    kernel = cube.kernel(warp_sums)
    argtypes = (types.float64[::1], types.float64[::1])
    first = _compile(backend, kernel, (64, 1, 1), argtypes).program
    second = _compile(backend, kernel, (32, 2, 1), argtypes).program
    third = _compile(backend, kernel, (128, 1, 1), argtypes).program
    again = _compile(backend, kernel, (64, 1, 1), argtypes).program
    assert f"{SPECIALIZED_HEADER} (64, 1, 1)" in first.source
    assert SPECIALIZED_HEADER not in second.source
    assert third is second and again is first


def test_flat_kernel_keeps_one_module():
    """A kernel without barriers or shared memory is not specialized: one module for all."""
    general = build_program(scaled.py_func)
    shaped = build_program(scaled.py_func, block=(64, 1, 1))
    assert shaped.module_name == general.module_name
    assert SPECIALIZED_HEADER not in shaped.source


def test_specialized_module_refuses_another_shape(rng):
    """Called with the shape it was made for it runs; with another it raises ValueError, in
    both variants and in the parallel variant's status entry (the runtime's, for a kernel that
    can raise), before writing anything."""
    prog = build_program(tree_sums.py_func, block=(64, 1, 1))
    x = rng.standard_normal(128)
    out = np.zeros(2)
    prog.serial(2, 1, 1, 64, 1, 1, x, out)
    np.testing.assert_array_equal(out, block_tree(x, 64))
    checked = build_program(tree_sums.py_func, boundscheck=True, block=(64, 1, 1))
    assert checked.parallel_status is not None      # a kernel that can raise: the runtime's entry
    for variant in (prog.serial, prog.parallel, checked.parallel_status):
        out = np.full(4, -1.0)
        with pytest.raises(ValueError, match=r"block shape \(64, 1, 1\)"):
            variant(4, 1, 1, 32, 1, 1, x, out)
        assert (out == -1.0).all()


def test_only_launchers_are_rebound_and_entries_check_first():
    """The launcher functions (chunk, body, guard, par_status, par, ser) rebind the shape; the
    device function that reads blockDim does not; the three entry points check before
    rebinding."""
    found = translate(warp_sums.py_func)
    text = for_block(found.source, found.kernel_name, (32, 2, 1))
    lines = text.split("\n")
    def enclosing(k):
        return next(lines[j] for j in range(k, -1, -1) if lines[j].startswith("def "))

    rebound = {enclosing(k).split("(")[0] for k, line in enumerate(lines)
               if line == "    __bdx = 32"}
    name = found.kernel_name
    assert rebound == {f"def {name}__{part}"
                       for part in ("chunk", "guard", "par_status", "par", "ser")}
    for entry in ("par_status", "par", "ser"):
        at = lines.index(next(l for l in lines if l.startswith(f"def {found.kernel_name}__{entry}(")))
        assert lines[at + 1].startswith("    if __bdx != 32 or __bdy != 2 or __bdz != 1:")
        assert lines[at + 3:at + 6] == ["    __bdx = 32", "    __bdy = 2", "    __bdz = 1"]
    devices = [l for l in lines if l.startswith("def linear_tid__dev")]
    assert devices
    at = lines.index(devices[0])
    assert "__bdx = 32" not in lines[at + 1]
