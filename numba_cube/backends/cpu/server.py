"""The CPU backend's mechanism: memory as NumPy bytes, kernels as generated ``njit`` functions.

Compiling has two levels. ``build_program`` translates a kernel once per (kernel id, compile
flags) into a generated module holding a ``parallel`` (prange over cubes) and a ``serial`` twin;
then each argument signature is compiled explicitly with ``dispatcher.compile(sig)``, which is
what a dry run needs (compile without running) and gives the entry point for that signature
directly, so a launch skips Numba's type dispatch. An array argument is the binding's NumPy view
with its strides (``HostBackend.strided_array`` for F-ordered, strided and broadcast bindings),
typed with the layout ``numba.typeof`` would give it (``arg_type``): C, F and A compile apart.

Which twin a launch uses is measured (``twin_choice.py``, run by ``twin_runners.py``): ``cache_extras``
names the prior's twin,
compiled with the launch's signature, and the artifact times its runs and switches to the other
twin (compiled at its first use) where that is faster for the kernel at that launch size.
``NUMBA_CUBE_SERIAL_UNITS`` in the environment fixes the old rule (serial below that many units).

Compile flags (``cpu_flags``): ``boundscheck`` and ``fastmath``, from the client's options, else
the kernel's (``cuda.jit``'s options, ``kernel.options``), else the defaults, and the error model
(Python's for ``debug=True`` kernels, NumPy's otherwise, as numba-cuda chooses); Numba's own
``NUMBA_BOUNDSCHECK`` overrides both, as it overrides every ``@jit(boundscheck=...)``. The default
of ``boundscheck`` is on (``config.BOUNDSCHECK_DEFAULT``, issue 30): unchecked, a wild index is a
wild access into this process's memory, a crash at some later, unrelated point. Only a False
given somewhere turns it off; None (numba-cuda's "not given") is not one. Before each
compile the kernel checks that nothing its id covers has changed (``Kernel.check_frozen``): the
program cache is keyed by that id.

Threading layer: stream workers call parallel kernels from several Python threads at once.
Numba's ``workqueue`` layer aborts the process when that happens, so this backend selects ``omp``
(or ``tbb``) before the first parallel call, and refuses to start, with the reason, when neither
can be loaded.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

import numba
import numpy as np
from numba import types

from ... import config
from ...errors import CompileError
from ...kernel.options import resolve
from numba_cube.runtime.streams.channel import InlineChannel
from numba_cube.runtime.launch.geometry import MAX_DYNAMIC_SHARED_BYTES
from numba_cube.runtime.client.interrupts import deferred_interrupt
from numba_cube.runtime.server import DeviceServer
from ..base import HostBackend
from numba_cube.backends.cpu.kernel_runtime import bounds as bounds_runtime, fp16
from numba_cube.backends.cpu.emit import linemarks
from numba_cube.backends.cpu.twin_choice import PRIOR_UNITS, fixed_twin
from numba_cube.backends.cpu.twin_runners import (ChunkEntry, StatusEntry, measured_runner,
                                                  twin_runner)

__all__ = ["CpuBackend", "make_cpu_server", "select_threading_layer", "cpu_flags"]

log = logging.getLogger("numba_cube")

_layer_lock = threading.Lock()
_layer: str | None = None


def select_threading_layer() -> str:
    """Pick a threading layer that tolerates concurrent callers; idempotent."""
    global _layer
    with _layer_lock:
        if _layer is not None:
            return _layer
        wanted = os.environ.get("NUMBA_THREADING_LAYER", "").lower()
        if wanted == "workqueue":
            raise RuntimeError("NUMBA_THREADING_LAYER=workqueue aborts the process when two streams run "
                               "parallel kernels at once; use 'omp' or 'tbb' with numba_cube")
        candidates = [wanted] if wanted in ("omp", "tbb") else ["omp", "tbb"]
        for name in candidates:
            try:
                if name == "omp":
                    from numba.np.ufunc import omppool  # noqa: F401 - loads libgomp or fails
                else:
                    from numba.np.ufunc import tbbpool  # noqa: F401
            except ImportError as exc:
                log.debug("threading layer %s unavailable: %s", name, exc)
                continue
            numba.config.THREADING_LAYER = name
            _layer = name
            return name
        raise RuntimeError("neither Numba's 'omp' nor 'tbb' threading layer can be loaded (libgomp "
                           "missing; `pip install tbb` provides the other): numba_cube's CPU backend "
                           "needs one that allows concurrent parallel calls")


#: [True] in a process made by ``os.fork()`` from one that imported this module. Numba's
#: ``omp`` layer kills such a child at its first parallel region ("fork() called from a process
#: already using GNU OpenMP"), so there every launch runs its kernel's serial twin.
_forked_child = [False]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _forked_child.__setitem__(0, True))

_ARRAY_TYPES: dict = {}


def _array_type(dtype: np.dtype, ndim: int, layout: str = "C"):
    key = (dtype, ndim, layout)
    t = _ARRAY_TYPES.get(key)
    if t is None:
        t = _ARRAY_TYPES[key] = types.Array(fp16.scalar_type(dtype), ndim, layout)
    return t


def _layout_of(view: np.ndarray) -> str:
    """The layout ``numba.typeof`` gives ``view`` (``numpy_support.map_layout``): a binding's view
    has its strides (F-ordered, transposed, strided, broadcast), and the kernel is compiled for
    that layout as numba-cuda compiles it, never for C over bytes that are not C-ordered."""
    flags = view.flags
    return "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"


def cpu_flags(kernel, client_options) -> tuple[bool, bool | tuple[str, ...], str]:
    """``(boundscheck, fastmath, error_model)`` for compiling ``kernel`` on a client with
    ``client_options``.

    Of ``cuda.jit``'s options, ``fastmath`` means on the CPU what it means to numba-cuda (LLVM's
    fast-math flags; ``True`` or a set of flag names, as ``njit`` takes them) and ``boundscheck``
    what it means to ``njit`` (an out-of-bounds index raises ``IndexError``), but on unless a
    client or kernel option, ``NUMBA_CUBE_BOUNDSCHECK`` or ``NUMBA_BOUNDSCHECK`` says False:
    numba-cuda's ``cuda.jit(boundscheck=False)`` is such a False. ``debug``: numba-cuda
    reports a kernel's exceptions only with ``debug=True`` (the CPU backend always reports
    them), and compiles a debug kernel with
    Python's error model, where a division by zero raises ``ZeroDivisionError`` instead of giving
    ``inf``/``nan``/0 as NumPy's model does: the same switch here (``error_model``).
    ``opt``, ``lineinfo``, ``max_registers``, ``launch_bounds``, ``lto``, ``inline``,
    ``forceinline``, ``shared_memory_carveout``, ``cache`` steer the GPU compile (or numba-cuda's
    own cache) and have no CPU meaning: accepted and ignored. ``link`` names PTX or CUDA C files,
    which the CPU cannot run: ``CompileError``.
    """
    kernel_options = kernel.options
    if kernel_options.get("link"):
        raise CompileError(f"kernel {kernel.name} links {list(kernel_options['link'])} "
                           "(cuda.jit(link=...)): PTX and CUDA C files cannot run on the CPU backend",
                           construct="link=")
    given = resolve("boundscheck", kernel_options, client_options)
    if given is None:
        # nothing said by the client or the kernel: the environment, else on (a client made
        # by cube.client has the environment's value among its options already)
        from_env = config.boundscheck_forced()
        boundscheck = config.BOUNDSCHECK_DEFAULT if from_env is None else from_env
    else:
        boundscheck = bool(given)
    forced = config.numba_boundscheck()
    if forced is not None and forced != boundscheck:
        if boundscheck:
            raise CompileError(
                f"kernel {kernel.name}: bounds checking was asked for, but NUMBA_BOUNDSCHECK=0 "
                "makes Numba compile every function without it; unset NUMBA_BOUNDSCHECK",
                construct="boundscheck=True under NUMBA_BOUNDSCHECK=0")
        # Numba checks anyway; the translation must know, or the parallel variant would drop
        # the IndexError raised inside its prange (translate.py: only checked kernels catch).
        boundscheck = True
    fastmath = resolve("fastmath", kernel_options, client_options, False)
    if not isinstance(fastmath, bool):
        fastmath = tuple(sorted(fastmath))             # njit's set of flag names, hashable
    error_model = "python" if kernel_options.get("debug") else "numpy"
    return boundscheck, fastmath, error_model


class CpuBackend(HostBackend):
    name = "cpu"

    #: client options ``compile`` understands (``cube.client("cpu", boundscheck=True)``)
    compile_options = frozenset({"boundscheck", "fastmath"})
    #: dynamic shared memory is a run-time buffer here (lower/dynamic_shared.py); the portable limit keeps
    #: a launch to what some GPU can run
    max_dynamic_shared_bytes = MAX_DYNAMIC_SHARED_BYTES

    def __init__(self):
        self._programs: dict = {}
        self._first_block: dict = {}      # (kernel id, flags) -> the block shape specialized for
        # Read once: cache_extras runs on every launch. Set, it fixes the twin by unit count;
        # unset, each kernel's runs choose (twin_choice.py), from the same prior.
        self.fixed_serial_units = (config.get_int("NUMBA_CUBE_SERIAL_UNITS", PRIOR_UNITS, 0)
                                   if os.environ.get("NUMBA_CUBE_SERIAL_UNITS") else None)

    def arg_type(self, value):
        if isinstance(value, np.ndarray):
            return _array_type(value.dtype, value.ndim, _layout_of(value))
        if isinstance(value, np.float16):
            return fp16.HALF                 # Numba's own float16 does not compile on the CPU
        return numba.typeof(value)

    def cache_extras(self, count, dim) -> tuple:
        # The block shape: a kernel's first shape gets a module of its own (_program); a flat
        # kernel's entries for two shapes share one compiled function.
        block = dim.as_tuple()
        if _forked_child[0]:
            return ("serial", block)        # see _forked_child
        if count.is_dynamic:
            return ("parallel", block)
        units = count.num_elems * dim.num_elems
        fixed = self.fixed_serial_units
        # One cube has one twin worth running (the parallel one divides cubes): not measured.
        return (fixed_twin(units, count.num_elems, PRIOR_UNITS if fixed is None else fixed),
                block, fixed is None and count.num_elems > 1)

    def _program(self, kernel, flags: tuple, block: tuple):
        """The program for launches of ``kernel`` with ``block``: the first block shape a
        (kernel, flags) is compiled for gets a module of its own (``emit/block_shape.py``), every
        later shape the one general module. A kernel launched with one shape, as most are,
        runs fully specialized; one launched with many (an autotune table, a sweep) costs two
        Numba compiles per signature, never one per shape."""
        first = self._first_block.setdefault((kernel.id, flags), block)
        key = (kernel.id, flags, block if block == first else None)
        prog = self._programs.get(key)
        if prog is None:
            from numba_cube.backends.cpu.translate import build_program

            boundscheck, fastmath, error_model = flags
            prog = self._programs[key] = build_program(kernel.py_func, boundscheck=boundscheck,
                                                       fastmath=fastmath, error_model=error_model,
                                                       kernel_id=kernel.id if kernel.id_is_stable
                                                       else None, block=key[2])
        return prog

    def forget(self, kernel) -> None:
        """After an interrupted compile: its programs, and their modules (whose Numba dispatchers
        may hold a half-finished compile), are made afresh by the next launch."""
        for key in [k for k in self._programs if k[0] == kernel.id]:
            sys.modules.pop(self._programs.pop(key).module_name, None)

    def compile(self, kernel, arg_types, extras, options):
        kernel.check_frozen()
        if numba.config.DISABLE_JIT:
            # njit then hands back the plain Python function (no .compile). Running the kernel
            # as Python instead would not be numba.cuda's arithmetic (no int32/float32
            # rounding or wrap-around), so it is refused, saying what runs kernels as Python.
            raise CompileError(
                f"kernel {kernel.name}: NUMBA_DISABLE_JIT=1 is set, and the CPU backend compiles "
                "kernels with numba.njit, which it turns off. Unset NUMBA_DISABLE_JIT for the "
                "CPU backend; to step through a kernel as Python, run it on numba-cuda's "
                "simulator (NUMBA_ENABLE_CUDASIM=1 and a CUDA client)",
                construct="NUMBA_DISABLE_JIT=1")
        prog = self._program(kernel, cpu_flags(kernel, options), extras[1])
        # A kernel with dynamic shared memory takes its size after the geometry (lower/dynamic_shared.py)
        sig = (types.int64,) * (7 if prog.dynamic_shared else 6) + tuple(arg_types)
        twin = extras[0]
        entries = {twin: _compile_twin(kernel, prog, twin, sig, arg_types)}
        adaptive = len(extras) > 2 and extras[2]
        run = twin_runner(prog.dynamic_shared, entries[twin])
        if adaptive:
            run = measured_runner(
                kernel.name, prog.dynamic_shared, entries,
                lambda other: _compile_twin(kernel, prog, other, sig, arg_types))
        if prog.bounds_sites:
            run = _describing_bounds(run, prog)
        run.program = prog
        return run


def _compile_twin(kernel, prog, twin: str, sig: tuple, arg_types: tuple):
    """The entry point of ``twin`` (``"serial"`` or ``"parallel"``) for ``sig``.

    The serial twin's entry is its chunk function, called as ``chunk(0, 1, <geometry>, *args)``
    (``twin_runners.twin_runner``), not ``<kernel>__ser``, which only wraps that call: Numba leaks a small
    allocation per call when an exception leaves a jitted function through a nested jitted call
    (numba/numba#10783; 48 bytes per failing launch measured here), and none when it leaves the
    function Python called. Compiling ``__ser`` compiles the chunk, so the serial twin costs
    the same compile as before."""
    dispatcher = prog.serial if twin == "serial" else prog.parallel
    if twin == "parallel" and prog.parallel_status is not None:
        dispatcher = prog.parallel_status
    try:
        # A twin compiled at its first choice runs inside a launch, maybe on the main thread:
        # a Ctrl-C there is taken when Numba is done (runtime/client/interrupts.py says why).
        with deferred_interrupt():
            entry = dispatcher.compile(sig)
            if prog.chunk is not None and callable(entry):
                if twin == "serial":
                    entry = ChunkEntry(prog.chunk.compile((types.int64, types.int64) + sig))
                elif dispatcher is prog.parallel_status:
                    entry = StatusEntry(entry, prog.chunk.compile((types.int64, types.int64)
                                                                   + sig))
    except CompileError:
        raise
    except Exception as exc:
        # Numba names lines of the generated module; the user's own lines are what to fix.
        detail, where = linemarks.point_to_user(str(exc), prog.path, prog.source)
        at = "" if where is None else f" at {where[0]}, line {where[1]}"
        err = CompileError.wrapping(
            f"kernel {kernel.name} does not compile for arguments "
            f"({', '.join(map(str, arg_types))}){at}: {type(exc).__name__}: {detail}", exc)
        if where is not None:
            err.filename, err.lineno = where
        raise err from exc
    return entry if callable(entry) or isinstance(entry, (ChunkEntry, StatusEntry)) \
        else dispatcher


def _describing_bounds(run, prog):
    """``run``, its failed bounds checks raised with their message (``kernel_runtime/bounds.py``)."""
    def run_described(count, dim, args, shared_bytes=0):
        try:
            run(count, dim, args, shared_bytes)
        except IndexError as exc:
            described = bounds_runtime.described(exc, prog.kernel_name, prog.bounds_sites)
            if described is exc:
                raise
            raise described from None      # the raw tuple says nothing the message does not

    return run_described


def make_cpu_server(index: int) -> DeviceServer:
    # An InlineChannel: the server runs on the issuing thread, so a short kernel with nothing to
    # wait for runs right there, with no hop to a device thread or a stream worker
    # (runtime/launch/warm_host.py); longer ones are still queued to stream workers.
    select_threading_layer()
    device = f"cpu:{index}"
    return DeviceServer(device, CpuBackend(), InlineChannel(device),
                        max_tasks=config.get_int("NUMBA_CUBE_MAX_TASKS", 32, 1))
