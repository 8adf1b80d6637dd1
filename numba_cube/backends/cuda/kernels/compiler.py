"""Compiling a kernel with numba-cuda for one argument signature, and loading it on one device.

``numba.cuda.jit(py_func)`` makes a dispatcher once per (kernel, compile options); each argument
signature is compiled explicitly with ``dispatcher.compile(sig)`` (what a dry run needs: compile
without launching). The signature comes from the bindings, not from values: a buffer of dtype D
and ``ndim`` N is ``types.Array(D, N, L)``, L the layout of its strides ("C", "F" or "A", as
``numba.typeof`` gives it: ``kernel/signatures.launch_types``), a scalar is the Numba
type of its NumPy type. Because numba_cube packs arguments itself (``packed_launch.py``), the
kernel object is used only for what it loaded: the ``CUkernel`` handle of its code library, turned
into this context's ``CUfunction``, plus the attributes a refused launch is explained with.

numba-cuda loads modules into *its* current context; each device's server compiles inside
``numba.cuda.gpus[index]`` so the module lands on the right GPU, in the device's primary context,
which is also the context the server uses (one context per device, shared with numba-cuda,
CuPy and PyTorch).

Options (``jit_options``): the kernel's own (``kernel.options``: what ``cube.kernel(f, **options)``
or a wrapped ``cuda.jit(**options)`` dispatcher said) are passed to ``cuda.jit`` as they are, so
the kernel compiles as numba-cuda would compile it; a client's (``cube.client("cuda",
fastmath=True)``: ``fastmath``, ``lineinfo``, ``debug``, ``opt``, ``max_registers``) win over
them. ``boundscheck`` is numba-cuda's answer: its CUDA target never checks bounds, and
``cuda.jit(boundscheck=True)`` is refused, so a kernel asking for it is refused here too
(``CompileError``); a client's ``boundscheck`` is the CPU backend's and is ignored here.
``debug=True`` (or ``NUMBA_CUDA_DEBUGINFO=1``) compiles as numba-cuda does, and the kernel's
exceptions are reported as numba-cuda reports them, through its error flag
(``kernels/exceptions.py``): such launches are blocking.

Without debug, a kernel is compiled inside ``exception_codegen.compiling``: a kernel that can
raise gets a trailing error-word parameter (``CompiledKernel.error_word``) and its launches are
checked without blocking (``error_slots.py``; ``CompiledKernel.raises`` decodes the word); one
that cannot pays nothing. The word changes the kernel's parameters, so it is never put into a
dispatcher numba-cuda itself launches: the user's own dispatcher compiles the kernel as
numba-cuda would (only observed: can it raise?), and a kernel that can raise is compiled again
by a private dispatcher of numba_cube's, which never uses numba-cuda's on-disk cache (a kernel
read from there could have the word or not). ``NUMBA_CUBE_CUDA_KERNEL_ERRORS=off`` compiles
every kernel as before, without the word (its exceptions are lost again).

``image_of`` hands the on-disk cache (``diskcache.py``) the linked cubin of a compiled kernel,
or says why it cannot be kept: what numba-cuda's own launch path sets up beyond loading the
image (NRT, module setup callbacks, a shared-memory carveout, a debug kernel's exception flag).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Mapping

import numpy as np

from numba_cube import config
from numba_cube.errors import CompileError
from numba_cube.kernel.options import resolve
from numba_cube.kernel.signatures import launch_types
from numba_cube.runtime.launch.composite import RecordRef
from numba_cube.backends.cuda.kernels.exception_codegen import compiling
from numba_cube.backends.cuda.kernels.exceptions import KernelErrors, for_kernel
from numba_cube.backends.cuda.launch.packed_launch import ArgLayout, CompiledKernel, flat_leaves

__all__ = ["NumbaCudaCompiler", "image_of", "numba_types", "arg_kinds", "JIT_OPTIONS", "jit_options",
           "kernel_errors_mode"]

#: The client options handed to ``cuda.jit`` (the CUDA servers declare them as known options).
JIT_OPTIONS = ("fastmath", "lineinfo", "debug", "opt", "max_registers")


def kernel_errors_mode() -> str:
    """``check`` or ``off`` (``NUMBA_CUBE_CUDA_KERNEL_ERRORS``, read at each compile: the compile
    cache keys carry it, so a process can compare both)."""
    return config.get_str("NUMBA_CUBE_CUDA_KERNEL_ERRORS", "check", ("check", "off"))


def _fixup_of(kernel, found: list):
    """What ``exception_codegen``'s fixup saw of numba-cuda's ``kernel``: from this compile, or
    kept on the kernel by an earlier one (a dispatcher hands back an overload it compiled
    before); None if it was not compiled inside the window (or with debug)."""
    for fixup in found:
        if fixup.entry == kernel.entry_name:
            kernel._numba_cube_fixup = fixup
            return fixup
    return getattr(kernel, "_numba_cube_fixup", None)


def jit_options(kernel, client_options: Mapping) -> dict:
    """The ``cuda.jit`` keyword arguments for compiling ``kernel`` on a client with
    ``client_options`` (see the module docstring)."""
    options = dict(kernel.options)
    if options.pop("boundscheck", None):
        raise CompileError(f"kernel {kernel.name} asks for boundscheck=True: bounds checking is "
                           "not supported for CUDA (numba-cuda refuses cuda.jit(boundscheck=True) "
                           "too); run it on a CPU client for checked indexing",
                           construct="boundscheck=True on CUDA")
    # (boundscheck=False is dropped, not passed: numba-cuda would hand it on to its kernel
    # constructor, which takes no such argument.)
    for name in JIT_OPTIONS:
        value = resolve(name, options, client_options)
        if value is not None:
            options[name] = value
    if isinstance(options.get("fastmath"), frozenset):
        options["fastmath"] = set(options["fastmath"])     # numba's flag sets are sets
    return options


def arg_kinds(args: tuple) -> tuple:
    """Per flattened parameter (``packed_launch.flat_leaves``: a tuple's items one after the other):
    ``("array", ndim, itemsize)`` for a binding, ``("record",)`` for a record passed by reference
    (a device pointer), ``("scalar", dtype)`` else."""
    kinds = []
    for a in flat_leaves(args):
        if type(a) is RecordRef:
            kinds.append(("record",))
        elif hasattr(a, "memory_id"):
            kinds.append(("array", len(a.shape), a.dtype.itemsize))
        else:
            kinds.append(("scalar", np.dtype(type(a)) if isinstance(a, np.generic) else np.asarray(a).dtype))
    return tuple(kinds)


def numba_types(args: tuple) -> tuple:
    """The Numba signature of a launch's arguments (bindings and scalars)."""
    return launch_types(args)


def image_of(kernel):
    """The ``diskcache.CodeImage`` of numba-cuda's compiled ``kernel`` (a ``_Kernel``, bound), or
    a sentence saying why it cannot be loaded from an image alone."""
    from numba_cube.backends.cuda.kernels.diskcache import CodeImage

    library = kernel._codelibrary
    if getattr(kernel, "debug", False):
        return "debug=True: its exceptions are decoded with numba-cuda's objects"
    target = getattr(kernel, "target_context", None)
    if getattr(target, "enable_nrt", False):
        return "it uses numba-cuda's NRT, which numba-cuda's launch path initializes"
    if getattr(library, "_setup_functions", None) or getattr(library, "_teardown_functions", None):
        return "its module has setup callbacks, which numba-cuda's module loading runs"
    if getattr(kernel, "shared_memory_carveout", None) is not None:
        return "a shared-memory carveout, which numba-cuda sets on the function at binding"
    # Files linked in by device functions (declare_device(..., link=...)): their contents are in
    # no kernel id, so a cubin kept on disk would outlive an edit of them. numba-cuda's own
    # helper files change only with its version, which the key covers.
    own = os.path.dirname(os.path.abspath(getattr(sys.modules.get("numba_cuda"), "__file__", "") or "/"))
    foreign = [str(f) for f in getattr(library, "_linking_files", ())
               if not os.path.abspath(str(f)).startswith(own + os.sep)]
    if foreign:
        return f"it links {foreign[0]}, whose contents its id does not cover"
    code = library.get_cubin()        # cached by numba-cuda: what it loaded
    kind, data = getattr(code, "code_type", "cubin"), getattr(code, "code", code)
    if not isinstance(data, bytes) or kind not in ("cubin", "ptx"):
        return f"numba-cuda's linker gave a {kind} image that is not in memory"
    try:
        asm = library.get_asm_str()      # the current device's PTX, as inspect_asm(cc) gives it
    except Exception:  # noqa: BLE001 - the PTX is for inspection only
        asm = ""
    return CodeImage(kind, data, str(kernel.entry_name), asm if isinstance(asm, str) else "")


class NumbaCudaCompiler:
    """numba-cuda as the compile stage of one device's server."""

    def __init__(self, driver, index: int):
        self.driver = driver
        self.index = index
        self._dispatchers: dict = {}
        self._lock = threading.Lock()

    def _dispatcher(self, key, py_func, options: dict, on_disk: bool):
        with self._lock:
            disp = self._dispatchers.get(key)
            if disp is None:
                from numba import cuda

                options = dict(options)
                if options.get("cache") and (not on_disk
                                             or not os.path.isfile(py_func.__code__.co_filename)):
                    # numba-cuda caches only functions of a real file; the device-count wrapper
                    # of a cached kernel is generated code: compiled, not cached. A kernel
                    # with the error word never goes there (module docstring).
                    del options["cache"]
                disp = self._dispatchers[key] = cuda.jit(**options)(py_func)
            return disp

    def _compile(self, key, py_func, options: dict, user_dispatcher, sig, mode: str):
        """numba-cuda's compiled kernel for ``sig``, and its ``exception_codegen.Fixup`` (None:
        compiled without the window, or with debug). See the module docstring."""
        if mode == "off":
            disp = user_dispatcher or self._dispatcher((key, mode), py_func, options, True)
            return disp.compile(sig), None
        if user_dispatcher is not None:
            with compiling(record=False) as found:
                kernel = user_dispatcher.compile(sig)
            fixup = _fixup_of(kernel, found)
            if getattr(kernel, "debug", False) or (
                    fixup is not None and not fixup.may_raise(kernel._codelibrary.modules)):
                return kernel, None
            # It can raise, or numba-cuda compiled it before numba_cube saw it: our own compile.
        disp = self._dispatcher((key, mode), py_func, options, False)
        with compiling(record=True) as found:
            kernel = disp.compile(sig)
        return kernel, _fixup_of(kernel, found)

    def compile(self, key, py_func, name: str, args: tuple, options: dict,
                user_dispatcher=None, kernel_errors: str = "check") -> CompiledKernel:
        """Compile ``py_func`` for the types of ``args`` and load it; ``options`` are ``cuda.jit``'s
        (``jit_options``), ``key`` names the function and options (dispatchers are cached by it).
        ``user_dispatcher``, where given, is the user's own ``cuda.jit`` dispatcher of ``py_func``
        with these very options: compiling through it leaves the compiled overload where
        numba-cuda's tools look for it (``inspect_asm()``, ``get_regs_per_thread()``,
        ``overloads``), as after a launch through numba-cuda, unless the kernel can raise (module
        docstring). ``kernel_errors``: ``kernel_errors_mode()``. Raises Numba's errors as they
        are."""
        from numba import cuda

        sig = numba_types(args)
        with cuda.gpus[self.index]:
            kernel, fixup = self._compile(key, py_func, options, user_dispatcher, sig,
                                          kernel_errors)
            kernel.bind()
            cufunc = kernel._codelibrary.get_cufunc()
            function = self.driver.kernel_function(cufunc.handle)
            exceptions = for_kernel(kernel, self.driver)
        word = fixup is not None and fixup.word
        attrs = cufunc.attrs
        driver = self.driver

        def occupancy(block_threads: int) -> int:
            return driver.occupancy(function, block_threads, 0)

        compiled = CompiledKernel(name, function, ArgLayout(arg_kinds(args), error_word=word),
                                  int(attrs.maxthreads), int(attrs.shared), occupancy, kernel)
        compiled.exceptions = exceptions
        if word and fixup.may_raise(kernel._codelibrary.modules):
            compiled.raises = KernelErrors(kernel)
        return compiled

    def disk_cache(self):
        """The on-disk cache of this device's compiles (``diskcache.py``)."""
        from numba_cube.backends.cuda.kernels.diskcache import DiskCache

        return DiskCache(self.driver, self.index)

    def image_of(self, compiled: CompiledKernel):
        """What ``diskcache.DiskCache`` keeps of ``compiled`` (``image_of``), or why not. Inside
        the device's numba-cuda context, as ``compile``: the image is the one for its GPU."""
        from numba import cuda

        if compiled.raises is not None:
            return ("it can raise: its exceptions are decoded with the exception objects numba-cuda "
                    "made in this process")
        with cuda.gpus[self.index]:
            return image_of(compiled.source)
