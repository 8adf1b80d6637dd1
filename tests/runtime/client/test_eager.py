"""The numba-style launch ``kernel[count, dim](*numpy_arrays)`` (API.md "Kernels")."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube


def _plain_axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


existing = cuda.jit(_plain_axpy)          # an existing numba.cuda dispatcher
axpy = cube.kernel(existing)


@cube.kernel
def gather(idx, src, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = src[idx[i]]


def test_existing_cuda_jit_dispatcher_is_accepted():
    """cube.kernel(cuda.jit(f)) takes the dispatcher's Python function: same id as cube.kernel(f)."""
    assert axpy.py_func is _plain_axpy
    assert axpy.id == cube.kernel(_plain_axpy).id
    assert axpy.params == ("a", "x", "y", "out")


def test_host_arrays_copied_in_and_written_arrays_back():
    """Host arrays are copied in, the launch runs, and the arrays the kernel writes are copied
    back into the caller's arrays; inputs are left alone."""
    rng = np.random.default_rng()
    x, y = rng.standard_normal(1000), rng.standard_normal(1000)
    x0, y0 = x.copy(), y.copy()
    out = np.zeros(1000)
    with cube.client("cpu"):
        axpy[4, 256](3.0, x, y, out)
    np.testing.assert_allclose(out, 3.0 * x0 + y0)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(y, y0)


def test_use_sets_the_process_default_client():
    """cube.use(client) makes kernel[...] launch on that client."""
    cube.use(cube.client("cpu:3"))
    try:
        out = np.zeros(64)
        axpy[1, 64](1.0, np.ones(64), np.ones(64), out)
        np.testing.assert_array_equal(out, np.full(64, 2.0))
        assert cube.client("cpu:3").server.stats["launched"] >= 1
    finally:
        cube.use(None)


def test_failure_raises_at_the_call():
    """A failing eager launch raises LaunchFailure right there (the copy-back is the read), and
    the caller's output array is left as it was."""
    checked = cube.client("cpu", boundscheck=True)
    out = np.full(4, -1.0)
    with checked, pytest.raises(cube.LaunchFailure) as info:
        gather[1, 32](np.array([0, 1, 2, 99]), np.arange(8.0), out)
    assert isinstance(info.value.root, IndexError)
    np.testing.assert_array_equal(out, np.full(4, -1.0))


def test_handles_can_be_mixed_in():
    """Handles pass through a numba-style launch untouched (no copy back into them is needed)."""
    client = cube.client("cpu")
    x = client.create(np.arange(32.0))
    out = np.zeros(32)
    with client:
        axpy[1, 32](2.0, x, np.ones(32), out)
    np.testing.assert_array_equal(out, 2.0 * np.arange(32.0) + 1.0)


@cube.kernel
def _set_first_to_three(a):
    a[0] = 3


@pytest.mark.parametrize("hint, copied_back", [("In", False), ("Out", True), ("InOut", True)])
def test_numba_argument_hints_keep_their_meaning(hint, copied_back):
    """``cuda.In(a)`` is copied in only (the kernel's write stays on the device, as with
    numba.cuda); ``cuda.Out(a)`` and ``cuda.InOut(a)`` are copied back."""
    a = np.zeros(2, np.int64)
    with cube.client("cpu"):
        _set_first_to_three[1, 1](getattr(cuda, hint)(a))
    np.testing.assert_array_equal(a, [3 if copied_back else 0, 0])


@cube.kernel
def _dynamic_size_into_first(a):
    dyn = cuda.shared.array(0, np.uint8)
    a[0] = dyn.size


def test_dynamic_shared_memory_size_reaches_the_kernel_not_ignored():
    """``kernel[count, dim, stream, nbytes]`` sizes the kernel's dynamic shared memory: the
    kernel sees ``nbytes`` (0, or no fourth value, gives an empty array); a negative size is a
    LaunchArgumentError at the call, never a launch that runs without it."""
    out = np.full(4, -1.0)
    with cube.client("cpu"):
        _dynamic_size_into_first[1, 1, 0, 64](out)
        assert out[0] == 64
        _dynamic_size_into_first[1, 1, 0, 0](out)
        assert out[0] == 0
        _dynamic_size_into_first[1, 1, 0, 24](out)
        with pytest.raises(cube.LaunchArgumentError, match="dynamic shared memory"):
            _dynamic_size_into_first[1, 1, 0, -64](out)
    assert out[0] == 24


class _DoubleScalars:
    """A numba-cuda extension: doubles every float argument before the launch, and records
    that its after-launch callback ran."""

    def __init__(self):
        self.called_back = []

    def prepare_args(self, ty, val, stream=None, retr=None):
        if isinstance(val, float):
            retr.append(lambda: self.called_back.append(val))
            return ty, 2.0 * val
        return ty, val


def _axpy_into(out, a, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i]


def test_extensions_convert_arguments_of_numba_style_launches():
    """A kernel's numba-cuda extensions run on each argument of ``kernel[grid, block](...)``, in
    numba-cuda's order, and their write-back callbacks run after the launch; the result is
    NumPy's for the converted value."""
    ext = _DoubleScalars()
    k = cube.kernel(_axpy_into, extensions=[ext])
    x = np.arange(8.0)
    out = np.zeros(8)
    k[1, 8](out, 1.5, x)
    np.testing.assert_array_equal(out, 3.0 * x)
    assert ext.called_back == [1.5]


def test_extensions_cannot_be_skipped_by_client_launch():
    """client.launch takes device buffers, which extensions are not written for: a kernel with
    extensions is refused there (LaunchArgumentError) rather than run without them."""
    c = cube.client("cpu:3")
    k = cube.kernel(_axpy_into, extensions=[_DoubleScalars()])
    out, x = c.empty(8), c.create(np.arange(8.0))
    with pytest.raises(cube.LaunchArgumentError, match="extensions"):
        c.launch(k, 1, 8, out, 1.5, x)
