"""The two entry points of a generated kernel, ``<name>__par`` and ``<name>__ser``, around its
chunk function (``emit/module.py`` prints the chunk; the runtime calls these, or the chunk itself
as the serial twin: ``server._compile_twin``).

- ``<name>__par``: ``njit(parallel=True)``, a ``prange`` over at most ``CHUNKS`` pieces of the
  launch, each a call of the chunk; for a kernel that can raise, each piece runs under
  ``<name>__guard`` in ``<name>__par_status``, which ``<name>__par`` calls
  (``_guarded_parallel`` says why);
- ``<name>__ser``: ``njit(parallel=False)``, the chunk called once for the whole launch.
"""

from __future__ import annotations

from typing import Callable

import numba

from numba_cube.backends.cpu.emit.unit_code import Writer

__all__ = ["emit", "CHUNKS", "PIECE_SHIFT", "RERUN_DID_NOT_RAISE"]

#: how many pieces the parallel variant cuts a launch into: one per thread of Numba's pool.
#: Numba's prange hands each thread one contiguous share of the iterations (a static schedule),
#: so more pieces than threads balance nothing and cost a call each, and for a cube kernel the
#: allocation of its shared, local and replica arrays each (with 256 pieces, stumpy's one-launch-
#: per-row kernel spent a seventh of its time on them at 2 threads). A literal of the generated
#: text, which says so in its key (``translate.translation_options``): ``numba.get_num_threads()``
#: inside the kernel would make it uncacheable (Numba reaches the threading layer through a
#: dynamic global). A process that lowers ``set_num_threads`` gets several pieces per thread.
CHUNKS = max(1, numba.config.NUMBA_NUM_THREADS)


def emit(w: Writer, name: str, work: str, args: str, may_raise: bool,
         decorator: Callable[[bool | None], str]) -> None:
    """Print the entry points of kernel ``name`` (``work``: the expression of the launch's size
    in pieces; ``args``: the geometry and parameters; ``decorator(parallel)``: the ``njit``
    line). A kernel that ``may_raise`` gets the guarded parallel form (``_guarded_parallel``)."""
    chunk = f"{name}__chunk"
    if may_raise:
        _guarded_parallel(w, name, work, args, decorator)
    else:
        w.line(decorator(True))
        with w.indent(f"def {name}__par({args}):"):
            w.line(f"__nchunks = min({work}, {CHUNKS})")
            with w.indent("for __c in __prange(__nchunks):"):
                # prange's index is unsigned: cast, or the chunk would be compiled a
                # second time for a (uint64, ...) signature
                w.line(f"{chunk}(__np.int64(__c), __nchunks, {args})")
        w.line()
    w.line(decorator(False))
    with w.indent(f"def {name}__ser({args}):"):
        with w.indent(f"if {work} > 0:"):
            # int64, not literals: the parallel variant must reuse this compiled chunk
            w.line(f"{chunk}(__np.int64(0), __np.int64(1), {args})")
    w.line()


#: a failed piece's report from ``<name>__par_status``: ``piece * PIECE_SHIFT + pieces``
PIECE_SHIFT = 1 << 32


def _guarded_parallel(w: Writer, name: str, work: str, args: str, decorator) -> None:
    """The parallel entry points for kernels that may raise.

    Numba does not propagate an exception raised inside a prange body (numba issues #2811,
    #9380): the call returns "a result with an exception set", or nothing at all. So each
    chunk runs under try/except in ``<name>__guard`` and reports failure in a status array.
    ``<name>__par_status`` returns the first failed piece (``piece * PIECE_SHIFT + pieces``),
    or -1: the runtime then calls the chunk of that piece itself to raise its exception
    (``twin_runners.twin_runner``), because an exception leaving a jitted function through a nested
    jitted call leaks an allocation (numba/numba#10783: 48 bytes per failing launch).
    ``<name>__par`` does the same inside, for direct callers. (Only done when needed: the
    guard costs a second optimisation of the kernel body at compile time.)
    """
    chunk, guard = f"{name}__chunk", f"{name}__guard"
    w.line(decorator(None))
    with w.indent(f"def {guard}(__c, __nchunks, {args}):"):
        # The chunk's arguments as one tuple, built before ``try``, the call spreading it:
        # CPython compiles a call of more than 30 arguments as a list turned into a tuple
        # (LIST_TO_TUPLE), which Numba's frontend cannot type inside ``try`` ("Unsupported
        # op-code encountered: list_to_tuple"). The guard then did not compile, and a kernel
        # with 23 or more parameters that can raise (stumpy's has 26) silently lost its
        # parallel variant: every launch ran on one core.
        w.line(f"__call = (__c, __nchunks, {args})")
        with w.indent("try:"):
            w.line(f"{chunk}(*__call)")
        with w.indent("except Exception:"):
            w.line("return 1")
        w.line("return 0")
    w.line()
    w.line(decorator(True))
    with w.indent(f"def {name}__par_status({args}):"):
        w.line(f"__nchunks = min({work}, {CHUNKS})")
        w.line("__failed = __np.zeros(__nchunks, __np.uint8)")
        with w.indent("for __c in __prange(__nchunks):"):
            w.line(f"__failed[__c] = {guard}(__np.int64(__c), __nchunks, {args})")
        with w.indent("for __c in range(__nchunks):"):
            with w.indent("if __failed[__c]:"):
                w.line(f"return __c * {PIECE_SHIFT} + __nchunks")
        w.line("return -1")
    w.line()
    w.line(decorator(False))
    with w.indent(f"def {name}__par({args}):"):
        w.line(f"__failed = {name}__par_status({args})")
        with w.indent("if __failed >= 0:"):
            w.line(f"{chunk}(__np.int64(__failed // {PIECE_SHIFT}), "
                   f"__np.int64(__failed % {PIECE_SHIFT}), {args})")
            w.line(f"raise RuntimeError({RERUN_DID_NOT_RAISE!r})")
    w.line()


#: what a parallel launch raises when its failed piece, run again alone, does not fail
RERUN_DID_NOT_RAISE = "a kernel chunk raised in the parallel region but not when re-run serially"
