"""``@cuda.reduce`` under the layer (``numba_cube/dropin/reduction.py``): numba-cuda's reduction
API, computing in numba-cuda's order.

Reference: the order of numba-cuda's kernels (``numba/cuda/kernels/reduction.py``) re-derived
with NumPy array operations, block by block and warp by warp (``numpy_order`` below: vectorised
over blocks and lanes, where the layer loops), in float32 arithmetic. numba-cuda's simulator is
no reference here: its ``reduce`` is a sequential ``functools.reduce``, and it has no
``syncwarp`` to run the real kernels. float32 sums must be bit-identical at sizes around every
boundary of the algorithm (a warp, a block of 128, the 64 full blocks after which blocks
stride), with ``init`` and ``size``; and at least one must differ from a sequential sum, so that
the order is what is being tested. (On a GPU, ``tests/cuda/cases/test_cuda_reduce_order.py``
sets the layer's against numba-cuda's own kernels.) Then the API: ``res=`` (a device array,
written, nothing returned), an empty array (``init``), a 2-D array (numba's TypeError), a device
array a kernel is still writing.
"""

from __future__ import annotations

import numpy as np
import pytest

# (size, init, size= argument): a warp, a block, partial and full blocks, and more than 64 full
# blocks (the last ones stride)
CASES = [(1, 0, None), (31, 0, None), (32, 0, None), (33, 0, None), (127, 0, None),
         (128, 0, None), (129, 0, None), (1000, 2.5, None), (5000, 0, 4321),
         (64 * 128 + 77, 0, None), (64 * 128 * 2 + 300, -1.0, None), (64 * 128 * 3, 0, None)]

f32 = np.float32


def _partial_block(values, init):
    """device_reduce_partial_block of one block of ``values.size`` (< 128) units."""
    size, firsts = values.size, []
    for w in range((size + 31) // 32):
        row = values[w * 32:(w + 1) * 32].astype(f32)
        if (w + 1) * 32 < size:                     # a full warp: the lane tree
            width = 16
            while width:
                row[:width] = row[:width] + row[width:2 * width]
                width //= 2
            firsts.append(row[0])
        else:                                       # lane 0, in sequence
            first = row[0]
            for v in row[1:size - w * 32]:
                first = f32(first + v)
            firsts.append(first)
    result = firsts[0]
    for f in firsts[1:]:
        result = f32(result + f)
    return result if init is None else f32(result + init)


def numpy_order(data, init):
    """The float32 sum numba-cuda's kernels compute, re-derived with NumPy."""
    n, block = data.size, 128
    size_full = n // block * block
    blocks = min(size_full // block, 64)
    partials = []
    if size_full:
        step = block * blocks
        tmp = data[:step].astype(f32)                # each unit's strided fold
        for start in range(step, size_full, step):
            seg = data[start:min(start + step, size_full)]
            tmp[:seg.size] = tmp[:seg.size] + seg
        lanes = tmp.reshape(blocks, 4, 32)
        width = 16
        while width:                                 # every warp's tree at once
            lanes[:, :, :width] = lanes[:, :, :width] + lanes[:, :, width:2 * width]
            width //= 2
        per_block = (lanes[:, 0, 0] + lanes[:, 2, 0]) + (lanes[:, 1, 0] + lanes[:, 3, 0])
        per_block[0] = f32(per_block[0] + init)
        partials = list(per_block)
    if n - size_full:
        partials.append(_partial_block(data[size_full:], None if blocks else init))
    if len(partials) > 1:
        return _partial_block(np.array(partials, f32), None)
    return partials[0]


def test_float32_sums_are_bit_identical_to_numba_cudas_order(layer):
    """Each case's float32 sum is the re-derived order's, bit for bit; a sequential float32 sum
    differs in at least one case (the order of the additions is what this checks)."""

    @layer.reduce
    def add(a, b):
        return a + b

    differs_from_sequential = 0
    for n, init, size in CASES:
        data = np.random.default_rng(n).standard_normal(n).astype(f32)
        expected = numpy_order(data[:size], f32(init))
        got = add(data, size=size, init=f32(init))
        assert isinstance(got, f32)
        assert got.tobytes() == f32(expected).tobytes(), (n, init, size, got, expected)
        sequential = f32(init)
        for v in data[:size]:
            sequential = f32(sequential + v)
        differs_from_sequential += sequential != expected
    assert differs_from_sequential > 0


def test_res_empty_arrays_2d_arrays_and_a_pending_write(layer):
    """``res=`` receives the result in its first element and nothing is returned; an empty
    array gives ``init``; a 2-D array is numba's TypeError; a device array a kernel is still
    writing is reduced after the write."""

    @layer.reduce
    def biggest(a, b):
        return max(a, b)

    @layer.jit
    def fill(out, v):
        i = layer.grid(1)
        if i < out.size:
            out[i] = v * (i % 7)

    d = layer.device_array(3000, np.int64)
    fill[12, 256](d, 5)
    res = layer.device_array(2, np.int64)
    assert biggest(d, res=res) is None
    assert res.copy_to_host()[0] == 30
    assert biggest(np.zeros(0, np.int64), init=-4) == -4
    with pytest.raises(TypeError, match="only support 1D array"):
        biggest(np.zeros((3, 3)))
