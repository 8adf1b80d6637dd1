"""An exact, slower check of writes: the "readonly probe".

``analyse_io`` is cheap and conservative but knows aliasing only through the rules it was
given. Numba's type inference knows all of it: it refuses a store into a readonly array, and
into any view taken of one (``a[1:]``, ``a.reshape(...)``, an argument of a callee it types).
So: type the function once as is, then once per array argument with that argument's type made
``readonly``; if only the second fails, the function writes that argument.

Only type inference runs (no LLVM for the function itself; typing a call to another jitted
function does compile that callee), about 0.05-0.85 s per signature, so the answer is memoised
per (function, argument types). It says nothing about reads. It is meant for the CPU backend's
generated ``njit`` function, whose argument types are known at launch; call it lazily, where
``analyse_io`` says "w" and exact visibility is asked for.
"""

from __future__ import annotations

import functools
import logging
from typing import Sequence

__all__ = ["confirm_writes"]

_logger = logging.getLogger("numba_cube")


def confirm_writes(py_func, argtypes: Sequence) -> tuple[bool | None, ...]:
    """Per argument: True (written), False (not written) or None (not a mutable array, or the
    function does not type even with plain arguments, so nothing can be told).

    ``py_func`` is a Python function written for ``numba.njit`` (a dispatcher is unwrapped);
    ``argtypes`` its Numba argument types, e.g. ``[numba.typeof(x) for x in args]``. A typing
    failure caused by readonly-ness for another reason (a callee that does not accept readonly
    arrays) also reads as "written", the safe direction. Never raises for analysis failures.
    """
    func = getattr(py_func, "py_func", py_func)
    return _confirm(func, tuple(argtypes))


@functools.lru_cache(maxsize=256)
def _confirm(func, argtypes: tuple) -> tuple[bool | None, ...]:
    from numba.core import types

    unknown = (None,) * len(argtypes)
    try:
        if not _types(func, argtypes):
            return unknown
        result = []
        for k, ty in enumerate(argtypes):
            if not isinstance(ty, types.Array) or not ty.mutable:
                result.append(None)
                continue
            trial = argtypes[:k] + (ty.copy(readonly=True),) + argtypes[k + 1:]
            result.append(not _types(func, trial))
        return tuple(result)
    except Exception:
        _logger.debug("readonly probe of %r failed", getattr(func, "__qualname__", func),
                      exc_info=True)
        return unknown


def _types(func, argtypes: tuple) -> bool:
    """Whether Numba's type inference accepts ``func`` for ``argtypes``."""
    from numba.core import errors
    from numba.core.compiler import run_frontend
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.registry import cpu_target
    from numba.core.typed_passes import type_inference_stage

    # Type inference mutates the shared typing context (and may compile callees): hold the
    # lock Numba's own compiler holds for the same work.
    with global_compiler_lock:
        typingctx, targetctx = cpu_target.typing_context, cpu_target.target_context
        typingctx.refresh()
        targetctx.refresh()
        fir = run_frontend(func)         # fresh IR: type inference annotates what it is given
        try:
            type_inference_stage(typingctx, targetctx, fir, argtypes, None)
        except errors.TypingError:
            return False
    return True
