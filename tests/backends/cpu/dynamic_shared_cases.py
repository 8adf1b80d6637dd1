"""Dynamic shared memory declared in device functions, with keywords: a kernel that both the CPU
backend (``test_dynamic_shared.py``) and numba-cuda's simulator run, the latter as a script in a
subprocess under ``NUMBA_ENABLE_CUDASIM=1`` (it prints the outputs as JSON).

Spelled ``shape=0`` with Numba's type objects imported by name: the simulator takes only the
integer 0 as dynamic (not ``(0,)``) and has no ``cuda.float32`` inside a kernel.
"""

import json

import numpy as np
from numba import cuda, float32, int32

N = 8                  # units of the one cube
NBYTES = N * 4         # the launch's dynamic shared memory


@cuda.jit(device=True)
def stage_floats(t, value):
    floats = cuda.shared.array(shape=0, dtype=float32)
    floats[t] = value
    return floats


@cuda.jit(device=True)
def bits_of(t):
    ints = cuda.shared.array(0, dtype=int32)          # the same bytes, seen as int32
    return ints[t]


@cuda.jit
def through_device_functions(x, bits, back, sizes):
    t = cuda.threadIdx.x
    floats = stage_floats(t, x[t])
    cuda.syncthreads()
    bits[t] = bits_of(t)
    mine = cuda.shared.array(dtype=float32, shape=0)  # and once more in the kernel
    back[t] = mine[cuda.blockDim.x - 1 - t]
    if t == 0:
        sizes[0] = floats.size
        sizes[1] = mine.size


def inputs():
    x = np.arange(N, dtype=np.float32) * 1.5 - 2.0
    return x, np.zeros(N, np.int32), np.zeros(N, np.float32), np.zeros(2, np.int64)


if __name__ == "__main__":
    x, bits, back, sizes = inputs()
    through_device_functions[1, N, 0, NBYTES](x, bits, back, sizes)
    print(json.dumps({"bits": bits.tolist(), "back": back.tolist(), "sizes": sizes.tolist()}))
