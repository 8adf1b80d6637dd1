"""Packed launches: a kernel's argument block packed once, a launch reduced to one driver call.

numba-cuda spends ~24 us of host time per launch of a 3-array kernel above the raw driver launch:
typing the arguments, flattening each array into ctypes values, building a launch config. All of
that depends only on the kernel, the argument *types* and the buffers bound, which repeat from
launch to launch. So:

- ``ArgLayout`` (per kernel and argument signature) says where each flattened parameter lives in
  one byte block. numba-cuda passes an array of ``ndim`` dimensions as ``5 + 2*ndim`` separate
  kernel parameters, in this order (``_Kernel._prepare_args`` in numba_cuda's dispatcher.py)::

      meminfo (0), parent (0), nitems, itemsize, data pointer, shape[0..ndim), strides[0..ndim)

  and a scalar as one parameter of its C type (a complex as two: real, imaginary). A kernel
  that can raise has one more, last: the address of the launch's error word (``error_word``:
  ``exception_codegen.py``).
- ``ParamBlock`` (per packed launch) is that byte block plus the ``void*[]`` of the addresses of its
  parameters, which is what ``cuLaunchKernel`` takes as ``kernelParams`` (passed as an int: the
  bindings' fast path, no conversion per launch).
- ``PackedLaunch`` (per kernel, *bound buffers* and geometry) has the buffers' pointers, shapes and
  strides (a binding's own: F-ordered, strided and broadcast views keep theirs) packed once, when
  it is made. Per launch it only packs the scalar arguments (their values
  change) and calls ``cuLaunchKernel``. The driver copies the parameters during the call, so one
  block serves every launch of the packed launch (all launches of a server happen under its lock).

A packed launch is also the *artifact* of a recorded dispatch (``dispatch.Recorded``):
``packed(count, dim, (stream, args))`` launches it on ``stream``; graph capture replays recordings
that way onto the capture stream.

A launch the driver refuses (too many threads per block, too much shared memory, a grid above the
limits) raises ``CudaError`` from the call, with the geometry and the kernel's limits in the
message: inside the execute scope, that is a failure recorded on the launch's write set.

A kernel that can raise (``CompiledKernel.raises``) takes a fresh error word per launch
(``error_slots.py``), packed into the block before the call, and the call returns its
``SlotRun``: the execute scope leaves the write set pending on it (``runtime/ledger/pending.py``). A
kernel with the parameter that cannot raise gets the ring's never-read word once, when packed.
"""

from __future__ import annotations

import ctypes
import struct

import numpy as np

from numba_cube.runtime.launch.composite import COMPOSITE_TYPES
from numba_cube.backends.cuda.launch.error_slots import SlotRun

__all__ = ["ArgLayout", "ParamBlock", "PackedLaunch", "CompiledKernel", "scalar_format", "flat_leaves"]

_INT_FORMATS = {1: "b", 2: "h", 4: "i", 8: "q"}
#: an error word's address in the parameter block
_WORD = struct.Struct("<Q")


def flat_leaves(args: tuple) -> tuple:
    """A launch's arguments with each composite replaced by its leaves: numba-cuda passes a
    tuple as its items' parameters one after the other (``_prepare_args``), an enum member as
    its value, a date as its int64, a record as a pointer (a ``RecordRef`` leaf)."""
    out = []
    for a in args:
        if type(a) in COMPOSITE_TYPES:
            out.extend(a.leaves())
        else:
            out.append(a)
    return tuple(out)
_UINT_FORMATS = {1: "B", 2: "H", 4: "I", 8: "Q"}


def scalar_format(dtype: np.dtype) -> str:
    """``struct`` format of one scalar kernel argument (little-endian, no padding)."""
    kind, size = dtype.kind, dtype.itemsize
    if kind == "b":
        return "?"
    if kind == "i":
        return _INT_FORMATS[size]
    if kind == "u":
        return _UINT_FORMATS[size]
    if kind == "f":
        return {2: "e", 4: "f", 8: "d"}[size]
    if kind == "c":
        return {8: "ff", 16: "dd"}[size]
    raise TypeError(f"scalar kernel arguments of dtype {dtype} are not supported")


class ArgLayout:
    """Where each argument's flattened parameters live in the parameter block."""

    def __init__(self, kinds: tuple, error_word: bool = False):
        """``kinds``: per flattened argument (``flat_leaves``), ``("array", ndim, itemsize)``,
        ``("record",)`` or ``("scalar", dtype)``; ``error_word``: the kernel takes the address
        of an error word after them."""
        self.kinds = kinds
        self.error_word = error_word
        self.word_offset = -1                # where that address goes in the block
        self.param_offsets: list[int] = []   # offset of each kernel parameter in the block
        self.arg_offsets: list[int] = []     # offset of each argument's first parameter
        self.arg_structs: list = []          # struct.Struct packing each argument's parameters
        offset = 0
        for kind in kinds:
            if kind[0] == "array":
                ndim = kind[1]
                count = 5 + 2 * ndim
                offset = -(-offset // 8) * 8
                self.arg_offsets.append(offset)
                self.arg_structs.append(struct.Struct("<QQqqQ" + "q" * (2 * ndim)))
                for k in range(count):
                    self.param_offsets.append(offset + 8 * k)
                offset += 8 * count
            else:
                # A record passed by reference is one parameter: its device copy's address.
                fmt = "Q" if kind[0] == "record" else scalar_format(kind[1])
                first = None
                for ch in fmt:
                    size = struct.calcsize("<" + ch)
                    offset = -(-offset // size) * size
                    if first is None:
                        first = offset
                    self.param_offsets.append(offset)
                    offset += size
                self.arg_offsets.append(first)
                # The parts of a complex are adjacent and each naturally aligned: one struct.
                self.arg_structs.append(struct.Struct("<" + fmt))
        if error_word:
            offset = -(-offset // 8) * 8
            self.word_offset = offset
            self.param_offsets.append(offset)
            offset += 8
        self.size = max(offset, 8)

    @property
    def nparams(self) -> int:
        return len(self.param_offsets)


class ParamBlock:
    """One parameter block for a layout: bytes plus the ``void*[]`` pointing into them."""

    __slots__ = ("layout", "buf", "ptrs", "address")

    def __init__(self, layout: ArgLayout):
        self.layout = layout
        self.buf = (ctypes.c_char * layout.size)()
        base = ctypes.addressof(self.buf)
        n = max(layout.nparams, 1)
        self.ptrs = (ctypes.c_void_p * n)(*[base + off for off in layout.param_offsets] or [0])
        self.address = ctypes.addressof(self.ptrs)

    def pack_array(self, i: int, ptr: int, shape: tuple, itemsize: int, strides=None) -> None:
        """Argument ``i``, an array whose element ``[0, ..., 0]`` is at ``ptr``: its byte
        ``strides`` as numba-cuda passes them (``None``: C-contiguous ones), which is how a
        kernel typed for an F or A layout finds its elements."""
        nitems = 1
        for s in shape:
            nitems *= s
        if strides is None:
            strides = []
            stride = itemsize
            for s in reversed(shape):
                strides.append(stride)
                stride *= s
            strides.reverse()
        self.layout.arg_structs[i].pack_into(self.buf, self.layout.arg_offsets[i], 0, 0, nitems,
                                             itemsize, ptr, *shape, *strides)

    def pack_scalar(self, i: int, value) -> None:
        st = self.layout.arg_structs[i]
        if st.size >= 8 and st.format.endswith(("ff", "dd")):
            value = complex(value)
            st.pack_into(self.buf, self.layout.arg_offsets[i], value.real, value.imag)
        elif st.format.endswith("?"):
            st.pack_into(self.buf, self.layout.arg_offsets[i], bool(value))
        else:
            st.pack_into(self.buf, self.layout.arg_offsets[i], value)


class CompiledKernel:
    """One kernel compiled and loaded for one argument signature on one device."""

    __slots__ = ("name", "function", "layout", "max_threads", "shared_bytes", "occupancy", "source",
                 "cooperative", "dynamic_opt_in", "exceptions", "raises")

    def __init__(self, name, function, layout: ArgLayout, max_threads: int, shared_bytes: int = 0,
                 occupancy=None, source=None, cooperative: bool | None = None):
        self.name = name
        self.function = function          # CUfunction in the server's context
        self.layout = layout
        self.max_threads = max_threads    # the most units per cube this kernel can launch with
        self.shared_bytes = shared_bytes  # static shared memory per cube
        self.occupancy = occupancy        # callable(block_threads) -> resident cubes per SM
        self.source = source              # the numba-cuda kernel object (kept alive: it owns the module)
        # A kernel that synchronizes its whole grid (``cuda.cg.this_grid().sync()``) is only
        # correct when every cube is resident at once, which only a cooperative launch
        # guarantees (the driver refuses a grid too large for that rather than deadlocking).
        # numba-cuda says which kernels need it: ``use_cooperative`` of the code library.
        if cooperative is None:
            cooperative = bool(getattr(source, "cooperative", False))
        self.cooperative = cooperative
        #: dynamic shared memory (bytes per cube) this function is known to accept: its
        #: CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES once read or raised (``PackedLaunch``)
        self.dynamic_opt_in = 0
        #: a debug kernel's exception flag (``kernels.exceptions.KernelExceptions``), else None
        self.exceptions = None
        #: how a launch's error word becomes the exception (``kernels.exceptions.KernelErrors``)
        #: for a kernel that can raise (its layout has ``error_word``), else None
        self.raises = None


def cooperative_launcher(api):
    """A callable with ``cuLaunchKernel``'s parameters that makes a cooperative launch
    (``cuLaunchCooperativeKernel`` takes no ``extra``), so every caller of a packed launch, the warm
    path included, launches a grid-synchronizing kernel the way it must be launched."""
    launch = api.cuLaunchCooperativeKernel

    def launch_cooperative(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        return launch(f, gx, gy, gz, bx, by, bz, shared, stream, params)
    return launch_cooperative


class PackedLaunch:
    """A kernel with its buffers bound and packed: per launch, scalars and one driver call."""

    __slots__ = ("kernel", "block", "scalars", "pack", "_flatten", "cu_launch", "success", "_driver",
                 "_address", "_buf", "_scalar_packs", "checks", "word_offset", "__weakref__")

    def __init__(self, kernel: CompiledKernel, driver, args: tuple, pointer_of, checks=None):
        """``args``: per argument a ``Binding`` (packed now, through ``pointer_of(binding)``), a
        scalar (packed per launch) or a composite (``runtime/launch/composite.py``: its buffers and
        records packed now, its numbers per launch, flattened in numba's order). ``checks``: the
        device's ``error_slots.ErrorSlots``, where a kernel that can raise gets its words."""
        self.kernel = kernel
        # Only a launch with a tuple, record, enum or date argument pays for flattening.
        self._flatten = any(type(a) in COMPOSITE_TYPES for a in args)
        if self._flatten:
            args = flat_leaves(args)
        self.block = ParamBlock(kernel.layout)
        self._driver = driver
        #: the driver's launch call for this kernel (cooperative ones through their launcher) and
        #: its success code: the warm path (``fast_path.py``) calls them with its own arguments
        self.cu_launch = cooperative_launcher(driver.api) if kernel.cooperative else driver.api.cuLaunchKernel
        self.success = driver.SUCCESS
        self._address = self.block.address
        self._buf = self.block.buf
        packs = []
        for i, (a, kind) in enumerate(zip(args, kernel.layout.kinds)):
            if kind[0] == "array":
                self.block.pack_array(i, pointer_of(a), a.shape, kind[2], a.strides)
            elif kind[0] == "record":
                kernel.layout.arg_structs[i].pack_into(self.block.buf, kernel.layout.arg_offsets[i],
                                                       pointer_of(a.binding))
            else:
                st = kernel.layout.arg_structs[i]
                packs.append((i, st.pack_into, kernel.layout.arg_offsets[i], st.format.lstrip("<")))
                self.block.pack_scalar(i, a)
        self._scalar_packs = tuple(packs)
        self.scalars = tuple(p[0] for p in packs)
        self.pack = self._packer()
        #: the ring a launch takes its error word from (None: the kernel cannot raise), and
        #: where the word's address goes in the block (the warm path packs it too)
        self.checks = checks if kernel.raises is not None else None
        self.word_offset = kernel.layout.word_offset
        if kernel.layout.error_word and self.checks is None:
            # The parameter of a kernel that cannot raise: a word nobody reads (0 without a ring:
            # a store there would be a loud device fault, never a silent one).
            sink = checks.sink_pointer() if checks is not None else 0
            _WORD.pack_into(self.block.buf, self.word_offset, sink)

    def _packer(self):
        """The per-launch packing of the scalar arguments (``pack(args)``), or None without any.
        One scalar of a plain C type is the common case (a size, a coefficient): a closure with
        its offset bound packs it in one call, without the general loop's format checks."""
        packs = self._scalar_packs
        if not packs:
            return None
        if self._flatten:
            pack_flat = self.pack_scalars

            def pack_composites(args):
                pack_flat(flat_leaves(args))
            return pack_composites
        if len(packs) == 1 and packs[0][3] not in ("ff", "dd", "?"):
            i, pack_into, offset, _ = packs[0]
            buf = self._buf
            # The value packed last, kept (so that its id cannot be another object's): a launch
            # passing that same object again (a size in a loop) finds its bytes in the block
            # already, which only this closure writes after construction. Every scalar that
            # reaches it is immutable (a number the warm path matched by type, or the NumPy
            # scalar the general path bound), so the same object is the same value.
            packed = None

            def pack_one(args):
                nonlocal packed
                value = args[i]
                if value is not packed:
                    # Forgotten first: a pack_into that fails (a value out of the type's range)
                    # has zeroed the field already, so the block holds no value until one fits.
                    packed = None
                    pack_into(buf, offset, value)
                    packed = value
            return pack_one
        return self.pack_scalars

    def pack_scalars(self, args: tuple) -> None:
        buf = self._buf
        for i, pack_into, offset, fmt in self._scalar_packs:
            value = args[i]
            if fmt in ("ff", "dd"):
                value = complex(value)
                pack_into(buf, offset, value.real, value.imag)
            elif fmt == "?":
                pack_into(buf, offset, bool(value))
            else:
                pack_into(buf, offset, value)

    def __call__(self, count, dim, arrays, shared_bytes: int = 0) -> None:
        """Launch on ``arrays[0]`` (a CUstream) with scalar values from ``arrays[1]`` and
        ``shared_bytes`` of dynamic shared memory per cube (cuLaunchKernel's sharedMemBytes)."""
        stream, args = arrays
        if self.pack is not None:
            self.pack(args)
        if shared_bytes > self.kernel.dynamic_opt_in:
            self.opt_in(shared_bytes)
        exceptions = self.kernel.exceptions
        if exceptions is not None:
            exceptions.arm(stream)
        checks = self.checks
        run = None
        if checks is not None:
            # A fresh error word for this launch (error_slots.py), at the executor's position.
            run = SlotRun(checks, self.kernel.raises, False)
            _WORD.pack_into(self._buf, self.word_offset, checks.take_dispatching(run))
        err = self.cu_launch(self.kernel.function, count[0], count[1], count[2], dim[0], dim[1], dim[2],
                           shared_bytes, stream, self._address, 0)[0]
        if err != self.success:
            raise self.refused(err, count, dim, shared_bytes)
        if exceptions is not None:
            exceptions.check(stream)      # a debug kernel: raises the exception one of its units raised
        return run

    def launcher(self, count, dim, shared_bytes: int, stream, install=None):
        """The driver call of a launch of this kernel on ``stream`` (a CUstream) with this
        geometry and the scalars packed last, as a zero-argument callable returning the CUresult
        (falsy on success): what the warm path fires (``Driver.launcher``, which hands the
        compiled form to ``install`` once it replaces the first). Cooperative kernels are
        launched cooperatively; the callable keeps this packed launch's block alive."""
        def keep(call):
            call.packed = self      # (a partial or a function: both take attributes)
            return call

        def install_kept(call):
            install(keep(call))
        return keep(self._driver.launcher(self.kernel.function, tuple(count), tuple(dim), shared_bytes, stream,
                                          self._address, self.kernel.cooperative,
                                          None if install is None else install_kept))

    def opt_in(self, shared_bytes: int) -> None:
        """Let the function take ``shared_bytes`` of dynamic shared memory. Up to 48 KiB (less its
        static shared memory) a function accepts it as loaded; above, the driver refuses the
        launch unless CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES was raised first (what
        numba-cuda leaves to its user). Raised to what is asked, never lowered: the attribute
        belongs to the function, which every packed launch of the kernel shares."""
        k = self.kernel
        name = "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES"
        accepted = self._driver.function_attribute(name, k.function)
        if shared_bytes > accepted:
            self._driver.set_function_attribute(name, k.function, shared_bytes)
            accepted = shared_bytes
        k.dynamic_opt_in = accepted

    def shared_refusal(self, shared_bytes: int, limit: int, device: str) -> str | None:
        """Why a launch with ``shared_bytes`` of dynamic shared memory cannot run on a device
        whose cubes have at most ``limit`` bytes of shared memory, or None: the kernel's static
        shared memory takes its part of the same limit."""
        static = self.kernel.shared_bytes
        if static + shared_bytes <= limit:
            return None
        return (f"kernel {self.kernel.name} uses {static} bytes of static shared memory; with "
                f"{shared_bytes} bytes of dynamic shared memory that exceeds the {limit} bytes "
                f"one cube can have on {device}")

    def refused(self, err, count, dim, shared_bytes: int = 0):
        """The ``CudaError`` of a refused launch, saying what the kernel allows."""
        k = self.kernel
        threads = dim[0] * dim[1] * dim[2]
        notes = [f"kernel {k.name}, cube count {tuple(count)}, cube dim {tuple(dim)} ({threads} units)"]
        if k.max_threads and threads > k.max_threads:
            notes.append(f"this kernel allows at most {k.max_threads} units per cube")
        if k.shared_bytes:
            notes.append(f"it uses {k.shared_bytes} bytes of static shared memory per cube")
        if shared_bytes:
            notes.append(f"the launch asked for {shared_bytes} bytes of dynamic shared memory "
                         "per cube")
        if k.cooperative:
            notes.append("it synchronizes its whole grid (cuda.cg.this_grid().sync()), so it is "
                         "launched cooperatively: every cube must be resident at once")
        call = "cuLaunchCooperativeKernel" if k.cooperative else "cuLaunchKernel"
        return self._driver.error(call, err, "; ".join(notes))
