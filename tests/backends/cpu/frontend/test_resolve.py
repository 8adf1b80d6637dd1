"""Global references of a kernel become faithful module-level values in the generated code.

Regression tests of what was seen: a module-level ndarray of more than one element (and
``cuda.const.array_like`` of one) crashed the translator with NumPy's "truth value of an array is
ambiguous", because the array reached a comparison with ``==`` before its own branch.
"""

import numpy as np
from numba import cuda

import numba_cube as cube

TABLE = np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5
WEIGHTS = np.array([1.5, -2.0, 0.25])
FLAGS = np.array([True, False, True])


@cube.kernel
def table_lookup(out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = TABLE[i, j] * 2


@cube.kernel
def const_memory(out):
    i = cuda.grid(1)
    w = cuda.const.array_like(WEIGHTS)
    f = cuda.const.array_like(FLAGS)
    if i < out.size:
        out[i] = w[i] if f[i] else -w[i]


def test_global_2d_array_is_read_with_its_values_and_dtype():
    """A global 2-D float32 array is frozen with its contents, shape and dtype."""
    out = np.zeros((3, 4), np.float32)
    with cube.client("cpu"):
        table_lookup[(1, 1), (4, 4)](out)
    np.testing.assert_array_equal(out, TABLE * np.float32(2))


def test_const_array_like_of_global_arrays():
    """``cuda.const.array_like(global)`` reads the global's values (float and bool arrays)."""
    out = np.zeros(3)
    with cube.client("cpu"):
        const_memory[1, 32](out)
    np.testing.assert_array_equal(out, np.where(FLAGS, WEIGHTS, -WEIGHTS))
