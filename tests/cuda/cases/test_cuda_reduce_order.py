"""The layer's ``@cuda.reduce`` (``numba_cube/dropin/reduction.py``, which the CPU backend uses)
computes what numba-cuda's own reduction kernels compute on a GPU, bit for bit.

The reference is numba-cuda's ``numba.cuda.kernels.reduction.Reduce`` run by numba-cuda itself on
the GPU (not through numba_cube); the layer's ``Reduce`` computes on the host. float32 sums of
random data at sizes around every boundary of the algorithm (a warp, a block of 128, the 64 full
blocks after which blocks stride), with ``init``. Only a GPU runs the kernels as shipped: the
simulator's ``cuda.reduce`` is a sequential ``functools.reduce`` and it has no ``syncwarp``.
"""

from __future__ import annotations

import numpy as np

from _cuda_setup import only

SIZES = [1, 31, 32, 33, 127, 128, 129, 1000, 64 * 128 + 77, 64 * 128 * 2 + 300]


@only("gpu", why="numba-cuda's reduction kernels as shipped run on a GPU only")
def test_the_layers_reduce_is_numba_cudas_on_a_gpu():
    """float32 sums, with and without init: the layer's result has the GPU's bits."""
    from numba.cuda.kernels.reduction import Reduce as GpuReduce

    from numba_cube.dropin.reduction import Reduce as LayerReduce

    def add(a, b):
        return a + b

    gpu, layer = GpuReduce(add), LayerReduce(add)
    for n in SIZES:
        data = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        for init in (0.0, 1.5):
            expected = gpu(data, init=np.float32(init))
            got = layer(data, init=np.float32(init))
            assert np.float32(got).tobytes() == np.float32(expected).tobytes(), (n, init)
