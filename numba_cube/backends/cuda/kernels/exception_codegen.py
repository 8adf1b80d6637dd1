"""A kernel's exceptions recorded without ``debug=True``: what numba-cuda is asked to compile.

numba-cuda lowers a kernel as a function returning a status: 0 on success, else the id of the
exception a unit raised (``raise``, a failed ``assert``; a device function's status is returned
unchanged by its caller). Its ``kernel_fixup`` (numba-cuda 0.30, ``compiler.py``) turns each
``ret <status>`` into ``ret void``; only with ``debug=True`` does it first store the status in a
module global (``<kernel>__errcode__``), which its launch clears before and reads back after,
blocking. Without debug the status is dropped: the launch "succeeds" on garbage.

While numba_cube compiles (``compiling``, under numba-cuda's compiler lock) two things change:

1. **The kernel stores its status in a word the launch names.** ``kernel_fixup`` is wrapped:
   a kernel compiled without debug whose function can return a status other than success gets
   a trailing ``i32*`` parameter, and each such ``ret`` first stores its status there (a plain
   store: only a unit that raises stores, any raising unit's code names a real exception of this
   launch, and a launch that raises nothing executes no extra instruction). Each launch passes
   its own word (``error_slots.py``), so launches in flight are told apart and nothing is reset
   or copied per launch. ``debug=True`` is left to numba-cuda's own fixup (its meaning: blocking,
   the unit's coordinates in the message).
2. **Exception ids are unique in the process.** numba-cuda numbers each function's exceptions
   from 1 (``_MinimalCallHelper``), so a status a device function returns names another
   exception in the kernel's table (numba issue 8036). Inside the window ids come from one
   counter above ``ID_BASE`` (from a random point per process) and are kept in ``EXCEPTIONS``: any code a kernel compiled
   here returns is decoded exactly (``decode``). A code below ``ID_BASE`` comes from a device
   function numba-cuda compiled outside numba_cube; it is reported as such (never as garbage).

Which kernels can raise is known statically (``Fixup.may_raise``): a ``ret`` returns success,
a constant exception id, or the status of a call; a callee defined in the kernel's linked code
can fail if one of its ``ret``\\s can (transitively), a callee whose code is not there, or any
other returned value, is assumed to fail. A kernel that cannot raise pays nothing per launch.

numba-cuda outside the window is unchanged. The wrapped fixup leaves a compile without a
collector (``compiling`` not active on this thread) exactly as numba-cuda makes it.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import sys
import threading
from typing import NamedTuple

__all__ = ["ID_BASE", "EXCEPTIONS", "Fixup", "compiling", "decode", "status_returns",
           "function_may_fail"]

#: No exception id handed out inside the window is below this (numba-cuda's own start at 1).
ID_BASE = 1 << 20
#: id -> (exception class, args, (function, file, line) or None), for every id handed out here.
EXCEPTIONS: dict[int, tuple] = {}
# Each process starts at its own random offset: code compiled by another process (a device
# function numba-cuda kept on disk) is then unlikely to return an id this one handed out.
_NEXT_ID = itertools.count(ID_BASE + (random.SystemRandom().randrange(1 << 29) << 1))
#: statuses that mean success (numba's RETCODE_OK and RETCODE_NONE)
_SUCCESS = (0, -2)
#: the name of the trailing parameter the fixup adds
WORD_PARAM = "numba_cube_error_word"

_local = threading.local()


class Fixup(NamedTuple):
    """What the wrapped fixup saw of one kernel (``entry`` is its mangled name)."""

    entry: str
    word: bool          # the trailing error-word parameter was added
    codes: frozenset    # constant statuses its rets return
    callees: frozenset  # functions whose status it returns
    opaque: bool        # it returns a status of unknown origin

    def may_raise(self, modules) -> bool:
        """Whether a launch can end with an exception, looking through the functions it calls
        as defined in ``modules`` (the code library's LLVM modules)."""
        if self.opaque or any(c not in _SUCCESS for c in self.codes):
            return True
        if not self.callees:
            return False
        defined = {f.name: f for m in modules for f in m.functions if f.blocks}
        return any(function_may_fail(name, defined) for name in self.callees)


def status_returns(fn) -> tuple[frozenset, frozenset, bool]:
    """``(constants, callees, opaque)`` of what ``fn``'s ``ret`` instructions return: constant
    statuses, names of functions whose returned status is passed on, and whether some returned
    value is neither."""
    from llvmlite import ir

    codes, callees, opaque = set(), set(), False
    for block in fn.blocks:
        for inst in block.instructions:
            if not isinstance(inst, ir.Ret) or not inst.operands:
                continue
            value = inst.operands[0]
            if isinstance(value, ir.Constant) and isinstance(value.constant, int):
                codes.add(value.constant)
            elif isinstance(value, ir.CallInstr) and isinstance(value.callee, ir.Function):
                callees.add(value.callee.name)
            else:
                opaque = True
    return frozenset(codes), frozenset(callees), opaque


def function_may_fail(name: str, defined: dict) -> bool:
    """Whether the function ``name`` can return a failure status (see the module docstring).
    Iterative, with recursion among device functions taken as "can fail"."""
    verdict: dict[str, bool] = {}
    stack = [(name, False)]
    while stack:
        current, expanded = stack.pop()
        if current in verdict:
            continue
        fn = defined.get(current)
        if fn is None:
            verdict[current] = True              # its code is not here: assume it can
            continue
        codes, callees, opaque = status_returns(fn)
        if opaque or any(c not in _SUCCESS for c in codes):
            verdict[current] = True
            continue
        pending = [c for c in callees if c not in verdict]
        if not pending or expanded:
            verdict[current] = any(verdict.get(c, True) for c in callees)
            continue
        stack.append((current, True))
        stack.extend((c, False) for c in pending if c != current)
    return verdict[name]


def _store_statuses(kernel):
    """Add the error word to ``kernel`` (an LLVM function still returning its status): before
    each ``ret`` of a status that may be a failure, store it in the word. Returns the word's
    argument, which ``_append_word`` puts into the signature."""
    from llvmlite import ir

    i32 = ir.IntType(32)
    word = ir.Argument(kernel, i32.as_pointer(), name=WORD_PARAM)
    for block in list(kernel.blocks):
        ret = block.terminator
        if not isinstance(ret, ir.Ret) or not ret.operands:
            continue
        status = ret.operands[0]
        if isinstance(status, ir.Constant) and isinstance(status.constant, int):
            if status.constant in _SUCCESS:
                continue
            builder = ir.IRBuilder(block)
            builder.position_before(ret)
            builder.store(status, word)          # the raise path itself: store unconditionally
            continue
        # A status passed on from a call: store only when it is not a success.
        block.instructions.remove(ret)
        block.terminator = None
        builder = ir.IRBuilder(block)
        ok = builder.or_(builder.icmp_signed("==", status, ir.Constant(i32, _SUCCESS[0])),
                         builder.icmp_signed("==", status, ir.Constant(i32, _SUCCESS[1])))
        store = kernel.append_basic_block("numba_cube.store_status")
        done = kernel.append_basic_block("numba_cube.return")
        builder.cbranch(ok, done, store)
        builder.position_at_end(store)
        builder.store(status, word)
        builder.branch(done)
        builder.position_at_end(done)
        new_ret = builder.ret(status)
        new_ret.metadata = ret.metadata
    return word


def _append_word(kernel, word) -> None:
    """Make ``word`` the last parameter of ``kernel``, before numba-cuda's fixup runs: the fixup
    derives the kernel's final type from the current one (dropping the return-value pointer),
    and ``nvvm.set_cuda_kernel`` at its end writes that type into ``@llvm.used``; a parameter
    added afterwards would leave a reference of another type there, which NVVM refuses."""
    from llvmlite import ir

    kernel.args = tuple(kernel.args) + (word,)
    ftype = ir.FunctionType(kernel.ftype.return_type, [a.type for a in kernel.args])
    kernel.ftype = ftype
    kernel.type = ftype.as_pointer() if isinstance(kernel.type, ir.PointerType) else ftype


def _void_type(kernel) -> None:
    """After numba-cuda's fixup (which updates ``type`` only): ``ftype`` to match."""
    from llvmlite import ir

    kernel.ftype = ir.FunctionType(ir.VoidType(), [a.type for a in kernel.args])


def _wrapped_fixup(original):
    def kernel_fixup(kernel, debug):
        found = getattr(_local, "found", None)
        if found is None or debug:
            return original(kernel, debug)
        codes, callees, opaque = status_returns(kernel)
        needs_word = _local.record and (opaque or bool(callees)
                                        or any(c not in _SUCCESS for c in codes))
        word = _store_statuses(kernel) if needs_word else None
        if word is not None:
            _append_word(kernel, word)
        result = original(kernel, debug)
        if word is not None:
            _void_type(kernel)
        found.append(Fixup(kernel.name, word is not None, codes, callees, opaque))
        return result
    kernel_fixup.numba_cube_original = original
    return kernel_fixup


def _add_exception(self, exc, exc_args, locinfo):
    """``_MinimalCallHelper._add_exception`` with process-unique ids (module docstring, 2)."""
    exc_id = next(_NEXT_ID)
    self.exceptions[exc_id] = exc, exc_args, locinfo
    EXCEPTIONS[exc_id] = (exc, exc_args, locinfo)
    return exc_id


@contextlib.contextmanager
def compiling(record: bool = True):
    """Inside: numba-cuda compiles with unique exception ids, and each kernel it fixes up
    without debug is reported in the yielded list (a ``Fixup``); with ``record`` such kernels
    also get the error word (without: only observed, compiled as numba-cuda compiles them)."""
    from numba.cuda.core.callconv import _MinimalCallHelper
    from numba.cuda.core.compiler_lock import global_compiler_lock
    from numba.cuda.dispatcher import _Kernel

    dispatcher = sys.modules[_Kernel.__module__]
    found: list = []
    with global_compiler_lock:
        original_fixup = dispatcher.kernel_fixup
        original_add = _MinimalCallHelper._add_exception
        saved = getattr(_local, "found", None), getattr(_local, "record", False)
        dispatcher.kernel_fixup = _wrapped_fixup(
            getattr(original_fixup, "numba_cube_original", original_fixup))
        _MinimalCallHelper._add_exception = _add_exception
        _local.found, _local.record = found, record
        try:
            yield found
        finally:
            _local.found, _local.record = saved
            _MinimalCallHelper._add_exception = original_add
            dispatcher.kernel_fixup = original_fixup


def decode(code: int, kernel) -> BaseException:
    """The exception status ``code`` of numba-cuda's compiled ``kernel`` stands for, with its
    message as written (no location prefix: a CPU launch raises it so)."""
    found = EXCEPTIONS.get(code)
    if found is None and code < ID_BASE:
        helper = getattr(kernel, "call_helper", None)
        own = getattr(helper, "exceptions", {}).get(code) if helper is not None else None
        if own is not None and min(getattr(helper, "exceptions", {0: 0})) < ID_BASE:
            found = own                  # a kernel numbered by numba-cuda itself
    if found is None:
        name = getattr(kernel, "entry_name", "?")
        return SystemError(f"kernel {name} returned exception status {code}, which names no "
                           f"exception numba_cube compiled (a device function numba-cuda compiled "
                           f"outside numba_cube numbers its exceptions on its own: numba issue "
                           f"8036)")
    exc_class, exc_args, _ = found
    return exc_class(*exc_args) if exc_args else exc_class()
