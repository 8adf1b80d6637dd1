"""A kernel's compile options: read, checked, and resolved against a client's options.

``cube.kernel(fn, **options)`` takes the options numba-cuda's ``cuda.jit`` takes, and
``cube.kernel(cuda.jit(**options)(fn))`` reads them back from the dispatcher (numba-cuda keeps
them in ``CUDADispatcher.targetoptions``, numba-cuda-mlir in its dispatcher's; the simulator's
``FakeCUDAKernel`` keeps ``fastmath`` and ``debug`` only). Options given directly win over the dispatcher's. Only options that differ
from ``cuda.jit``'s defaults are kept, so ``cube.kernel(cuda.jit(f))`` is ``cube.kernel(f)``.

A name ``cuda.jit`` does not know is an ``OptionError`` (a ``TypeError``, as for any unexpected
keyword argument) naming it. ``device=True`` (a device function is not a kernel) is a
``CompileError``. ``extensions`` (argument converters numba-cuda runs at each launch) are not a
compile option: they change no code, so they are kept apart (``launch_extensions``) and run by
the numba-style launch (``runtime/client/eager.py``), as numba-cuda runs them.

Which backend honours what: ``backends/cuda/kernels/compiler.py`` passes them to ``cuda.jit`` (refusing
``boundscheck=True``, as numba-cuda does: ``jit_options``);
``backends/cpu/server.py`` honours ``fastmath`` and ``boundscheck`` and ignores the rest (see
``cpu_flags``). Everywhere a client option of the same name (``cube.client("cpu",
boundscheck=True)``) wins over the kernel's: one kernel object runs on several clients, and the
client is where a user asks for a checked or fast-math run of everything.
"""

from __future__ import annotations

import functools
import sys
from typing import Mapping

from ..errors import CompileError, OptionError
from .dialects import is_mlir_dispatcher

__all__ = ["KNOWN_OPTIONS", "kernel_options", "resolve", "dispatcher_options"]

#: the keyword arguments numba-cuda's ``cuda.jit`` accepts for a kernel (numba-cuda 0.30:
#: ``decorators.jit`` and ``dispatcher._Kernel``), ``device`` aside
KNOWN_OPTIONS = frozenset({
    "debug", "opt", "lineinfo", "fastmath", "max_registers", "launch_bounds", "link", "inline",
    "forceinline", "lto", "shared_memory_carveout", "cache", "boundscheck", "extensions"})

#: options of a numba CPU dispatcher (``cube.kernel(numba.njit(f))``) that mean the same for a
#: kernel; its others (``parallel``, ``nogil``, ``error_model``, ...) describe a CPU function
_NJIT_SHARED = ("fastmath", "boundscheck")


def kernel_options(fn, given: Mapping) -> dict:
    """The options of the kernel made from ``fn`` with ``given`` options: checked, normalised
    (lists to tuples, sets to frozensets). Raises as described in the module docstring."""
    options = {**dispatcher_options(fn), **given}
    name = getattr(fn, "__name__", type(fn).__name__)
    if options.pop("device", False):
        # Also a RuntimeError, numba-cuda's class for it, so code catching that keeps working.
        err = CompileError.wrapping(
            f"{name!r} is a device function (device=True); a kernel cannot be one "
            "(numba-cuda: 'Cannot compile a device function as a kernel')",
            RuntimeError("Cannot compile a device function as a kernel"))
        err.construct = "device=True"
        raise err
    unknown = sorted(set(options) - KNOWN_OPTIONS)
    if unknown:
        raise OptionError(f"kernel {name!r}: unknown compile option(s) {', '.join(unknown)}; "
                          f"numba-cuda's cuda.jit takes {', '.join(sorted(KNOWN_OPTIONS))}")
    options.pop("extensions", None)         # launch-time converters: ``launch_extensions``
    return {k: _frozen(v) for k, v in sorted(options.items())}


def launch_extensions(fn, given: Mapping):
    """The argument converters the launches of a kernel made from ``fn`` run (numba-cuda's
    ``extensions``: objects with ``prepare_args(ty, val, stream=, retr=)``), or None. A wrapped
    dispatcher's own list is returned itself, not copied: numba-cuda reads it at each launch, and
    code appends to it after ``cuda.jit`` (``kernel.extensions.append(...)``)."""
    if given.get("extensions") is not None:
        return list(given["extensions"])
    own = getattr(fn, "extensions", None)
    return own if isinstance(own, list) else None


def resolve(name: str, kernel_opts: Mapping, client_opts: Mapping, default=None):
    """The value of option ``name`` for one compile: the client's if it set one, else the
    kernel's, else ``default``."""
    value = client_opts.get(name)
    if value is not None:
        return value
    value = kernel_opts.get(name)
    return default if value is None else value


def dispatcher_options(fn) -> dict:
    """The options of a wrapped dispatcher that differ from its decorator's defaults; ``{}``
    for a plain function."""
    simulator = sys.modules.get("numba.cuda.simulator.kernel")
    fake = getattr(simulator, "FakeCUDAKernel", None)
    if fake is not None and isinstance(fn, fake):
        found = {"device": fn._device, "fastmath": fn._fastmath, "debug": fn._debug,
                 "extensions": tuple(fn.extensions)}
        return {k: v for k, v in found.items() if v}
    targetoptions = getattr(fn, "targetoptions", None)
    if not isinstance(targetoptions, dict):
        return {}
    if is_mlir_dispatcher(fn):
        # cuda.jit's options by numba-cuda's names; numba-cuda-mlir's own knobs (dumps,
        # opt_level derived from opt, abi, chip, ...) are its compiler's, not the kernel's
        reference = _mlir_jit_defaults()
        return {k: v for k, v in targetoptions.items()
                if (k in KNOWN_OPTIONS or k == "device")
                and (k not in reference or not _same(reference[k], v))}
    cuda_dispatcher = getattr(sys.modules.get("numba.cuda.dispatcher"), "CUDADispatcher", None)
    if cuda_dispatcher is None or not isinstance(fn, cuda_dispatcher):
        return {k: targetoptions[k] for k in _NJIT_SHARED if k in targetoptions}
    reference = _cuda_jit_defaults()
    found = {k: v for k, v in targetoptions.items()
             if k not in reference or not _same(reference[k], v)}
    # ``cache=True`` is not a target option: cuda.jit swaps the dispatcher's cache object.
    if type(getattr(fn, "_cache", None)).__name__ not in ("NullCache", "NoneType"):
        found["cache"] = True
    return found


@functools.cache
def _cuda_jit_defaults() -> dict:
    """``targetoptions`` of a dispatcher made by a bare ``cuda.jit``: numba-cuda's own defaults,
    including those it derives from its configuration (``debug``, ``opt``, ``lto``)."""
    from numba import cuda

    return dict(cuda.jit(_reference_kernel).targetoptions)


@functools.cache
def _mlir_jit_defaults() -> dict:
    """``targetoptions`` of a bare numba-cuda-mlir ``cuda.jit`` (imported only when a kernel
    is one of its dispatchers)."""
    from numba_cuda_mlir import cuda

    return dict(cuda.jit(_reference_kernel).targetoptions)


def _reference_kernel():
    """What ``_cuda_jit_defaults`` decorates (never compiled)."""


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:                                  # noqa: BLE001 - odd __eq__: not the same
        return False


def _frozen(value):
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, set):
        return frozenset(value)
    return value
