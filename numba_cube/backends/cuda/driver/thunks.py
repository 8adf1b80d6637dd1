"""Zero-argument native calls of warm driver calls: each its own tiny compiled function, its block in a slot.

Why. The Numba trampolines of ``launch_call.py`` take the block's address as their argument, and
calling a Numba dispatcher from Python types that argument on every call: about 0.3 us on the
2-core development VM, the largest single cost of a warm launch after the driver's own. A ctypes
function pointer called with *no* argument converts nothing and costs about half that. So the
block's address must be a constant of the code itself, which makes one function per block.
Measured (``benchmarks/bench_cuda.py`` section 1b, 2026-12-03): on H200 hosts (Python 3.12,
where a dispatcher call is cheaper) a whole warm launch costs 0.89-1.02x of the same launch
through the trampoline, a cross-stream record-and-wait 0.44-0.83 us against 0.51-0.92 us; on the
development VM (Python 3.11, ``bench_launch_python.py``) a warm launch 0.3-1.0 us less.

Compiling one through Numba costs tens of milliseconds, so they are made in batches with
llvmlite (the LLVM Numba itself runs on), without Numba's pipeline: a batch of ``SLOTS`` slots of
one kind is one LLVM module holding a global array of words (each slot a block of the kind's
width) and, per slot, the functions of the kind, each calling through its own slot's words
(``call_ir.py`` emits the same code as the trampolines). One MCJIT engine per process holds the
batches; a batch costs ~15 ms to compile on the development VM, once per ``SLOTS`` live calls.

Kinds: ``launch`` (cuLaunchKernel, one function), ``cooperative`` (cuLaunchCooperativeKernel),
``waiter`` (a stream pair: record-and-wait and wait, two functions over one block).

Slots are lent, never freed: ``make`` writes the words into a free slot and returns its
functions as ``Thunk`` objects (ctypes function pointers, which release the GIL around the call
as the trampolines do); the slot goes back to its kind's free list when the first of them (which
the others keep alive) is collected, so nobody can call a slot after it was lent again. A free
list is a plain list (``append`` and ``pop`` are atomic), so a release run by the garbage
collector inside ``make`` cannot deadlock on the compile lock.

Where LLVM cannot make an engine here (no native target, no executable memory), ``make`` returns
None and ``launch_call.py`` keeps the Numba trampolines.
"""

from __future__ import annotations

import ctypes
import threading
import weakref

from llvmlite import ir

from numba_cube.backends.cuda.driver import call_ir

__all__ = ["Thunk", "make", "SLOTS", "KINDS"]

#: Slots per compiled batch: few enough that a batch compiles in milliseconds, enough that a
#: program with a few hot launches compiles one.
SLOTS = 16

#: kind -> (words per block, the emitters of its functions, in the order ``make`` returns them)
KINDS = {
    "launch": (call_ir.BLOCK_WORDS, (call_ir.emit_kernel_launch,)),
    "cooperative": (call_ir.BLOCK_WORDS, (call_ir.emit_cooperative_launch,)),
    "waiter": (call_ir.PAIR_WORDS, (call_ir.emit_record_and_wait, call_ir.emit_wait)),
}

_PROTOTYPE = ctypes.CFUNCTYPE(ctypes.c_int)


class Thunk(ctypes._CFuncPtr):
    """``int f(void)`` at an address: one compiled call over one slot. A subclass of ctypes'
    function pointer (its ``CFUNCTYPE(c_int)``'s flags, restype and argtypes) only so that it
    takes attributes (``words``, its slot's words; ``keeps``, the thunk whose collection frees
    the slot) and weak references; calling it costs what calling that type's instances costs."""

    _flags_ = _PROTOTYPE._flags_
    _restype_ = ctypes.c_int
    _argtypes_ = ()


class _Pool:
    """The process's engine and its batches (module docstring)."""

    def __init__(self):
        self._lock = threading.Lock()          # compiling a batch; never taken by a release
        self._engine = None
        self._broken = False                   # an engine could not be made: never again
        self._batches = 0
        self._free: dict = {kind: [] for kind in KINDS}   # kind -> [(words address, functions)]

    def make(self, kind: str, words: tuple):
        """The functions of ``kind`` over a slot holding ``words`` (a tuple of ints, the kind's
        block), as ``Thunk`` objects; None where no engine can be made."""
        free = self._free[kind]
        try:
            address, functions = free.pop()
        except IndexError:
            if not self._grow(kind):
                return None
            try:
                address, functions = free.pop()
            except IndexError:        # another thread took the whole batch meanwhile
                return self.make(kind, words)
        width = KINDS[kind][0]
        block = (ctypes.c_uint64 * width).from_address(address)
        block[:] = words
        thunks = tuple(Thunk(f) for f in functions)
        for t in thunks:
            t.words = block
        for t in thunks[1:]:
            t.keeps = thunks[0]       # the slot lives while any of its functions does
        weakref.finalize(thunks[0], free.append, (address, functions)).atexit = False
        return thunks

    def _grow(self, kind: str) -> bool:
        """Compile a batch of ``kind`` and put its slots on the free list; False if it cannot."""
        with self._lock:
            if self._broken:
                return False
            if self._free[kind]:
                return True
            try:
                engine = self._engine or self._new_engine()
                slots = self._compile(engine, kind, self._batches)
            except Exception:  # noqa: BLE001 - any failure of LLVM here: the trampolines serve
                self._broken = True
                return False
            self._batches += 1
            self._free[kind].extend(reversed(slots))
            return True

    def _new_engine(self):
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_triple(llvm.get_process_triple())
        self._machine = target.create_target_machine(codemodel="jitdefault")
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), self._machine)
        return self._engine

    def _compile(self, engine, kind: str, number: int) -> list:
        """One batch of ``kind``: ``[(words address, function addresses)]`` per slot."""
        import llvmlite.binding as llvm

        width, emitters = KINDS[kind]
        module = ir.Module(name=f"numba_cube_thunks_{kind}_{number}")
        module.triple = self._machine.triple
        module.data_layout = str(self._machine.target_data)
        array = ir.ArrayType(call_ir.I64, SLOTS * width)
        store = ir.GlobalVariable(module, array, name=f"numba_cube_words_{kind}_{number}")
        store.initializer = ir.Constant(array, None)
        names = []
        for slot in range(SLOTS):
            names.append([])
            for j, emit in enumerate(emitters):
                name = f"numba_cube_{kind}_{number}_{slot}_{j}"
                fn = ir.Function(module, ir.FunctionType(call_ir.I32, []), name=name)
                builder = ir.IRBuilder(fn.append_basic_block("entry"))
                words = builder.gep(store, [ir.Constant(call_ir.I32, 0),
                                            ir.Constant(call_ir.I32, slot * width)], inbounds=True)
                builder.ret(emit(builder, words))
                names[-1].append(name)
        compiled = llvm.parse_assembly(str(module))
        compiled.verify()
        engine.add_module(compiled)
        engine.finalize_object()
        base = engine.get_global_value_address(store.name)
        return [(base + 8 * width * slot, tuple(engine.get_function_address(n) for n in names[slot]))
                for slot in range(SLOTS)]


_POOL = _Pool()


def make(kind: str, words: tuple):
    """``kind``'s zero-argument calls over ``words`` (module docstring), or None."""
    return _POOL.make(kind, words)
