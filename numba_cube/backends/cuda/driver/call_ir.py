"""The LLVM code of a warm driver call: load a block of 64-bit words, call the first through the rest.

A warm launch's driver call has all of its arguments fixed once it is armed, so they are kept in
a small block of words (``BLOCK_WORDS`` of them) and the call is code that loads them and calls
libcuda's function pointer found in the block. Two callers emit this code:

- ``launch_call.py``'s Numba trampolines, which take the block's address as their argument;
- ``thunks.py``'s zero-argument functions, each compiled with the address of its own block, in
  the module's memory, as a constant.

Both emit it from here, so that the two forms of a call cannot disagree about a block's layout.

Launch block: ``[entry point, CUfunction, gridX, gridY, gridZ, blockX, blockY, blockZ,
sharedMemBytes, hStream, kernelParams, extra]``; the unsigned ints are truncated to 32 bits as
the C prototype takes them. A cooperative launch uses the same block and
``cuLaunchCooperativeKernel``, which takes no ``extra``.

Stream-pair block: ``[cuEventRecord, cuStreamWaitEvent, event, producer stream, consumer
stream]``. ``record_and_wait`` returns the record's ``CUresult``, or the wait's shifted by
``WAIT_SHIFT`` (CUresult values are below 2**16), so that one int says which call failed.
"""

from __future__ import annotations

from llvmlite import ir

__all__ = ["BLOCK_WORDS", "PAIR_WORDS", "WAIT_SHIFT", "LAUNCH_PARAMS", "COOPERATIVE_PARAMS",
           "emit_launch", "emit_kernel_launch", "emit_cooperative_launch", "emit_record", "emit_wait",
           "emit_record_and_wait"]

#: 64-bit words of a launch block.
BLOCK_WORDS = 12

#: 64-bit words of a stream-pair block.
PAIR_WORDS = 5

#: A stream waiter's result: the ``cuEventRecord`` CUresult in the low bits, or the
#: ``cuStreamWaitEvent`` one shifted by this much.
WAIT_SHIFT = 16

#: Parameters of cuLaunchKernel and of cuLaunchCooperativeKernel (which has no ``extra``).
LAUNCH_PARAMS, COOPERATIVE_PARAMS = 11, 10

I64, I32 = ir.IntType(64), ir.IntType(32)


def _word(builder, words, k: int):
    return builder.load(builder.gep(words, [ir.Constant(I32, k)]))


def emit_launch(builder, words, nparams: int):
    """Code that calls word 0 of the launch block at ``words`` (an ``i64*``) as a function of the
    next ``nparams`` words: CUfunction (a pointer), six grid/block dimensions and sharedMemBytes
    (unsigned int), then hStream, kernelParams and (not cooperative) extra. Its i32 result."""
    widths = [I64] + [I32] * 7 + [I64] * (nparams - 8)
    prototype = ir.FunctionType(I32, widths)
    loaded = [_word(builder, words, k) for k in range(nparams + 1)]
    entry = builder.inttoptr(loaded[0], prototype.as_pointer())
    values = [v if w is I64 else builder.trunc(v, I32) for v, w in zip(loaded[1:], widths)]
    return builder.call(entry, values)


def emit_kernel_launch(builder, words):
    """cuLaunchKernel through a launch block (``emit_launch`` with its 11 parameters)."""
    return emit_launch(builder, words, LAUNCH_PARAMS)


def emit_cooperative_launch(builder, words):
    """cuLaunchCooperativeKernel through a launch block (10 parameters: no ``extra``)."""
    return emit_launch(builder, words, COOPERATIVE_PARAMS)


def _emit_pair_call(builder, words, entry_word: int, arg_words: tuple, widths: tuple):
    """Call the function at word ``entry_word`` of a stream-pair block with the words
    ``arg_words`` (``widths``: 64 for a handle, 32 for the unsigned flags, which are 0)."""
    types_ = [I64 if w == 64 else I32 for w in widths]
    prototype = ir.FunctionType(I32, types_)
    entry = builder.inttoptr(_word(builder, words, entry_word), prototype.as_pointer())
    values = [_word(builder, words, k) if t is I64 else ir.Constant(I32, 0)
              for k, t in zip(arg_words, types_)]
    return builder.call(entry, values)


def emit_record(builder, words):
    """cuEventRecord(hEvent, hStream): the producer's event, on the producer's stream."""
    return _emit_pair_call(builder, words, 0, (2, 3), (64, 64))


def emit_wait(builder, words):
    """cuStreamWaitEvent(hStream, hEvent, Flags): the consumer waits on that event, flags 0;
    its result already shifted by ``WAIT_SHIFT``."""
    return builder.shl(_emit_pair_call(builder, words, 1, (4, 2, 0), (64, 64, 32)),
                       ir.Constant(I32, WAIT_SHIFT))


def emit_record_and_wait(builder, words):
    """The record, then (if it succeeded) the wait: the record's result, or the wait's shifted."""
    recorded = emit_record(builder, words)
    failed = builder.icmp_unsigned("!=", recorded, ir.Constant(I32, 0))
    with builder.if_else(failed) as (then, otherwise):
        with then:
            then_block = builder.block
        with otherwise:
            waited = emit_wait(builder, words)
            wait_block = builder.block
    result = builder.phi(I32)
    result.add_incoming(recorded, then_block)
    result.add_incoming(waited, wait_block)
    return result
