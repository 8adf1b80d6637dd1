"""A ``debug=True`` kernel's exceptions on a GPU (``backends/cuda/kernels/exceptions.py``): the
exception a unit raised is the launch's failure, with numba-cuda's class and message, recorded on
the write set; launches whose units raise nothing run as usual, and the device keeps working.

numba-cuda's error flag exists only in real compiled code, so these run on a GPU only (the
simulator raises kernel exceptions itself; the CPU backend's are tested in tests/backends/cpu).
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
from numba_cube import LaunchFailure

from _cuda_setup import only


def _checked_div(out, x, d):
    i = cuda.grid(1)
    if i < out.size:
        if x[i] < 0:
            raise ValueError("negative input")
        out[i] = x[i] // d


checked_div = cube.kernel(cuda.jit(debug=True, opt=False)(_checked_div))


@only("gpu")
def test_raise_in_a_debug_kernel_fails_the_write_set_with_the_kernels_exception(client):
    """A unit that raises makes the launch fail with that exception class and numba-cuda's
    message (``tid=[..] ctaid=[..]: negative input``); an unrelated buffer stays readable."""
    x = client.create(np.array([4, 8, -1, 2], dtype=np.int64))
    out = client.create(np.zeros(4, dtype=np.int64))
    bystander = client.create(np.arange(3.0))
    client.launch(checked_div, 1, 4, out, x, 2)
    with pytest.raises(ValueError, match=r"tid=\[0, 0, 2\] ctaid=\[0, 0, 0\]: negative input") as info:
        client.read(out)
    assert isinstance(info.value, LaunchFailure)
    np.testing.assert_array_equal(client.read(bystander), np.arange(3.0))


@only("gpu")
def test_a_debug_kernel_that_raises_nothing_computes_and_relaunch_repairs(client):
    """Without a raising unit the debug kernel's results are the plain ones (NumPy reference),
    also right after a failed launch of the same kernel: the flag is cleared before each
    launch, so a repaired buffer does not inherit the earlier exception."""
    out = client.create(np.zeros(4, dtype=np.int64))
    client.launch(checked_div, 1, 4, out, client.create(np.array([1, -1, 1, 1])), 1)
    with pytest.raises(LaunchFailure):
        client.read(out)
    data = np.array([4, 9, 6, 2], dtype=np.int64)
    client.launch(checked_div, 1, 4, out, client.create(data), 3)
    np.testing.assert_array_equal(client.read(out), data // 3)


@only("gpu")
def test_numba_style_launch_of_a_debug_kernel_raises_at_once(client):
    """``kernel[grid, block](host arrays)`` raises the kernel's exception from the launch, as
    numba.cuda does."""
    out = np.zeros(2, dtype=np.int64)
    cube.use(client)
    try:
        with pytest.raises(ValueError, match="negative input"):
            checked_div[1, 2](out, np.array([-5, 1], dtype=np.int64), 1)
    finally:
        cube.use(None)
