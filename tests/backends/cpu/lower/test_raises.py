"""Exceptions of ``debug=True`` kernels on the CPU backend (``backends/cpu/lower/raises.py``) carry
numba-cuda's message: ``In function '<f>', file <abs path>, line <n>, tid=[z, y, x]
ctaid=[z, y, x]`` (``: <message>`` when there is one), for the unit that raised, with the
exception's own class; kernels without debug=True keep the message as written."""

from __future__ import annotations

import inspect
import os
import re

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube


class KernelError(Exception):
    """The exception the kernels below raise."""


def _line_of(fn, text):
    """The file line of the first source line of ``fn`` containing ``text``."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(k for k, line in enumerate(lines) if text in line)


def _raise_at(out, tx, bx):
    i = cuda.grid(1)
    if cuda.threadIdx.x == tx and cuda.blockIdx.x == bx:
        raise KernelError("bad unit")
    out[i] = i


def _raise_bare(out):
    if cuda.threadIdx.x == 1:
        raise KernelError
    out[0] = 1


def _check(x):
    if x > 2:
        raise KernelError("from the device function")


check = cuda.jit(device=True)(_check)


def _calls_device_kernel(out):
    check(cuda.threadIdx.x)
    out[cuda.threadIdx.x] = 1


def _debug(fn):
    return cube.kernel(cuda.jit(debug=True, opt=False)(fn))


def _failure(kernel, count, dim, *args):
    """The message of the kernel's own exception (the root of the LaunchFailure raised)."""
    with pytest.raises(KernelError) as info, cube.client("cpu"):
        kernel[count, dim](*args)
    assert type(info.value.root) is KernelError
    return str(info.value.root)


def test_message_names_the_unit_and_the_raise():
    """The unit (thread 3 of block 1) is listed z, y, x, after the function, file and line of
    the raise; the exception is the kernel's own class."""
    message = _failure(_debug(_raise_at), 2, 4, np.zeros(8), 3, 1)
    where = (f"In function '_raise_at', file {os.path.abspath(__file__)}, "
             f"line {_line_of(_raise_at, 'raise KernelError')}, ")
    assert message == where + "tid=[0, 0, 3] ctaid=[0, 0, 1]: bad unit"


def test_parallel_variant_reports_the_same_unit():
    """A grid large enough for the parallel variant (64 cubes of 1024 units) reports the unit
    too: the failed chunk is re-run serially and raises the same message."""
    message = _failure(_debug(_raise_at), 64, 1024, np.zeros(64 * 1024), 1000, 37)
    assert message.endswith("tid=[0, 0, 1000] ctaid=[0, 0, 37]: bad unit")


def _raise_after_barrier(out, tx, ty):
    s = cuda.shared.array((4, 2), np.float64)
    s[cuda.threadIdx.x, cuda.threadIdx.y] = 1.0
    cuda.syncthreads()
    if cuda.threadIdx.x == tx and cuda.threadIdx.y == ty and cuda.blockIdx.y == 1:
        raise KernelError("after the barrier")
    out[0] = s[0, 0]


def test_kernel_with_barriers_reports_the_unit():
    """In a kernel with a barrier (the cube-by-cube shape) a 2-D unit of a 2-D grid is listed
    z, y, x too."""
    message = _failure(_debug(_raise_after_barrier), (1, 2), (4, 2), np.zeros(1), 2, 1)
    assert message.endswith("tid=[0, 1, 2] ctaid=[0, 1, 0]: after the barrier")


def test_bare_raise_gets_the_prefix_alone():
    """``raise KernelError`` without arguments: the message is the prefix only."""
    message = _failure(_debug(_raise_bare), 1, 2, np.zeros(1))
    assert message.endswith("tid=[0, 0, 1] ctaid=[0, 0, 0]")
    assert message.startswith("In function '_raise_bare'")


def test_raise_in_a_device_function_names_the_device_function():
    """A raise inside a device function reports that function and the calling unit."""
    message = _failure(_debug(_calls_device_kernel), 1, 4, np.zeros(4))
    assert re.fullmatch(r"In function '_check', file .*, line \d+, "
                        r"tid=\[0, 0, 3\] ctaid=\[0, 0, 0\]: from the device function", message)


def test_kernels_without_debug_keep_their_message():
    """Without debug=True (numba-cuda reports nothing there) the message is the one written."""
    message = _failure(cube.kernel(_raise_at), 2, 4, np.zeros(8), 3, 1)
    assert message == "bad unit"
