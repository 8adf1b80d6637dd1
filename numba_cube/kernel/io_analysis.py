"""Which array parameters a kernel reads and which it writes ("IO analysis").

The runtime needs, per buffer argument of a launch, whether the kernel may write it (to know
whose contents change, and which buffers a failed launch leaves stale) and whether it may read
it (a buffer that is only written is a pure output: launching into a failed buffer that way
repairs it). ``analyse_io`` answers from the kernel's Python function alone::

    @cuda.jit
    def vec_add(a, b, out, n):
        i = cuda.grid(1)
        if i < n:
            out[i] = a[i] + b[i]

    analyse_io(vec_add.py_func, (1, 1, 1, None))     # -> ("r", "r", "w", "")

Per parameter: ``"r"`` only read, ``"w"`` only written, ``"rw"`` both, ``""`` an array never
touched (or a scalar parameter), or ``IO_UNKNOWN`` (None) where the analysis cannot tell, e.g.
the array is handed to a function it does not know. The caller treats unknown as "read and
written" (CONTRACT.md section 4.2: a missed write is a silent wrong number, an extra one is only
noise), so the analysis is conservative in that direction everywhere.

How: Numba's untyped IR (``run_frontend``: no typing, no GPU, no source text needed), an alias
analysis that follows views of the parameters (slices, rows of a 2-D array, ``reshape``, ``.T``,
...) and recursion into device functions. Modules: ``io_walk`` (aliases and effects),
``io_calls`` (calls, device functions), ``io_rules`` (what known callees do; anything else is
unknown), ``io_cuda`` (numba.cuda's builtins, by identity, named by path), ``io_ir`` (IR
queries and records), ``io_typed`` (``confirm_writes``: an exact, slower check of writes).
Flow-insensitive: "w" means "may be written somewhere", not "every element is overwritten".
About 2-8 ms per kernel, mostly ``run_frontend``, once: results are memoised per (function,
its fingerprint, ndims). The fingerprint (``identity.py``: what the function reads, device
functions included) is in the key because the IR resolves globals when it is built: a device
function rebound in its module must not be answered from the analysis of the old one. A
repeated call costs one fingerprint, a fraction of a millisecond.

Failures of the analysis itself never reach the caller: they are logged at debug level on the
``numba_cube`` logger and the function's array parameters are reported unknown.
"""

from __future__ import annotations

import functools
import logging
import operator
import threading
import types as pytypes
from typing import Sequence

from .identity import fingerprint
from .io_ir import TUPLE, Summary
from .io_walk import walk

__all__ = ["analyse_io", "IO_UNKNOWN", "TUPLE"]

IO_UNKNOWN = None
"""The entry of a parameter whose reads and writes the analysis cannot tell."""

_logger = logging.getLogger("numba_cube")
_MAX_DEPTH = 16            # nesting of device-function calls followed before giving up
_CACHE_SIZE = 1024         # (function, fingerprint, ndims) kept; holds the functions alive
_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08
# Per thread: the device functions being analysed (recursion guard), and the fingerprints
# computed during the current analysis (each function's once).
_local = threading.local()


def analyse_io(py_func, ndims: Sequence[int | None]) -> tuple[str | None, ...]:
    """Per parameter of ``py_func``: "r", "w", "rw", "" or ``IO_UNKNOWN``.

    ``py_func`` is the kernel's Python function (a ``cuda.jit`` dispatcher is unwrapped to its
    ``.py_func``). ``ndims`` gives, per parameter, the ndim of the array passed there, or None
    for a scalar parameter; the answer depends on it (``m[i]`` is a row view of a 2-D array but
    an element of a 1-D one).

    Raises ``TypeError`` when ``py_func`` is not a Python function and ``ValueError`` when
    ``ndims`` does not have one entry per parameter: those are mistakes of the caller. Anything
    that goes wrong inside the analysis yields ``IO_UNKNOWN`` entries instead.
    """
    func = _unwrap(py_func)
    if not isinstance(func, pytypes.FunctionType):
        raise TypeError(f"analyse_io needs a Python function, got {py_func!r}")
    code = func.__code__
    n_params = (code.co_argcount + code.co_kwonlyargcount
                + bool(code.co_flags & _CO_VARARGS) + bool(code.co_flags & _CO_VARKEYWORDS))
    key = tuple(None if nd is None else operator.index(nd) for nd in ndims)
    if len(key) != n_params:
        raise ValueError(f"{func.__qualname__} has {n_params} parameters, "
                         f"got {len(key)} ndims")
    if any(nd is not None and nd < 0 and nd != TUPLE for nd in key):
        # Negative entries are internal markers (io_ir.ANY_NDIM, io_ir.INDEX); TUPLE is public:
        # the runtime passes it for a tuple argument.
        raise ValueError(f"negative ndim in {key!r}")
    outermost = getattr(_local, "digests", None) is None
    if outermost:
        _local.digests = {}
    try:
        return _answer(func, _digest(func), key)
    finally:
        if outermost:
            _local.digests = None


def _digest(func: pytypes.FunctionType) -> str:
    """``func``'s fingerprint, once per analysis; a unique token when it cannot be computed
    (the answer is then never reused, rather than possibly stale)."""
    memo = getattr(_local, "digests", None)
    if memo is not None:
        hit = memo.get(id(func))
        if hit is not None and hit[0] is func:
            return hit[1]
    try:
        digest = fingerprint(func).digest
    except Exception:                                  # noqa: BLE001 - never break the analysis
        _logger.debug("no fingerprint for %r", func, exc_info=True)
        digest = object()
    if memo is not None:
        memo[id(func)] = (func, digest)
    return digest


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _answer(func: pytypes.FunctionType, digest, ndims: tuple) -> tuple[str | None, ...]:
    summary = _summarise_callee(func, ndims)
    effects = summary.effects if summary is not None else _all_unknown(ndims).effects
    # Scalar parameters are "" by contract (internally they may carry record writes).
    return tuple("" if nd is None else eff for nd, eff in zip(ndims, effects))


def _unwrap(obj):
    """A dispatcher (cuda.jit, njit, the CUDA simulator's kernel) to its Python function."""
    py_func = getattr(obj, "py_func", None)
    return py_func if isinstance(py_func, pytypes.FunctionType) else obj


def _summarise_callee(func: pytypes.FunctionType, ndims: tuple) -> Summary | None:
    """The summary of ``func``, or None where following it would recurse or nest too deep
    (the caller then reports the arrays it passed as unknown)."""
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    if func in stack or len(stack) >= _MAX_DEPTH:
        return None
    stack.append(func)
    try:
        return _summarise(func, _digest(func), ndims)
    finally:
        stack.pop()


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _summarise(func: pytypes.FunctionType, digest, ndims: tuple) -> Summary:
    # Cached without the recursion stack in the key: a summary computed while a cycle was cut
    # short reports the cycle's arrays as unknown, which stays a correct answer elsewhere.
    try:
        code = func.__code__
        if code.co_flags & (_CO_VARARGS | _CO_VARKEYWORDS) or code.co_kwonlyargcount:
            # *args arrive as a tuple the walk does not map to entries of ``ndims``.
            return Summary((IO_UNKNOWN,) * len(ndims))
        from numba.core.compiler import run_frontend
        fir = run_frontend(func)
        return walk(fir, ndims, _summarise_callee)
    except Exception:
        _logger.debug("IO analysis of %r failed; its arrays are reported unknown",
                      getattr(func, "__qualname__", func), exc_info=True)
        return _all_unknown(ndims)


def _all_unknown(ndims: tuple) -> Summary:
    # Scalar parameters too: one may be a record the function writes through.
    return Summary((IO_UNKNOWN,) * len(ndims))


def _clear_cache() -> None:
    """Forget every memoised result (tests; a redefined kernel is a new function anyway)."""
    _answer.cache_clear()
    _summarise.cache_clear()

