"""Kernels the ``numba_cube.dask`` tests run, defined as a notebook defines them.

Each is compiled from text with a pseudo file name registered in ``linecache`` and a ``__main__``
namespace, so it has no importable module: workers in other processes get it only by value,
with the source ``numba_cube.dask.kernels`` sends along.
"""

from __future__ import annotations

import itertools
import linecache

import numba_cube as cube

SOURCE = '''
from numba import cuda

def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]

def square(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * x[i]

def fail_on_negative(x, out):
    i = cuda.grid(1)
    if i < out.size:
        if x[i] < 0.0:
            raise ValueError("negative input")
        out[i] = x[i]

def wild_read(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i + 10 ** 9] if i == out.size - 1 else x[i]

def wild_write(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]
        if x[i] < 0.0:
            # 2**61 bytes past the buffer: not a canonical address, the process segfaults
            out[i + 288230376151711744] = 1.0

def slow_sum_of_powers(x, out):
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        v = x[i]
        for k in range(2000):
            acc += (v * 0.999) ** 2 / (k + 1.0)
        out[i] = acc
'''

_cells = itertools.count(1)


def notebook_kernels() -> dict[str, cube.Kernel]:
    """The kernels of ``SOURCE``, as from a fresh notebook cell (``<notebook-cell-N>``)."""
    filename = f"<notebook-cell-{next(_cells)}>"
    linecache.cache[filename] = (len(SOURCE), None, SOURCE.splitlines(True), filename)
    namespace = {"__name__": "__main__"}
    exec(compile(SOURCE, filename, "exec"), namespace)
    return {name: cube.kernel(namespace[name])
            for name in ("axpy", "square", "fail_on_negative", "slow_sum_of_powers",
                         "wild_read", "wild_write")}
