"""``cuda.jit`` under the layer: real numba-cuda dispatchers whose launches go to numba_cube.

Every kernel stays a numba-cuda ``CUDADispatcher`` (this module's ``Dispatcher`` subclasses it):
what ``cube.kernel(dispatcher)`` and the CPU translator already understand, what libraries test
with ``isinstance``, with numba's ``py_func``, ``targetoptions`` and ``extensions``. Only what
needs a GPU changes:

- **launches** (``kernel[grid, block, stream, sharedmem](*args)``, ``kernel.forall(n)``) go to
  the installed numba_cube client as ``cube.kernel(dispatcher)`` (one per dispatcher). With only
  device arrays and scalars the launch is **asynchronous** (``client.launch``, the warm path, on
  the stream's numba_cube stream), as a numba launch on a GPU is; its failure is on the buffers it
  should have written (a later ``copy_to_host`` or synchronize raises it). A dispatcher's first
  launch waits for itself, so a kernel that does not compile raises at the call, as numba's
  compile does. With host NumPy arrays (or ``cuda.In``/``Out``/``InOut``, records, numba-cuda
  ``extensions``) the launch is numba_cube's numba-style launch: copy in, run, copy back,
  synchronously, raising its own failure.
- **eager signatures** (``cuda.jit("void(float32[:])")``, a list of them) are not compiled at
  decoration on a host device (there is no GPU compiler): they are kept as the dispatcher's
  declared signatures, which govern every launch's argument conversion as numba's do
  (``kernel/signatures.py``). On a CUDA device they are compiled at decoration, as numba does.
  A *device function* declared with signatures is kept the same way; the CPU translator refuses
  to inline it (a ``CompileError`` naming it), since it would not convert the arguments.
- ``device=True`` without signatures is numba-cuda's own device function, untouched.
- ``forall(n)`` picks ``FORALL_BLOCK`` units a cube (numba asks the driver's occupancy
  calculator; any size is correct for a kernel ``forall`` may launch, which guards
  ``cuda.grid(1) < n``). ``specialize(*args)`` is a dispatcher declared with the arguments' types.
- Inspection that needs numba-cuda's GPU compile (``inspect_types``, ``inspect_asm``, register
  counts, ``compile``) is numba-cuda's own on a CUDA device, an ``UnsupportedAPIError`` on others.
  (On a CUDA device the CUDA backend compiles through the dispatcher itself.)
"""

from __future__ import annotations

import numpy as np
from numba.cuda.core import sigutils
from numba.cuda.dispatcher import CUDADispatcher

from ..errors import UnsupportedAPIError
from numba_cube.runtime.memory.handle import Handle
from .devicearray import DeviceNDArray
from .state import INSTALLED, layer_client, note_launched
from .streams import stream_id_of

__all__ = ["Dispatcher", "jit", "set_original_jit", "FORALL_BLOCK"]

#: units per cube of ``kernel.forall(n)``
FORALL_BLOCK = 256

#: scalar argument types passed to a launch as they are (the common case, one type test)
_SCALARS = frozenset({int, float, bool, complex, np.float32, np.float64, np.int32, np.int64,
                      np.uint32, np.uint64, np.int8, np.int16, np.uint8, np.uint16, np.bool_,
                      np.complex64, np.complex128, np.float16})

_original_jit = None


def set_original_jit(jit_function) -> None:
    """numba-cuda's own ``cuda.jit`` (``install.py`` keeps it), which makes the dispatchers."""
    global _original_jit
    _original_jit = jit_function


def _declared(sig, device: bool):
    """A signature (text or object) as numba's ``Signature``; a kernel's must return void."""
    from numba.core import types, typing

    argtypes, restype = sigutils.normalize_signature(sig)
    if not device:
        if restype and restype != types.void:
            raise TypeError("CUDA kernel must have void return type.")
        restype = types.void
    return typing.signature(restype, *argtypes)


class _DeclaredMixin:
    """A dispatcher that reports its declared signatures as numba's compiled ones would be
    (``nopython_signatures``) without compiling them: what ``kernel/signatures.py`` reads."""

    def _declare(self, signatures) -> None:
        self._cube_declared = tuple(signatures) if signatures else None
        if self._cube_declared is not None:
            # numba's "compiles nothing but its signatures" flag (disable_compile() would assert
            # that something is compiled already), which kernel/signatures.py reads
            self._can_compile = False

    @property
    def nopython_signatures(self):
        declared = getattr(self, "_cube_declared", None)
        if declared is not None and not self.overloads:
            return list(declared)
        return [cres.signature for cres in self.overloads.values() if not cres.objectmode]


class DeclaredDeviceFunction(_DeclaredMixin, CUDADispatcher):
    """A device function made with signatures (``cuda.jit("f4(f4)", device=True)``)."""


class Dispatcher(_DeclaredMixin, CUDADispatcher):
    """A kernel whose launches go to numba_cube (module docstring)."""

    def __init__(self, py_func, targetoptions, signatures=None):
        super().__init__(py_func, targetoptions=targetoptions)
        self._declare(signatures)
        self._cube_kernel = None
        self._launched = False
        self._launchers: dict = {}

    @property
    def cube_kernel(self):
        """The ``cube.Kernel`` the launches run (made at the first launch, as numba compiles)."""
        k = self._cube_kernel
        if k is None:
            from ..kernel.kernel import kernel as make_kernel

            k = self._cube_kernel = make_kernel(self)
        return k

    # -- launch configuration --------------------------------------------------------------------
    def __getitem__(self, config):
        if not isinstance(config, tuple) or len(config) not in (2, 3, 4):
            raise ValueError("must specify at least the griddim and blockdim")
        try:
            launcher = self._launchers.get(config)
        except TypeError:           # an unhashable part (a list): configure it each time
            return self.configure(*config)
        if launcher is None:
            if len(self._launchers) >= 128:
                self._launchers.clear()
            launcher = self._launchers[config] = self.configure(*config)
        return launcher

    def configure(self, griddim, blockdim, stream=0, sharedmem=0):
        return _Launch(self, _dims(griddim, "griddim"), _dims(blockdim, "blockdim"), stream,
                       sharedmem)

    def forall(self, ntasks, tpb=0, stream=0, sharedmem=0):
        """A launch of ``ntasks`` units in cubes of ``tpb`` (0: ``FORALL_BLOCK``)."""
        if ntasks < 0:
            raise ValueError(f"Can't create ForAll with negative task count: {ntasks}")
        return _ForAll(self, ntasks, tpb, stream, sharedmem)

    def specialize(self, *args):
        """A dispatcher declared with exactly the argument types of ``args``."""
        if self.specialized:
            raise RuntimeError("Dispatcher already specialized")
        argtypes = tuple(self.typeof_pyval(a) for a in args)
        found = self.specializations.get(argtypes)
        if found is None:
            from numba.core import types, typing

            declared = [typing.signature(types.void, *argtypes)]
            if layer_client().device.startswith("cuda"):    # a real GPU compile, as numba's
                found = Dispatcher(self.py_func, self.targetoptions)
                found.compile(argtypes)
                found.disable_compile()
            else:
                found = Dispatcher(self.py_func, self.targetoptions, declared)
            found._specialized = True
            self.specializations[argtypes] = found
        return found

    # -- the launch ------------------------------------------------------------------------------
    def launch(self, launch: "_Launch", args: tuple) -> None:
        kernel = self.cube_kernel
        client = launch.client()
        converted, arrays, numba_style = [], [], not self._launched or bool(kernel.extensions)
        for a in args:
            kind = type(a)
            if kind is DeviceNDArray:
                a = a.handle
                arrays.append(a)
            elif kind not in _SCALARS:
                a, host = _convert(a, arrays)
                numba_style = numba_style or host
            converted.append(a)
        if numba_style:
            with client:
                kernel[launch.griddim, launch.blockdim, None, launch.sharedmem](*converted)
            self._launched = not kernel.extensions
            return
        client.launch(kernel, launch.griddim, launch.blockdim, *converted,
                      shared_bytes=launch.sharedmem)
        note_launched(tuple(arrays))

    # -- what needs numba-cuda's GPU compile ----------------------------------------------------
    # Served by numba-cuda itself when the layer runs on a CUDA device (the CUDA backend compiles
    # through this dispatcher, and its compile results are real); refused on other devices.
    def _gpu_only(self, what: str):
        method = getattr(super(), what)
        if layer_client().device.startswith("cuda"):
            return method
        raise UnsupportedAPIError(
            f"kernel.{what} (numba-cuda's GPU compile results)",
            "numba_cube compiles kernels for its own backend; inspect the kernel on a GPU "
            "(python -m numba_cube run --device cuda), or use cube.kernel(k).io(*args) for "
            "what it reads and writes")

    def compile(self, sig):
        return self._gpu_only("compile")(sig)

    def inspect_types(self, *args, **kwargs):
        return self._gpu_only("inspect_types")(*args, **kwargs)

    def inspect_llvm(self, *args, **kwargs):
        return self._gpu_only("inspect_llvm")(*args, **kwargs)

    def inspect_asm(self, *args, **kwargs):
        return self._gpu_only("inspect_asm")(*args, **kwargs)

    def inspect_sass(self, *args, **kwargs):
        return self._gpu_only("inspect_sass")(*args, **kwargs)

    def get_regs_per_thread(self, *args, **kwargs):
        return self._gpu_only("get_regs_per_thread")(*args, **kwargs)

    def get_shared_mem_per_block(self, *args, **kwargs):
        return self._gpu_only("get_shared_mem_per_block")(*args, **kwargs)

    def get_local_mem_per_thread(self, *args, **kwargs):
        return self._gpu_only("get_local_mem_per_thread")(*args, **kwargs)

    def get_max_threads_per_block(self, *args, **kwargs):
        return self._gpu_only("get_max_threads_per_block")(*args, **kwargs)


def _dims(value, what: str):
    """numba's grid and block dimensions: an int or a tuple of 1 to 3 ints (NumPy ints too)."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (tuple, list)) and 1 <= len(value) <= 3 and \
            all(isinstance(v, (int, np.integer)) for v in value):
        return tuple(int(v) for v in value)
    raise ValueError(f"{what} must be an int or a sequence of 1 to 3 ints, got {value!r}")


def _convert(a, arrays: list):
    """A launch argument that is no device array or plain scalar: ``(argument, is host data)``.
    Host data (NumPy arrays, argument hints, records) makes the launch numba-style."""
    if isinstance(a, DeviceNDArray):
        arrays.append(a.handle)
        return a.handle, False
    if isinstance(a, Handle):
        arrays.append(a)
        return a, False
    if isinstance(a, (np.ndarray, np.void)):
        return a, True
    if isinstance(a, tuple):
        items, host = [], False
        for v in a:
            v, h = _convert(v, arrays)
            items.append(v)
            host = host or h
        return (tuple(items) if type(a) is tuple else type(a)(*items)), host
    if type(a).__name__ in ("In", "Out", "InOut") and hasattr(a, "value"):
        return a, True          # numba's argument hints: the numba-style launch honours them
    return a, False


class _Launch:
    """A configured launch (``kernel[grid, block, stream, sharedmem]``)."""

    __slots__ = ("dispatcher", "griddim", "blockdim", "stream", "sharedmem", "_stream_id",
                 "_base", "_client")

    def __init__(self, dispatcher, griddim, blockdim, stream, sharedmem):
        self.dispatcher = dispatcher
        self.griddim, self.blockdim = griddim, blockdim
        self.stream, self.sharedmem = stream, sharedmem
        self._stream_id = stream_id_of(stream)
        self._base = self._client = None

    def client(self):
        """The installed client, pinned to this launch's stream (made once per client)."""
        base = layer_client()
        if base is not self._base:
            self._base = base
            self._client = base if self._stream_id is None else base.set_stream(self._stream_id)
        return self._client

    def __call__(self, *args):
        # The warm form of Dispatcher.launch (device arrays and plain scalars, a kernel launched
        # before, the same installed client): the layer's whole cost on the repeated path.
        client = self._client
        dispatcher = self.dispatcher
        if client is None or self._base is not INSTALLED[0] or not dispatcher._launched:
            dispatcher.launch(self, args)
            return
        converted = []
        for a in args:
            kind = type(a)
            if kind is DeviceNDArray:
                converted.append(a.handle)
            elif kind in _SCALARS:
                converted.append(a)
            else:
                dispatcher.launch(self, args)
                return
        client.launch(dispatcher._cube_kernel, self.griddim, self.blockdim, *converted,
                      shared_bytes=self.sharedmem)
        note_launched(converted)


class _ForAll:
    def __init__(self, dispatcher, ntasks, tpb, stream, sharedmem):
        self.dispatcher, self.ntasks = dispatcher, ntasks
        self.thread_per_block, self.stream, self.sharedmem = tpb, stream, sharedmem

    def __call__(self, *args):
        if self.ntasks == 0:
            return
        tpb = self.thread_per_block or min(FORALL_BLOCK, self.ntasks)
        grid = (self.ntasks + tpb - 1) // tpb
        self.dispatcher[grid, tpb, self.stream, self.sharedmem](*args)


def jit(func_or_sig=None, device=False, **kws):
    """``cuda.jit`` under the layer (module docstring): ``@cuda.jit``, ``@cuda.jit(**options)``,
    ``cuda.jit("void(float32[:])")``, ``cuda.jit([...])``, ``cuda.jit(device=True)``."""
    if sigutils.is_signature(func_or_sig):
        signatures, specialized = [func_or_sig], True
    elif isinstance(func_or_sig, list):
        signatures, specialized = func_or_sig, False
    else:
        signatures, specialized = None, False
    if signatures is not None or func_or_sig is None:
        return lambda func: _make(func, device, kws, signatures, specialized)
    return _make(func_or_sig, device, kws, None, False)


def _make(func, device: bool, kws: dict, signatures, specialized: bool):
    base = _original_jit(func, device=device, **kws)    # lazy: compiles nothing
    if device and signatures is None:
        return base                 # numba-cuda's own device function, as the translator knows it
    declared = [_declared(s, device) for s in signatures] if signatures else None
    if device:
        disp = DeclaredDeviceFunction(base.py_func, targetoptions=base.targetoptions)
        disp._declare(declared)
        return disp
    on_gpu = layer_client().device.startswith("cuda")
    disp = Dispatcher(base.py_func, base.targetoptions, None if on_gpu else declared)
    if kws.get("cache"):
        disp.enable_caching()
    if declared:
        if on_gpu:          # a GPU is there: compile the signatures eagerly, as numba-cuda does
            for sig in declared:
                disp.compile(sig.args)
            disp.disable_compile()
        disp._specialized = specialized
    return disp
