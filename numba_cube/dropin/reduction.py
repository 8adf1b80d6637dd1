"""``@cuda.reduce`` under the layer: numba-cuda's reduction, in numba-cuda's order, on the host.

numba-cuda's ``Reduce`` (``numba/cuda/kernels/reduction.py``) launches a kernel whose partial
blocks reduce a warp's slots with lane 0 alone, reading slots the other lanes wrote before a
barrier, inside a loop whose length depends on the warp: the CPU translator cannot prove that no
lane exchanges values there without a barrier, and refuses the kernel. So the layer serves
``cuda.reduce`` itself, with the same API (``reduce(fn)(arr, size=None, res=None, init=0,
stream=0)``), computing exactly what numba-cuda's kernels compute: the same blocks of 128 units
(at most 64 of them, striding over the rest), the same warp trees, the same sequential pass over
a partially filled warp, the same combination of warps and blocks and the same place for
``init``, each step stored in the array's dtype as the kernels' shared and partial arrays store
it. A floating-point sum therefore rounds as on a GPU, not as a sequential loop would.

It runs on the host as ``njit`` code (the reduction is one pass over the data; its tree steps are
a few hundred operations), after the pending writes of a device array are done (``copy_to_host``
waits for them), and writes ``res`` through the device array's own copy.
"""

from __future__ import annotations

import numpy as np

from .devicearray import DeviceNDArray

__all__ = ["Reduce", "reduce"]

_WARPSIZE = 32
_NUMWARPS = 4
_BLOCK = _WARPSIZE * _NUMWARPS
_MAX_FULL_BLOCKS = _WARPSIZE * 2

_DRIVERS: dict = {}


def _drivers():
    """The njit functions of numba-cuda's algorithm (made once: importing this module loads no
    Numba)."""
    if _DRIVERS:
        return _DRIVERS["full"], _DRIVERS["partial"]
    from numba import njit

    @njit
    def warp_tree(sm, w, op):
        # inner_warp_reduction after every lane stored its value: lanes below ``width`` combine
        # their slot with the one ``width`` above (never a slot another lane writes this step)
        width = _WARPSIZE // 2
        while width:
            for lane in range(width):
                old = sm[w, lane]
                sm[w, lane] = op(old, sm[w, lane + width])
            width //= 2

    @njit
    def full(arr, partials, blocks, init, use_init, op):
        # device_reduce_full_block for each of ``blocks`` blocks of 128 units
        sm = np.empty((_NUMWARPS, _WARPSIZE + 1), arr.dtype)
        step = _BLOCK * blocks
        stop = arr.size
        for blk in range(blocks):
            for tid in range(_BLOCK):
                start = tid + _BLOCK * blk
                tmp = arr[start]
                for i in range(start + step, stop, step):
                    tmp = op(tmp, arr[i])
                sm[tid // _WARPSIZE, tid % _WARPSIZE] = tmp
            for w in range(_NUMWARPS):
                warp_tree(sm, w, op)
            for tid in range(2):
                sm[tid, 0] = op(sm[tid, 0], sm[tid + 2, 0])
            partials[blk] = op(sm[0, 0], sm[1, 0])
        if use_init:
            partials[0] = op(partials[0], init)

    @njit
    def partial(arr, partials, at, init, use_init, op):
        # device_reduce_partial_block: one block of arr.size (< 128) units; arr may be partials
        size = arr.size
        sm = np.empty((_NUMWARPS, _WARPSIZE + 1), arr.dtype)
        for tid in range(size):
            sm[tid // _WARPSIZE, tid % _WARPSIZE] = arr[tid]
        warps = (size + _WARPSIZE - 1) // _WARPSIZE
        for w in range(warps):
            if (w + 1) * _WARPSIZE < size:
                warp_tree(sm, w, op)
            else:                            # lane 0 alone, in sequence
                base = w * _WARPSIZE
                for i in range(1, size - base):
                    sm[w, 0] = op(sm[w, 0], sm[w, i])
        result = sm[0, 0]
        for i in range(1, warps):
            result = op(result, sm[i, 0])
        partials[at] = result
        if use_init:
            partials[0] = op(partials[0], init)

    _DRIVERS.update(full=full, partial=partial)
    return full, partial


class Reduce:
    """numba.cuda's ``Reduce``: ``Reduce(fn)(arr, size=None, res=None, init=0, stream=0)``."""

    _compiled: dict = {}

    def __init__(self, functor):
        self._functor = functor

    def _op(self):
        from numba import njit

        op = self._compiled.get(self._functor)
        if op is None:
            op = self._compiled[self._functor] = njit(self._functor)
        return op

    def __call__(self, arr, size=None, res=None, init=0, stream=0):
        if arr.ndim != 1:
            raise TypeError("only support 1D array")
        if size is not None:
            arr = arr[:size]
        init = arr.dtype.type(init)
        if arr.size < 1:
            return init
        host = (arr.copy_to_host(stream=stream) if isinstance(arr, DeviceNDArray)
                else np.ascontiguousarray(arr))
        full, partial = _drivers()
        op = self._op()
        n = host.size
        size_full = (n // _BLOCK) * _BLOCK
        size_partial = n - size_full
        full_blocks = min(size_full // _BLOCK, _MAX_FULL_BLOCKS)
        partials = np.empty(full_blocks + (1 if size_partial else 0), host.dtype)
        if size_full:
            full(host[:size_full], partials, full_blocks, init, True, op)
        if size_partial:
            partial(host[size_full:], partials, full_blocks, init, not full_blocks, op)
        if partials.size > 1:
            partial(partials, partials, 0, init, False, op)
        if res is not None:
            res[:1].copy_to_device(partials[:1], stream=stream)
            return None
        return partials[0]


def reduce(functor) -> Reduce:
    """``@cuda.reduce``: a reduction with the binary function ``functor``."""
    return Reduce(functor)
