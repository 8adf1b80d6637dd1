"""The packed launch's parameter layout is numba-cuda's (``packed_launch.py``).

numba_cube packs kernel arguments itself instead of going through numba-cuda's launch path, so
its layout must be exactly the flattened parameter list numba-cuda compiles a kernel for. That
list comes from numba-cuda's own argument packer (``get_arg_packer``), which needs no GPU.
"""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest

from numba_cube.backends.cuda.kernels.compiler import arg_kinds, numba_types
from numba_cube.backends.cuda.driver.driver import Driver
from numba_cube.backends.cuda.launch.packed_launch import (
    ArgLayout, CompiledKernel, PackedLaunch, ParamBlock, scalar_format,
)
from numba_cube.runtime.memory.handle import Binding

pytest.importorskip("numba_cuda")


def _binding(dtype, shape):
    return Binding(1, 0, tuple(shape), np.dtype(dtype))


SIGNATURES = [
    (_binding(np.float64, (10,)), _binding(np.float64, (10,)), _binding(np.float64, (10,)), np.int64(3)),
    (_binding(np.float32, (4, 5)), np.float32(1.5), np.bool_(True), np.complex128(1 + 2j)),
    (np.int32(1), np.uint8(2), _binding(np.int16, (2, 3, 4)), np.float64(0.5), np.complex64(1j)),
    (_binding(np.uint32, ()), np.int8(-1)),
]


@pytest.mark.parametrize("args", SIGNATURES, ids=lambda a: str(len(a)))
def test_layout_matches_numba_cuda_argument_packer(args):
    """Same number of kernel parameters, each of the size numba-cuda's ABI gives it."""
    from numba.cuda.descriptor import cuda_target

    ctx = cuda_target.target_context
    packer = ctx.get_arg_packer(list(numba_types(args)))
    abi = [ctx.get_abi_sizeof(t) for t in packer.argument_types]
    layout = ArgLayout(arg_kinds(args))
    sizes = []
    for kind in layout.kinds:
        if kind[0] == "array":
            sizes += [8] * (5 + 2 * kind[1])
        else:
            sizes += [struct.calcsize("<" + ch) for ch in scalar_format(kind[1])]
    assert layout.nparams == len(abi)
    assert sizes == abi
    for off, size in zip(layout.param_offsets, sizes):
        assert off % size == 0, "every parameter naturally aligned"


def test_param_block_round_trip():
    """Packed bytes read back through the void*[] give numba-cuda's values: meminfo and parent
    null, nitems, itemsize, data pointer, shape, C strides; then the scalars."""
    args = (_binding(np.float32, (4, 5)), np.int32(-3), np.complex128(2 - 1j))
    layout = ArgLayout(arg_kinds(args))
    block = ParamBlock(layout)
    block.pack_array(0, 0xABCDEF00, (4, 5), 4)
    block.pack_scalar(1, args[1])
    block.pack_scalar(2, args[2])
    ptrs = (ctypes.c_void_p * layout.nparams).from_address(block.address)
    q = [ctypes.c_int64.from_address(ptrs[k]).value for k in range(9)]
    assert q == [0, 0, 20, 4, 0xABCDEF00, 4, 5, 20, 4]
    assert ctypes.c_int32.from_address(ptrs[9]).value == -3
    assert ctypes.c_double.from_address(ptrs[10]).value == 2.0
    assert ctypes.c_double.from_address(ptrs[11]).value == -1.0


class _Api:
    """Just enough of a driver api to build a packed launch (nothing is launched here)."""

    class CUresult:
        CUDA_SUCCESS = 0
        CUDA_ERROR_NOT_READY = 600

    def cuLaunchKernel(self, *args):
        return (0,)


def test_a_scalar_object_packed_last_is_not_packed_again_but_any_other_is():
    """A packed launch with one scalar writes it into the block per launch unless it is the very
    object packed last (whose bytes are there already): whatever objects come, in whatever order
    (equal values in distinct objects, NumPy scalars, the first pack after construction), the
    block holds the value of the last one."""
    args = (_binding(np.float64, (8,)), np.int64(3))
    layout = ArgLayout(arg_kinds(args))
    packed = PackedLaunch(CompiledKernel("k", 0, layout, 1024), Driver(_Api()), args, lambda b: 0x1000)
    ptrs = (ctypes.c_void_p * layout.nparams).from_address(packed.block.address)

    def in_block():
        return ctypes.c_int64.from_address(ptrs[7]).value     # after the array's 7 parameters

    assert in_block() == 3
    first, second = int("1000001"), int("1000002")            # objects made here, not cached ints
    twin = int("1000001")
    for value in (first, first, second, first, twin, np.int64(-5), 7, 7, second):
        packed.pack((None, value))
        assert in_block() == value


def test_a_failed_pack_forgets_what_the_block_held():
    """A value out of the scalar's range fails to pack (the caller refuses the launch), and the
    failed ``pack_into`` has zeroed the field: the object packed before it is packed again when
    it comes back, so the next launch carries its value, not zero."""
    args = (_binding(np.float64, (8,)), np.int64(3))
    layout = ArgLayout(arg_kinds(args))
    packed = PackedLaunch(CompiledKernel("k", 0, layout, 1024), Driver(_Api()), args, lambda b: 0x1000)
    ptrs = (ctypes.c_void_p * layout.nparams).from_address(packed.block.address)
    one = int("1")
    packed.pack((None, one))
    with pytest.raises(struct.error):
        packed.pack((None, 2**70))
    packed.pack((None, one))
    assert ctypes.c_int64.from_address(ptrs[7]).value == 1
