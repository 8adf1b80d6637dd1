"""The device-count rewrite (``dynamic.py``): the wrapper kernel computes what the kernel computes
with that grid, for any bounded launch grid, and refuses what it cannot follow.

The wrapper is plain numba.cuda dialect, so it runs here on numba-cuda's simulator with a small
bounded grid (fewer launched cubes than virtual ones: each launched cube walks several).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba_cuda")
pytest.importorskip("numba_cube_cudasim", reason="the simulator backend is the cudasim plugin's")

from numba import cuda  # noqa: E402

from numba_cube.backends.cuda.launch.dynamic import Ineligible, device_count_kernel  # noqa: E402
from numba_cube_cudasim.isolation import isolated  # noqa: E402


def fill(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = i + 1.0


def stride(out):
    i = cuda.grid(1)
    s = cuda.gridsize(1)
    while i < out.size:
        out[i] += 1.0
        i += s


def two_d(out):
    x, y = cuda.grid(2)
    if x < out.shape[0] and y < out.shape[1]:
        out[x, y] = cuda.blockIdx.x * 100 + cuda.gridDim.y


def early_return(out):
    i = cuda.grid(1)
    if i >= out.size:
        return
    out[i] = 5.0


def shared_sum(x, out):
    buf = cuda.shared.array(32, np.float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    if t == 0:
        acc = 0.0
        for k in range(32):
            acc += buf[k]
        out[cuda.blockIdx.x] = acc


def aliased(out):
    b = cuda.blockIdx
    out[0] = b.x


NDIM = 1


def non_literal(out):
    out[cuda.grid(NDIM)] = 1.0


def run(kernel, bound, dim, count, *arrays):
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    wrapper = device_count_kernel(kernel)
    fake = FakeCUDAKernel(isolated(wrapper, {}), device=False)
    fake[bound, dim](FakeCUDAArray(np.array(count, np.uint32)), *[FakeCUDAArray(a) for a in arrays])


def test_plain_index():
    """cuda.grid(1) is the virtual cube's global index."""
    out = np.zeros(100)
    run(fill, 2, 32, (4, 1, 1), out)
    np.testing.assert_array_equal(out, np.arange(1, 101.0))


def test_gridsize_is_the_dynamic_count():
    """A grid-stride loop over gridsize covers each element exactly once."""
    out = np.zeros(100)
    run(stride, 3, 16, (2, 1, 1), out)
    np.testing.assert_array_equal(out, np.ones(100))


def test_two_dimensional_count():
    """blockIdx.x/y and gridDim.y of a 2-D count."""
    out = np.zeros((8, 6))
    run(two_d, 2, (4, 3), (2, 2, 1), out)
    expect = np.zeros((8, 6))
    expect[:4] = 2.0
    expect[4:] = 102.0
    np.testing.assert_array_equal(out, expect)


def test_early_return_ends_only_that_cube():
    """A return in the kernel ends the virtual cube, not the launched cube's loop."""
    out = np.zeros(70)
    run(early_return, 1, 32, (3, 1, 1), out)
    np.testing.assert_array_equal(out, np.full(70, 5.0))


def test_shared_memory_per_virtual_cube():
    """Shared memory and barriers work per virtual cube (a barrier separates iterations)."""
    x = np.arange(128.0)
    out = np.zeros(4)
    run(shared_sum, 3, 32, (4, 1, 1), x, out)
    np.testing.assert_array_equal(out, x.reshape(4, 32).sum(axis=1))


def test_zero_count_runs_nothing():
    """A zero in any dimension runs no virtual cube."""
    out = np.full(8, -1.0)
    run(fill, 2, 8, (0, 1, 1), out)
    np.testing.assert_array_equal(out, np.full(8, -1.0))


@pytest.mark.parametrize("kernel", [aliased, non_literal], ids=["alias", "non-literal"])
def test_what_the_rewrite_cannot_follow_is_ineligible(kernel):
    """Aliases of the geometry and non-literal grid(n) are refused (the launch then reads the
    count back instead)."""
    with pytest.raises(Ineligible):
        device_count_kernel(kernel)


def test_closures_are_ineligible():
    """A closure's free variables cannot be rebound in generated code: refused."""
    k = 3

    def closure(out):
        out[cuda.grid(1)] = k

    with pytest.raises(Ineligible, match="closure"):
        device_count_kernel(closure)


@cuda.jit(device=True)
def _block_of_unit():
    return cuda.blockIdx.x


@cuda.jit(device=True)
def _twice(v):
    return 2.0 * v


class _Lib:
    block_of_unit = _block_of_unit


lib = _Lib()


def calls_geometry_helper(out):
    out[cuda.grid(1)] = _block_of_unit()


def calls_geometry_helper_by_attribute(out):
    out[cuda.grid(1)] = lib.block_of_unit()


def calls_plain_helper(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _twice(1.5)


@pytest.mark.parametrize("kernel", [calls_geometry_helper, calls_geometry_helper_by_attribute],
                         ids=["by-name", "by-attribute"])
def test_device_functions_using_the_geometry_are_ineligible(kernel):
    """A device function reached from the kernel that reads blockIdx/gridDim would see the
    launched grid, not the virtual one: refused, whether called by name or through an attribute."""
    with pytest.raises(Ineligible, match="device function"):
        device_count_kernel(kernel)


def test_device_functions_without_geometry_are_fine():
    """Other device functions are called as they are."""
    out = np.zeros(40)
    run(calls_plain_helper, 1, 16, (3, 1, 1), out)
    np.testing.assert_array_equal(out, np.full(40, 3.0))
