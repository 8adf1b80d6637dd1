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

Each trampoline is compiled on its first use (the first warm launch, the first cross-stream wait
of a warm task) and cached on disk by Numba (``cache=True``), so it costs a compilation once, a
cache load once per process. It releases the GIL around the driver
call (``nogil``), as cuda-python does: a launch into a full queue may block in the driver.

``Driver.launcher`` (``driver.py``) decides whether the C entry points are usable (a real driver that ``ctypes`` can open), else it
falls back to the api's Python method (the fake driver of the tests, an exotic install).
"""

from __future__ import annotations

import ctypes
import functools
import sys
import types as types_module

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["c_launcher", "api_launcher", "c_stream_waiter", "api_stream_waiter", "c_entry_points",
           "failed_call", "warming", "warming_pair",
           "BLOCK_WORDS", "WAIT_SHIFT", "COMPILE_AFTER"]

#: 64-bit words of a launch block (see the module docstring).
BLOCK_WORDS = 12

#: A stream waiter's result: the ``cuEventRecord`` CUresult in the low bits, or the
#: ``cuStreamWaitEvent`` one shifted by this much (CUresult values are below 2**16).
WAIT_SHIFT = 16

#: Calls of a warm call's Python form (cuda-python) before its trampoline replaces it: loading
#: even a cached trampoline starts Numba's CPU target in a process that has not (~0.25 s, once),
#: which a short program must not pay for ~0.5 us per launch; a hot launch pays it once.
COMPILE_AFTER = 1000

#: The libcuda symbols the trampolines call.
C_SYMBOLS = ("cuLaunchKernel", "cuLaunchCooperativeKernel", "cuEventRecord", "cuStreamWaitEvent")

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


def _pair_codegen(entry_word: int, arg_words: tuple, widths: tuple):
    """Code that calls the function at word ``entry_word`` of a stream-pair block with the words
    ``arg_words`` (``widths``: 64 for a handle, 32 for the unsigned flags, which are 0)."""
    types_ = [_I64 if w == 64 else _I32 for w in widths]
    prototype = ir.FunctionType(_I32, types_)

    def codegen(context, builder, signature, args):
        words = builder.inttoptr(args[0], _I64.as_pointer())

        def word(k):
            return builder.load(builder.gep(words, [ir.Constant(_I32, k)]))
        entry = builder.inttoptr(word(entry_word), prototype.as_pointer())
        values = [word(k) if t is _I64 else ir.Constant(_I32, 0) for k, t in zip(arg_words, types_)]
        return builder.call(entry, values)
    return codegen


# A stream-pair block: [cuEventRecord, cuStreamWaitEvent, event, producer stream, consumer stream].
@intrinsic
def _call_record(typingctx, address):
    # cuEventRecord(hEvent, hStream): the producer's event, on the producer's stream
    return types.int32(types.int64), _pair_codegen(0, (2, 3), (64, 64))


@intrinsic
def _call_wait(typingctx, address):
    # cuStreamWaitEvent(hStream, hEvent, Flags): the consumer waits on that event, flags 0
    return types.int32(types.int64), _pair_codegen(1, (4, 2, 0), (64, 64, 32))


@intrinsic
def _call_launch(typingctx, address):
    return types.int32(types.int64), _call_codegen(11)


@intrinsic
def _call_cooperative(typingctx, address):
    return types.int32(types.int64), _call_codegen(10)


def _compiled(py_func):
    """``py_func`` compiled for one int64 (a block's address) -> int32 (a CUresult), releasing
    the GIL, cached on disk; compiled per process where Numba finds no writable cache directory
    (a read-only install without a user cache), rather than failing the launch. Each is compiled
    (or loaded from the cache) on first use: a process that never waits across streams never
    loads the waits'."""
    fn = _COMPILED.get(py_func)
    if fn is None:
        try:
            fn = njit(types.int32(types.int64), nogil=True, cache=True)(py_func)
        except RuntimeError:
            fn = njit(types.int32(types.int64), nogil=True)(py_func)
        _COMPILED[py_func] = fn
    return fn


_COMPILED: dict = {}


# Module-level functions without closures, so that Numba's disk cache finds them again in the
# next process (a closure's cell contents are part of the cache key).
def _launch_from_block(address):
    return _call_launch(address)


def _cooperative_from_block(address):
    return _call_cooperative(address)


def _record_and_wait_from_block(address):
    err = _call_record(address)
    if err != 0:
        return err
    return _call_wait(address) << WAIT_SHIFT


def _wait_from_block(address):
    return _call_wait(address) << WAIT_SHIFT


def c_launcher(entry_point: int, function: int, grid, block, shared_bytes: int, stream: int,
               params: int, cooperative: bool = False):
    """A zero-argument callable that calls the C function at ``entry_point`` (libcuda's
    ``cuLaunchKernel``, or ``cuLaunchCooperativeKernel`` when ``cooperative``) with these
    arguments and returns its ``CUresult`` as an int (0: success). The handles are passed as
    their integer values; the caller keeps the objects they name alive."""
    words = (ctypes.c_uint64 * BLOCK_WORDS)(entry_point, function, *grid, *block, shared_bytes,
                                             stream, params, 0)
    trampoline = _compiled(_cooperative_from_block if cooperative else _launch_from_block)
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


def c_stream_waiter(record_entry: int, wait_entry: int, event: int, producer: int, consumer: int):
    """``(record_and_wait, wait)``: zero-argument callables over one block that make stream
    ``consumer`` wait for ``event``, the first after recording ``event`` on stream ``producer``
    (libcuda's ``cuEventRecord`` at ``record_entry``, ``cuStreamWaitEvent`` at ``wait_entry``).
    Each returns 0, a failed record's CUresult, or a failed wait's shifted by ``WAIT_SHIFT``
    (the record was made then). The caller keeps the event and streams alive."""
    words = (ctypes.c_uint64 * 5)(record_entry, wait_entry, event, producer, consumer)
    address = ctypes.addressof(words)
    record_and_wait = functools.partial(_compiled(_record_and_wait_from_block), address)
    wait = functools.partial(_compiled(_wait_from_block), address)
    record_and_wait.words = wait.words = words
    return record_and_wait, wait


def api_stream_waiter(api, event, producer, consumer):
    """The same pair over the api's Python methods (cuda-python's, or a fake driver's)."""
    record, wait_event = api.cuEventRecord, api.cuStreamWaitEvent

    def record_and_wait():
        err = record(event, producer)[0]
        if err:
            return err
        return int(wait_event(consumer, event, 0)[0]) << WAIT_SHIFT

    def wait():
        return int(wait_event(consumer, event, 0)[0]) << WAIT_SHIFT
    return record_and_wait, wait


def c_entry_points(api) -> dict:
    """Symbol -> address of libcuda's ``C_SYMBOLS`` in this process, or {} where they are not to
    be called directly: an api that is not cuda-python's module (a fake stands in for the
    driver), or no libcuda that ``ctypes`` can open (it opens the library cuda-python loaded,
    by the same soname)."""
    if not isinstance(api, types_module.ModuleType):
        return {}
    try:
        lib = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
        return {symbol: ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value or 0
                for symbol in C_SYMBOLS}
    except (OSError, AttributeError):
        return {}


def failed_call(err: int) -> tuple:
    """``(call, CUresult)`` of a stream waiter's nonzero result (see ``c_stream_waiter``)."""
    if err >> WAIT_SHIFT:
        return "cuStreamWaitEvent", err >> WAIT_SHIFT
    return "cuEventRecord", err


def warming(python_call, compile_call, install, after: int = COMPILE_AFTER):
    """``python_call`` that, at its ``after``-th call, compiles its replacement
    (``compile_call()``) and hands it to ``install``, whose holder then calls that instead."""
    calls = 0

    def call():
        nonlocal calls
        calls += 1
        if calls == after:
            install(compile_call())
        return python_call()
    return call


def warming_pair(python_pair, compile_pair, install, after: int = COMPILE_AFTER):
    """``warming`` for a stream waiter's pair: the two calls count together."""
    calls = 0

    def counted(fn):
        def call():
            nonlocal calls
            calls += 1
            if calls == after:
                install(compile_pair())
            return fn()
        return call
    return counted(python_pair[0]), counted(python_pair[1])
