"""The warm launch's driver call: libcuda's ``cuLaunchKernel`` called through a Numba-compiled trampoline.

Why not cuda-python. ``cuda.bindings.driver.cuLaunchKernel`` converts its eleven arguments in
Python-visible code on every call (the handle objects, the ``kernelParams`` helper object): about
half a microsecond of the ~4 us a launch costs from Python on an H200 host. Calling libcuda's
own symbol through ``ctypes`` with eleven arguments is slower still (a ctypes conversion per
argument: ~1.4 us measured for a do-nothing C function with this signature, against ~0.6 us with
every argument pre-built as a ctypes object). A warm launch's arguments are all fixed once it is
armed, though, so they are stored once in a small block of 64-bit words, and one Numba-compiled
function (``_launch_from_block``) reads them and calls the driver's function pointer: one Python
call with one int argument (~0.1 us over the driver's own work).

The block: ``[entry point, CUfunction, gridX, gridY, gridZ, blockX, blockY, blockZ,
sharedMemBytes, hStream, kernelParams, extra]``, each a 64-bit word; the unsigned ints are
truncated to 32 bits as the C prototype takes them. A cooperative launch uses the same block and
``cuLaunchCooperativeKernel``, which takes no ``extra``.

The trampolines are compiled when this module is imported (on the first warm launch: ``driver.py``
imports it then) and cached on disk by Numba (``cache=True``), so they cost a compilation once,
a cache load once per process. It releases the GIL around the driver
call (``nogil``), as cuda-python does: a launch into a full queue may block in the driver.

``Driver.launcher`` (``driver.py``) decides whether the C entry points are usable (a real driver that ``ctypes`` can open), else it
falls back to the api's Python method (the fake driver of the tests, an exotic install).
"""

from __future__ import annotations

import ctypes
import functools

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["c_launcher", "api_launcher", "BLOCK_WORDS"]

#: 64-bit words of a launch block (see the module docstring).
BLOCK_WORDS = 12

_I64, _I32 = ir.IntType(64), ir.IntType(32)


def _call_codegen(nparams: int):
    """Code that loads ``nparams + 1`` words at the address it is given and calls the first as a
    function of the other ``nparams``: CUfunction (a pointer), six grid/block dimensions and
    sharedMemBytes (unsigned int), then hStream, kernelParams and (not cooperative) extra."""
    widths = [_I64] + [_I32] * 7 + [_I64] * (nparams - 8)
    prototype = ir.FunctionType(_I32, widths)

    def codegen(context, builder, signature, args):
        words = builder.inttoptr(args[0], _I64.as_pointer())
        loaded = [builder.load(builder.gep(words, [ir.Constant(_I32, k)])) for k in range(nparams + 1)]
        entry = builder.inttoptr(loaded[0], prototype.as_pointer())
        values = [v if w is _I64 else builder.trunc(v, _I32) for v, w in zip(loaded[1:], widths)]
        return builder.call(entry, values)
    return codegen


@intrinsic
def _call_launch(typingctx, address):
    return types.int32(types.int64), _call_codegen(11)


@intrinsic
def _call_cooperative(typingctx, address):
    return types.int32(types.int64), _call_codegen(10)


# Module-level functions without closures, so that Numba's disk cache finds them again in the
# next process (a closure's cell contents are part of the cache key).
@njit(types.int32(types.int64), nogil=True, cache=True)
def _launch_from_block(address):
    return _call_launch(address)


@njit(types.int32(types.int64), nogil=True, cache=True)
def _cooperative_from_block(address):
    return _call_cooperative(address)


def c_launcher(entry_point: int, function: int, grid, block, shared_bytes: int, stream: int,
               params: int, cooperative: bool = False):
    """A zero-argument callable that calls the C function at ``entry_point`` (libcuda's
    ``cuLaunchKernel``, or ``cuLaunchCooperativeKernel`` when ``cooperative``) with these
    arguments and returns its ``CUresult`` as an int (0: success). The handles are passed as
    their integer values; the caller keeps the objects they name alive."""
    words = (ctypes.c_uint64 * BLOCK_WORDS)(entry_point, function, *grid, *block, shared_bytes,
                                             stream, params, 0)
    trampoline = _cooperative_from_block if cooperative else _launch_from_block
    call = functools.partial(trampoline, ctypes.addressof(words))
    call.words = words        # a partial has a __dict__: the block lives as long as the call
    return call


def api_launcher(launch, function, grid, block, shared_bytes: int, stream, params: int,
                 cooperative: bool = False):
    """The same callable over a Python binding of the call (``api.cuLaunchKernel`` of
    cuda-python or of a fake driver, which return ``(CUresult,)``)."""
    if cooperative:
        args = (function, *grid, *block, shared_bytes, stream, params)
    else:
        args = (function, *grid, *block, shared_bytes, stream, params, 0)

    def call():
        return launch(*args)[0]
    return call
