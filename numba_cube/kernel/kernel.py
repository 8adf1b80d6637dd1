"""``@cube.kernel``: a numba.cuda-style kernel, an id, and its read and write sets.

``cube.kernel`` takes a plain function written in numba.cuda's dialect, or an existing
``cuda.jit`` dispatcher (numba_cube then uses its Python function), and returns a ``Kernel``.
The kernel id is stable across processes: the function's name plus a hash of its source text and
the options that change what it computes.

Read and write sets (runtime.md section 4.2) use a three-level fallback per array parameter:
what the IO analysis on Numba IR says, else what the caller declared (``reads=``/``writes=``),
else "assumed written" and "assumed read". The direction is deliberate: missing a buffer the
kernel wrote hands the caller stale bytes silently; naming one it only read makes a later read of
it fail loudly. A pure output (written, never read) is not in the read set, which is exactly what
lets a relaunch into a failed output repair it.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from typing import Callable, Iterable

from ..errors import LaunchArgumentError

__all__ = ["Kernel", "kernel", "resolve_access"]


def _python_function(obj) -> Callable:
    """The Python function behind ``obj``: itself, or a numba dispatcher's ``py_func``."""
    py = getattr(obj, "py_func", None)
    if py is not None and callable(py):
        return py
    if inspect.isfunction(obj):
        return obj
    raise TypeError(f"cube.kernel needs a Python function or a numba.cuda dispatcher, got {type(obj).__name__}")


def _source_hash(py_func) -> str:
    h = hashlib.sha256()
    try:
        h.update(inspect.getsource(py_func).encode())
    except (OSError, TypeError):
        # No source (e.g. made by exec): the bytecode and constants still identify the function
        # within one interpreter version.
        code = py_func.__code__
        h.update(code.co_code)
        h.update(repr(code.co_consts).encode())
    h.update(py_func.__module__.encode() if py_func.__module__ else b"")
    return h.hexdigest()


class Kernel:
    """A kernel in numba.cuda's dialect, runnable by every numba_cube backend."""

    def __init__(self, fn, *, reads: Iterable[str] | None = None, writes: Iterable[str] | None = None,
                 name: str | None = None):
        self.py_func = _python_function(fn)
        self.name = name or self.py_func.__name__
        sig = inspect.signature(self.py_func)
        self.params: tuple[str, ...] = tuple(sig.parameters)
        self.declared_reads = frozenset(reads) if reads is not None else None
        self.declared_writes = frozenset(writes) if writes is not None else None
        for declared in (self.declared_reads, self.declared_writes):
            unknown = (declared or frozenset()) - set(self.params)
            if unknown:
                raise ValueError(f"kernel {self.name} has no parameter(s) {sorted(unknown)}; "
                                 f"its parameters are {list(self.params)}")
        options = f"reads={sorted(reads) if reads is not None else None};writes={sorted(writes) if writes is not None else None}"
        digest = hashlib.sha256((_source_hash(self.py_func) + options).encode()).hexdigest()
        self.id = f"{self.name}-{digest[:12]}"
        functools.update_wrapper(self, self.py_func, updated=())

    # -- analysis ---------------------------------------------------------------------------------
    def io(self, *example_args) -> dict:
        """Per parameter, what the IO analysis says: ``"r"``, ``"w"``, ``"rw"``, ``""`` (not
        touched, or a scalar) or ``None`` (unknown). Arrays and handles give their ``ndim``."""
        if len(example_args) != len(self.params):
            raise LaunchArgumentError(
                f"kernel {self.name} takes {len(self.params)} arguments, got {len(example_args)}")
        ndims = tuple(getattr(a, "ndim", None) if hasattr(a, "shape") else None for a in example_args)
        return dict(zip(self.params, _analyse(self.py_func, ndims)))

    # -- launches -----------------------------------------------------------------------------------
    def __getitem__(self, config) -> Callable:
        """``kernel[count, dim](*args)``: numba-style launch on the current client (``cube.use``)."""
        if not isinstance(config, tuple) or len(config) not in (2, 3, 4):
            raise LaunchArgumentError("launch configuration is kernel[count, dim]")
        count, dim = config[0], config[1]
        from ..runtime.eager import launch_eager

        return functools.partial(launch_eager, self, count, dim)

    def __call__(self, *args, **kwargs):
        raise TypeError(f"kernel {self.name} must be launched: kernel[count, dim](*args) or "
                        f"client.launch(kernel, count, dim, *args)")

    def __repr__(self) -> str:
        return f"<cube.Kernel {self.id}>"


def _analyse(py_func, ndims) -> tuple:
    from .io_analysis import analyse_io

    return tuple(analyse_io(py_func, ndims))


def resolve_access(kern: Kernel, ndims: tuple) -> tuple[tuple[bool, bool], ...]:
    """Per parameter ``(read, written)`` after the three-level fallback; scalars are ``(False, False)``."""
    answers = _analyse(kern.py_func, ndims)
    out = []
    for name, ndim, answer in zip(kern.params, ndims, answers):
        if ndim is None:
            out.append((False, False))
            continue
        if answer is not None:
            out.append(("r" in answer, "w" in answer))
            continue
        # Level 2: what the caller declared, per direction; level 3: assume it.
        written = name in kern.declared_writes if kern.declared_writes is not None else True
        if kern.declared_reads is not None:
            read = name in kern.declared_reads
        else:
            # "Pure output" needs positive knowledge: declared written and not declared read only
            # counts when the caller declared reads too. Otherwise assume read.
            read = True
        out.append((read, written))
    return tuple(out)


def kernel(fn=None, *, reads: Iterable[str] | None = None, writes: Iterable[str] | None = None):
    """Make a numba_cube kernel: ``@cube.kernel``, ``@cube.kernel(writes=("out",))`` or
    ``cube.kernel(existing_cuda_jit_dispatcher)``."""
    if fn is None:
        return lambda f: Kernel(f, reads=reads, writes=writes)
    if isinstance(fn, Kernel):
        return fn
    return Kernel(fn, reads=reads, writes=writes)
