"""``@cube.kernel``: a numba.cuda-style kernel, its id, options, and read and write sets.

``cube.kernel`` takes a plain function written in numba.cuda's dialect, or an existing
``cuda.jit`` dispatcher (numba_cube then uses its Python function and its options), and returns a
``Kernel``. Options are ``cuda.jit``'s (``cube.kernel(f, fastmath=True)``, see ``options.py``).
Generator and ``async`` functions are refused with a ``CompileError`` at ``cube.kernel``: calling
one only makes a generator, so as a kernel it would silently do nothing.

The kernel id names the compiled code, and every cache is keyed by it: the name plus a digest
(``identity.py``) of the source and code object, the closure cells, the globals the code reads
(arrays by content, device functions by their own digest, transitively) and the options; a
client's options (``boundscheck``, ``fastmath``) are not in it, every cache key holds them next
to it. It is
computed the first time it is asked for, which is the first launch or dry run in practice: the
point where numba.cuda compiles a kernel and freezes the globals it reads (and where a device
function defined *after* the kernel in its module already exists). From then on the kernel is
frozen: a later compile (a new signature) that finds a value the id covers changed (a global
rebound, a global array written, a device function replaced) raises ``CompileError`` instead of
compiling new code under the old id; ``cube.kernel(f)`` again makes a kernel with the new values.
A value with no faithful encoding (an arbitrary object) salts the id with a random token of this
``Kernel``: it then never shares a cache entry with another kernel, at the price of a different
id in each process.

Read and write sets (CONTRACT.md section 4.2) use a three-level fallback per array parameter:
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
import logging
import secrets
import threading
import types
from typing import Callable, Iterable

from ..errors import CompileError, LaunchArgumentError
from .identity import Fingerprint, changed_parts, fingerprint
from .options import kernel_options, launch_extensions
from .signatures import declared_signatures

__all__ = ["Kernel", "kernel", "resolve_access", "set_numba_style_launch"]

_logger = logging.getLogger("numba_cube")
_NOT_A_KERNEL = {inspect.CO_GENERATOR: "generator", inspect.CO_ASYNC_GENERATOR: "async generator",
                 inspect.CO_COROUTINE: "coroutine", inspect.CO_ITERABLE_COROUTINE: "coroutine"}

# What `kernel[count, dim](*args)` calls. The numba-style launch belongs to the runtime
# (runtime/client/eager.py), a layer above this one (it needs clients and copies host arrays), so it is
# handed in by numba_cube/__init__.py instead of imported from here.
_numba_style_launch: Callable | None = None


def set_numba_style_launch(launch: Callable) -> None:
    """Set what ``kernel[count, dim](*args)`` runs: ``launch(kernel, count, dim, *args,
    shared_bytes=n, stream=s)`` (``numba_cube/__init__.py`` sets the runtime's)."""
    global _numba_style_launch
    _numba_style_launch = launch


def _python_function(obj) -> Callable:
    """The Python function behind ``obj``: itself, or a numba dispatcher's ``py_func``."""
    py = getattr(obj, "py_func", None)
    if py is not None and callable(py):
        return py
    if inspect.isfunction(obj):
        return obj
    raise TypeError(f"cube.kernel needs a Python function or a numba.cuda dispatcher, got {type(obj).__name__}")


def _is_cuda_dispatcher(obj) -> bool:
    """Whether ``obj`` is numba-cuda's ``CUDADispatcher`` (by name: importing numba.cuda here
    would make every ``cube.kernel`` pay for it; the simulator's ``FakeCUDAKernel`` is not one)."""
    return any(c.__name__ == "CUDADispatcher" and c.__module__.startswith("numba.cuda")
               for c in type(obj).__mro__)


def _refuse_non_kernels(py_func) -> None:
    """A generator or coroutine function as a kernel: refused, naming the construct.

    ``CompileError`` (not a ``TypeError``): it is a construct the compile stage cannot run, the
    error the CPU translator raises for ``yield`` too, so callers catch one type for "this
    kernel cannot be compiled" whether it is found here or at the first launch.
    """
    code = py_func.__code__
    for flag, kind in _NOT_A_KERNEL.items():
        if code.co_flags & flag:
            raise CompileError(
                f"{py_func.__name__!r} is a {kind} function: calling it only creates a {kind} "
                "object, so as a kernel it would run nothing; a kernel is a plain 'def' that "
                "writes its results into arrays", construct=f"{kind} function",
                lineno=code.co_firstlineno, filename=code.co_filename)


class Kernel:
    """A kernel in numba.cuda's dialect, runnable by every numba_cube backend."""

    def __init__(self, fn, *, reads: Iterable[str] | None = None, writes: Iterable[str] | None = None,
                 name: str | None = None, **options):
        self.py_func = _python_function(fn)
        _refuse_non_kernels(self.py_func)
        #: the compile options (``cuda.jit``'s): given here, or read from a wrapped dispatcher
        self.options = types.MappingProxyType(kernel_options(fn, options))
        #: a wrapped dispatcher's explicit signatures (``cuda.jit("void(int32)")``), else None:
        #: launches resolve and convert their arguments against them (``signatures.py``)
        self.signatures = declared_signatures(fn)
        #: the wrapped numba-cuda ``CUDADispatcher`` when the kernel is exactly it (no options of
        #: its own), else None: the CUDA backend then compiles through it, so numba-cuda's
        #: inspection tools (``d.inspect_asm()``, ``d.overloads``) see what numba_cube launched
        self.dispatcher = fn if not options and _is_cuda_dispatcher(fn) else None
        #: numba-cuda's launch-time argument converters (``cuda.jit(extensions=...)``), run by
        #: numba-style launches (``runtime/client/eager.py``); None without any
        self.extensions = launch_extensions(fn, options)
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
        self._identity_options = {
            "reads": sorted(reads) if reads is not None else None,
            "writes": sorted(writes) if writes is not None else None,
            "cuda.jit": dict(self.options),
            "signatures": self.signatures.describe() if self.signatures is not None else None}
        self._salt = secrets.token_hex(8)      # mixed in only if a value cannot be fingerprinted
        self._frozen: Fingerprint | None = None
        self._freeze_lock = threading.Lock()
        functools.update_wrapper(self, self.py_func, updated=())

    # -- identity -----------------------------------------------------------------------------------
    @functools.cached_property
    def id(self) -> str:
        """``<name>-<12 hex digits>``, fixed at first use (see the module docstring). A cached
        property: after the first read it is a plain attribute, as cheap on the launch path."""
        frozen = self._fingerprint()
        digest = frozen.digest
        if frozen.opaque:
            _logger.debug("kernel %s: %s; its id is unique to this process",
                          self.name, "; ".join(frozen.opaque))
            digest = hashlib.sha256((digest + self._salt).encode()).hexdigest()
        return f"{self.name}-{digest[:12]}"

    @property
    def id_is_stable(self) -> bool:
        """Whether ``id`` is the same in every process: False when something the kernel reads has
        no faithful encoding and the id is salted for this process (on-disk caches then skip
        it: an entry would never be found again)."""
        return not self._fingerprint().opaque

    def _fingerprint(self) -> Fingerprint:
        with self._freeze_lock:
            if self._frozen is None:
                self._frozen = fingerprint(self.py_func, self._identity_options)
            return self._frozen

    def check_frozen(self) -> None:
        """Raise ``CompileError`` if a value the id was computed from has changed since.

        Backends call it before each compile: compiling changed globals under the old id would
        give two different codes one name. It costs one fingerprint, little next to a compile."""
        frozen = self._fingerprint()
        changed = changed_parts(frozen, fingerprint(self.py_func, self._identity_options))
        if changed:
            raise CompileError(
                f"kernel {self.name}: {', '.join(changed)} changed after the kernel was first "
                "used; numba_cube freezes what a kernel reads at its first use (as numba.cuda "
                "does at its first compile). Make the kernel again (cube.kernel(...)) to compile "
                "the new values", construct=f"{changed[0]} changed after first use")

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
        """``kernel[count, dim](*args)``: numba-style launch on the current client (``cube.use``);
        ``kernel[count, dim, stream]`` launches on ``stream`` (a ``cube.StreamId``; ``0`` or
        ``None``: the launch's usual stream; a numba-cuda or CuPy stream object is synchronized
        first; ``runtime/client/eager.py`` says why),
        ``kernel[count, dim, stream, shared_bytes]`` also sizes its dynamic shared memory, as in
        numba.cuda."""
        if not isinstance(config, tuple) or len(config) not in (2, 3, 4):
            raise LaunchArgumentError("launch configuration is kernel[count, dim] or "
                                      "kernel[count, dim, stream, shared_bytes]")
        count, dim = config[0], config[1]
        # numba's third value is the stream. It must reach the launch, or be refused there: a
        # stream dropped here would put the launch on another queue than the caller ordered.
        stream = config[2] if len(config) >= 3 else None
        # numba's fourth value sizes the kernel's dynamic shared memory (the bytes every
        # cuda.shared.array(0, dtype) views). It must reach the launch: without it the kernel
        # gets no such memory, and on a GPU its first access is an illegal address. The client
        # validates it on this thread, before anything is queued.
        shared_bytes = config[3] if len(config) == 4 else 0
        return functools.partial(_numba_style_launch, self, count, dim, shared_bytes=shared_bytes,
                                 stream=stream)

    def __call__(self, *args, **kwargs):
        raise TypeError(f"kernel {self.name} must be launched: kernel[count, dim](*args) or "
                        f"client.launch(kernel, count, dim, *args)")

    def __repr__(self) -> str:
        # Without fixing the id: a repr (a debugger, a log line) must not freeze the kernel.
        return f"<cube.Kernel {self.__dict__.get('id') or self.name + ' (id not fixed yet)'}>"


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


def kernel(fn=None, *, reads: Iterable[str] | None = None, writes: Iterable[str] | None = None,
           **options):
    """Make a numba_cube kernel: ``@cube.kernel``, ``@cube.kernel(writes=("out",))``,
    ``@cube.kernel(fastmath=True)`` (``cuda.jit``'s options) or
    ``cube.kernel(existing_cuda_jit_dispatcher)``."""
    if fn is None:
        return lambda f: kernel(f, reads=reads, writes=writes, **options)
    if isinstance(fn, Kernel):
        if reads is None and writes is None and not options:
            return fn
        raise TypeError(f"{fn!r} is already a kernel; make a new one from its function "
                        "(cube.kernel(k.py_func, ...)) to give it reads=, writes= or options")
    return Kernel(fn, reads=reads, writes=writes, **options)
