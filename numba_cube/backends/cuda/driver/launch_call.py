"""The warm launch's driver call: libcuda's ``cuLaunchKernel`` called through compiled code, not cuda-python.

Why not cuda-python. ``cuda.bindings.driver.cuLaunchKernel`` converts its eleven arguments in
Python-visible code on every call (the handle objects, the ``kernelParams`` helper object): about
half a microsecond of the ~4 us a launch costs from Python on an H200 host. Calling libcuda's
own symbol through ``ctypes`` with eleven arguments is slower still (a ctypes conversion per
argument: ~1.4 us measured for a do-nothing C function with this signature, against ~0.6 us with
every argument pre-built as a ctypes object). A warm launch's arguments are all fixed once it is
armed, though, so they are stored once in a small block of 64-bit words (``call_ir.py`` says
which), and compiled code reads them and calls the driver's function pointer. Two forms:

- a **thunk** (``thunks.py``): a function of no argument compiled with its block's address in
  it, called through a ctypes function pointer, which then converts nothing (~0.15 us over the
  driver's own work on the development VM). The form used wherever LLVM can make one;
- a **Numba trampoline** (``_launch_from_block``) that takes the block's address: one Python
  call of a Numba dispatcher with one int argument (~0.3 us there). It is compiled on its first
  use and cached on disk, signed (``_compiled``), so it costs a compilation once, a cache load
  once per process. It releases the GIL around the driver call (``nogil``), as cuda-python does
  and as ctypes does around a thunk: a launch into a full queue may block in the driver.

The same two forms make a cross-stream wait (``c_stream_waiter``: record the producer's event,
make the consumer wait on it) one call.

``Driver.launcher`` (``driver.py``) decides whether the C entry points are usable (a real driver that ``ctypes`` can open), else it
falls back to the api's Python method (the fake driver of the tests, an exotic install).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import inspect
import sys
import types as types_module

from numba import njit, types
from numba.extending import intrinsic

from numba_cube.backends.cuda.driver import call_ir, thunks
from numba_cube.backends.cuda.driver.call_ir import BLOCK_WORDS, WAIT_SHIFT

__all__ = ["c_launcher", "api_launcher", "c_stream_waiter", "api_stream_waiter", "c_entry_points",
           "failed_call", "warming", "warming_pair",
           "BLOCK_WORDS", "WAIT_SHIFT", "COMPILE_AFTER"]

#: Calls of a warm call's Python form (cuda-python) before its compiled form replaces it: the
#: first batch of thunks starts LLVM's JIT in a process that has not (~40 ms, once; each later
#: batch ~15 ms), and loading even a cached trampoline starts Numba's CPU target (~0.25 s), which
#: a short program must not pay for ~0.5 us per launch; a hot launch pays it once.
COMPILE_AFTER = 1000

#: The libcuda symbols the trampolines call.
C_SYMBOLS = ("cuLaunchKernel", "cuLaunchCooperativeKernel", "cuEventRecord", "cuStreamWaitEvent")

def _block_intrinsic(emit):
    """A Numba intrinsic of one int64 (a block's address) -> int32 whose code is ``emit``'s over
    the words at that address (``call_ir.py``: the same code the thunks are compiled with)."""
    def typer(typingctx, address):
        def codegen(context, builder, signature, args):
            return emit(builder, builder.inttoptr(args[0], call_ir.I64.as_pointer()))
        return types.int32(types.int64), codegen
    return intrinsic(typer)


_call_launch = _block_intrinsic(call_ir.emit_kernel_launch)
_call_cooperative = _block_intrinsic(call_ir.emit_cooperative_launch)
_call_record_and_wait = _block_intrinsic(call_ir.emit_record_and_wait)
_call_wait = _block_intrinsic(call_ir.emit_wait)


def _compiled(py_func):
    """``py_func`` compiled for one int64 (a block's address) -> int32 (a CUresult), releasing
    the GIL, cached on disk, signed. Each is compiled (or loaded from the cache) on first use: a
    process that never waits across streams never loads the waits'.

    Numba's own ``cache=True`` keeps its files unsigned where its locators say
    (``NUMBA_CACHE_DIR``, possibly shared, or beside the package) and unpickles what it finds
    there: a planted file would run when the first hot launch compiles this. So the dispatcher
    is given the signed cache of numba_cube's own helpers (``cache/helpers.py``: files MACed with
    this user's key, in ``config.cache_root()``, verified before unpickling), stamped with the
    text of this module and of ``call_ir.py`` (what the compiled code is made of); Numba's own
    locations are never read. The signature given compiles nothing yet, so nothing was read
    before the swap. Where no signed cache can be used, the trampoline is compiled in this
    process (a miss, never a failure)."""
    fn = _COMPILED.get(py_func)
    if fn is None:
        from numba.core.caching import NullCache

        from numba_cube.backends.cpu.cache.helpers import HelperCache   # one signing rule for all

        try:
            fn = njit(nogil=True, cache=True)(py_func)
        except RuntimeError:        # Numba found no cache directory it could use: no matter
            fn = njit(nogil=True)(py_func)
        stamp = _source_stamp()
        fn._cache = NullCache() if stamp is None else HelperCache(py_func, stamp)
        fn.compile(types.int32(types.int64))
        fn.disable_compile()
        _COMPILED[py_func] = fn
    return fn


@functools.lru_cache(maxsize=None)
def _source_stamp() -> bytes | None:
    """The SHA-256 of this module's and ``call_ir.py``'s text, or None without sources (worked
    out when the first trampoline is made, not at import: a launch's first import of this
    module must stay cheap)."""
    try:
        text = inspect.getsource(sys.modules[__name__]) + inspect.getsource(call_ir)
    except (OSError, TypeError):
        return None
    return hashlib.sha256(text.encode("utf-8")).digest()



_COMPILED: dict = {}


# Module-level functions without closures, so that Numba's disk cache finds them again in the
# next process (a closure's cell contents are part of the cache key).
def _launch_from_block(address):
    return _call_launch(address)


def _cooperative_from_block(address):
    return _call_cooperative(address)


def _record_and_wait_from_block(address):
    return _call_record_and_wait(address)


def _wait_from_block(address):
    return _call_wait(address)


def c_launcher(entry_point: int, function: int, grid, block, shared_bytes: int, stream: int,
               params: int, cooperative: bool = False, thunk: bool = True):
    """A zero-argument callable that calls the C function at ``entry_point`` (libcuda's
    ``cuLaunchKernel``, or ``cuLaunchCooperativeKernel`` when ``cooperative``) with these
    arguments and returns its ``CUresult`` as an int (0: success): a thunk (``thunks.py``)
    where one can be made and ``thunk`` allows it, else the Numba trampoline over a block of its
    own. The handles are passed as their integer values; the caller keeps the objects they name
    alive."""
    values = (entry_point, function, *grid, *block, shared_bytes, stream, params, 0)
    if thunk:
        made = thunks.make("cooperative" if cooperative else "launch", values)
        if made is not None:
            return made[0]
    words = (ctypes.c_uint64 * BLOCK_WORDS)(*values)
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


def c_stream_waiter(record_entry: int, wait_entry: int, event: int, producer: int, consumer: int,
                    thunk: bool = True):
    """``(record_and_wait, wait)``: zero-argument callables over one block that make stream
    ``consumer`` wait for ``event``, the first after recording ``event`` on stream ``producer``
    (libcuda's ``cuEventRecord`` at ``record_entry``, ``cuStreamWaitEvent`` at ``wait_entry``).
    Each returns 0, a failed record's CUresult, or a failed wait's shifted by ``WAIT_SHIFT``
    (the record was made then). Thunks where they can be made, as for ``c_launcher``. The caller
    keeps the event and streams alive."""
    values = (record_entry, wait_entry, event, producer, consumer)
    if thunk:
        made = thunks.make("waiter", values)
        if made is not None:
            return made
    words = (ctypes.c_uint64 * call_ir.PAIR_WORDS)(*values)
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
