"""A fake CUDA driver (and compiler) for running the GPU path's *logic* on a machine without a GPU.

The CUDA mechanism (``CudaMechanism``) talks to the driver through an injectable ``api`` object with the function names
of ``cuda.bindings.driver``. This module provides one whose "device" is host memory and whose
kernels run on numba-cuda's simulator, so the real server code (packed launches and their
parameter blocks, streams and events, memory pool, read-back, device-count wrapper, graphs,
interop, fault handling) runs end to end in CI.

The fake is *adversarial about ordering*: stream work is queued, not run, and only makes progress
when the host blocks (``cuStreamSynchronize``, ``cuEventSynchronize``, ``cuCtxSynchronize``);
then runnable stream heads are picked newest-stream-first, so a consumer stream that forgot to
wait on its producer's event runs *before* it and reads stale bytes. A stream wait binds to the
event's record current at the time of ``cuStreamWaitEvent``, as in CUDA.

What it does not model: real compilation (``FakeCompiler`` runs the kernel's Python function in
the simulator; ``refuse_compile`` on a kernel function makes it fail), timing, static shared
memory, concurrency inside a stream. Dynamic shared memory it does model: ``cuLaunchKernel``'s
``sharedMemBytes`` is recorded (``shared_bytes_launched``) and given to the simulated kernel, and
a size above 48 KiB is refused unless ``cuFuncSetAttribute`` raised the function's limit first. Device pointers are real host addresses (NumPy buffers), so
copies are ``memmove``.

A kernel that raises inside the simulator (an out-of-bounds index) is a *sticky* device fault,
as an illegal address is on a GPU: the context is broken and every later call returns
``CUDA_ERROR_ILLEGAL_ADDRESS``. Except an exception the kernel's own code raises (``raise``,
``assert``, in it or a device function it calls: ``raised_classes``), which is what numba_cube's
compiled code stores in the launch's error word (``backends/cuda/kernels/exception_codegen.py``): such a
kernel "compiles" with the error-word parameter, and the fake writes an exception id into the
word the launch passed (``FAKE_EXCEPTIONS`` decodes it), as the GPU would, and leaves the context
working. The simulator stops the kernel at the first unit that raises, so its outputs are partly
written: garbage, as on a GPU.
"""

from __future__ import annotations

import builtins
import collections
import ctypes
import dis
import gc
import itertools
import pickle
import re
import struct
import sys
import threading
import types

import numpy as np
from cuda.bindings import driver as _real

from numba_cube.backends.cuda.launch.packed_launch import (
    ArgLayout, CompiledKernel, flat_leaves, scalar_format,
)
from numba_cube.backends.cuda.kernels.compiler import arg_kinds
from numba_cube.runtime.launch.composite import RecordRef, TupleArg, TypedScalar
from numba_cube_cudasim.backend import SIMULATOR_LOCK
from numba_cube_cudasim.isolation import isolated, uses_grid_sync

R = _real.CUresult
OK = R.CUDA_SUCCESS
LEGACY = 1
PER_THREAD = 2
#: what a fake "cubin" starts with (``FakeCompiler.image_of``, ``FakeApi.cuModuleLoadData``)
FAKE_IMAGE_MAGIC = b"FAKECUBIN1\n"


#: exception id -> (class, args): what the fake's error words hold (ids as numba_cube's)
FAKE_EXCEPTIONS: dict[int, tuple] = {}
_FAKE_IDS = itertools.count(1 << 20)
#: the simulator's prefix of a unit's exception message
_UNIT_PREFIX = re.compile(r"^tid=\[[^\]]*\] ctaid=\[[^\]]*\](: )?")


def raised_classes(fn, seen=None) -> set:
    """Names of the exception classes ``fn``'s code (and the device functions it reaches
    through its globals) may raise: a global exception class it names, ``AssertionError`` for an
    ``assert``. Empty: it cannot raise (the fake's stand-in for numba-cuda's static answer)."""
    seen = set() if seen is None else seen
    if id(fn) in seen:
        return set()
    seen.add(id(fn))
    found = set()
    stack = [fn.__code__]
    while stack:
        code = stack.pop()
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        if any(i.opname == "LOAD_ASSERTION_ERROR" for i in dis.get_instructions(code)):
            found.add("AssertionError")
        for name in code.co_names:
            value = fn.__globals__.get(name, getattr(builtins, name, None))
            if isinstance(value, type) and issubclass(value, BaseException):
                found.add(value.__name__)
            py = getattr(value, "py_func", value)
            if isinstance(py, types.FunctionType):
                found |= raised_classes(py, seen)
    return found


class FakeErrors:
    """``KernelErrors`` of the fake: an error word's id back to the exception."""

    def exception(self, code: int) -> BaseException:
        cls, args = FAKE_EXCEPTIONS[code]
        return cls(*args)


def _exception_id(exc: BaseException) -> int:
    """The id of the exception a unit raised, its message without the simulator's prefix."""
    args = exc.args
    if args and isinstance(args[0], str):
        message = _UNIT_PREFIX.sub("", args[0])
        args = ((message,) + tuple(args[1:])) if message else tuple(args[1:])
    for code, (cls, known) in FAKE_EXCEPTIONS.items():
        if cls is type(exc) and known == args:
            return code
    code = next(_FAKE_IDS)
    FAKE_EXCEPTIONS[code] = (type(exc), args)
    return code


class _Event:
    """An event and its records. A record is identified by its generation; completion is kept
    per record, not as a high-water mark: one event re-recorded on *another* stream may complete
    its later record first, and a stream wait bound to the earlier record must still wait for
    that one (as in CUDA, where a wait binds to the record current at ``cuStreamWaitEvent``)."""

    def __init__(self, timing):
        self.timing = timing
        self.gen = 0          # records made
        self.completed = {0}  # generations completed (0: "never recorded" is complete)

    def done(self, gen: int) -> bool:
        return gen in self.completed


class _Stream:
    def __init__(self, sid):
        self.sid = sid
        self.ops: collections.deque = collections.deque()
        self.capturing = None  # list of recorded kernel ops while capturing


def _renest(template: tuple, leaves) -> list:
    """The kernel's arguments from its decoded flat parameters: each composite of the launch
    (``template``) rebuilt around the parameters it was flattened into."""
    out = []
    for a in template:
        if type(a) is TupleArg:
            items = _renest(a.items, leaves)
            out.append(tuple(items) if a.cls is None else a.cls(*items))
        elif type(a) is TypedScalar:
            values = [next(leaves) for _ in a.leaves()]
            if isinstance(a.value, np.generic):                 # a date: its int64
                out.append(values[0].view(a.value.dtype))
            else:                                               # an enum: its value's numbers
                flat = [v.item() for v in values]
                out.append(type(a.value)(flat[0] if len(flat) == 1 else _unflatten(a.value.value, flat)))
        else:
            out.append(next(leaves))
    return out


def _unflatten(like, flat: list):
    """``flat`` numbers back in the (nested) tuple structure of ``like``."""
    if not isinstance(like, tuple):
        return flat.pop(0)
    return tuple(_unflatten(v, flat) for v in like)


class _Function:
    def __init__(self, py_func, args, error_word: bool = False):
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        self.fake = FakeCUDAKernel(isolated(py_func, {}), device=False, fastmath=False)
        self.kinds = arg_kinds(args)
        # The exception classes its code raises: with any, it has the error-word parameter.
        self.raises = raised_classes(py_func) if error_word else set()
        # Per flattened parameter (tuples are their items, a record a pointer: packed_launch.py);
        # ``template`` is what puts the decoded parameters back into tuples, records, enums.
        self.template = args
        self.dtypes = [a.binding.dtype if type(a) is RecordRef else getattr(a, "dtype", None)
                       for a in flat_leaves(args)]
        self.layout = ArgLayout(self.kinds, bool(self.raises))
        self.name = getattr(py_func, "__name__", "kernel")
        self.py_func = py_func
        # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: 48 KiB less the static part until raised
        self.max_dynamic_shared = FakeApi.DEFAULT_SHARED_PER_BLOCK


class FakeApi:
    """The subset of ``cuda.bindings.driver`` the CUDA backend uses, on host memory."""

    # Enums and handle types come from the real bindings (they need no driver).
    CUresult = R
    CUstream = _real.CUstream
    CUevent = _real.CUevent
    CUkernel = _real.CUkernel
    CUfunction = _real.CUfunction
    CUdevice_attribute = _real.CUdevice_attribute
    CUstream_flags = _real.CUstream_flags
    CUevent_flags = _real.CUevent_flags
    CUpointer_attribute = _real.CUpointer_attribute
    CUstreamCaptureMode = _real.CUstreamCaptureMode
    CUfunction_attribute = _real.CUfunction_attribute

    #: shared memory per cube: without opting in (48 KiB), and the most with it (an H200's)
    DEFAULT_SHARED_PER_BLOCK = 48 * 1024
    MAX_SHARED_PER_BLOCK_OPTIN = 227 * 1024

    def __init__(self, devices: int = 2, sm_count: int = 4):
        self.devices = devices
        self.sm_count = sm_count
        self._ids = itertools.count(100)
        self._local = threading.local()
        self._lock = threading.RLock()
        self.broken = None                      # CUresult of a sticky fault
        self.allocs: dict[int, tuple] = {}      # base address -> (numpy buffer, device ordinal)
        self.streams: dict[int, _Stream] = {LEGACY: _Stream(LEGACY), PER_THREAD: _Stream(PER_THREAD)}
        self.events: dict[int, _Event] = {}
        self.functions: dict[int, _Function] = {}
        self.modules: dict[int, tuple] = {}     # cuModuleLoadData: (py_func, args)
        self.compilers: list = []               # the FakeCompiler of each server made
        self.graphs: dict[int, list] = {}
        self.execs: dict[int, list] = {}
        self.calls = collections.Counter()
        self.launches = 0
        self.cooperative_launches = 0
        self.shared_bytes_launched: list[int] = []   # cuLaunchKernel's sharedMemBytes, in order
        self.word_launches: list[int] = []      # the error word of each launch that had one
        self.words_written = 0                  # error words a raising kernel wrote
        self.device_of_ctx = {1000 + d: d for d in range(devices)}

    # -- helpers -----------------------------------------------------------------------------------
    def _sticky(self):
        return (self.broken,) if self.broken is not None else None

    def _alloc_host(self, nbytes: int, device: int) -> int:
        buf = np.zeros(max(nbytes, 1) + 256, np.uint8)
        base = buf.ctypes.data
        shift = (-base) % 256
        view = buf[shift:shift + max(nbytes, 1)]
        addr = view.ctypes.data
        self.allocs[addr] = (view, buf, device)
        return addr

    def find(self, ptr: int):
        for base, (view, _, dev) in self.allocs.items():
            if base <= ptr < base + view.nbytes:
                return base, view.nbytes, dev
        return None

    def _stream(self, handle) -> _Stream:
        sid = int(handle)
        if sid == 0:
            sid = LEGACY
        return self.streams[sid]

    def _enqueue(self, handle, op) -> None:
        st = self._stream(handle)
        if st.capturing is not None:
            if op[0] != "kernel":
                raise RuntimeError(f"fake driver: {op[0]} cannot be captured")
            st.capturing.append(op)
        else:
            st.ops.append(op)

    # -- the scheduler: progress only when the host blocks --------------------------------------------
    def _runnable(self, st: _Stream) -> bool:
        if not st.ops:
            return False
        op = st.ops[0]
        if op[0] == "wait":
            return op[1].done(op[2])
        return True

    def _step(self) -> bool:
        for sid in sorted(self.streams, reverse=True):   # newest stream first: adversarial
            st = self.streams[sid]
            if self._runnable(st):
                self._run(st.ops.popleft())
                return True
        return False

    def _run(self, op) -> None:
        kind = op[0]
        if kind == "record":
            op[1].completed.add(op[2])
        elif kind == "copy":
            ctypes.memmove(op[1], op[2], op[3])
        elif kind == "kernel":
            _, func, grid, block, values, shared, word = op
            self._run_kernel(func, grid, block, values, shared, word)

    def _drain(self, done) -> int:
        while not done():
            if self.broken is not None:
                return self.broken
            if not self._step():
                raise RuntimeError("fake driver: deadlock (a wait that nothing will satisfy)")
        return self.broken if self.broken is not None else OK

    def _run_kernel(self, func: _Function, grid, block, values, shared: int = 0,
                    word: int = 0) -> None:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        args = []
        for (kind, v), dtype in zip(values, func.dtypes):
            if kind == "array":
                ptr, shape, strides = v
                if 0 in shape:
                    low = high = 0
                else:
                    low = sum((d - 1) * st for d, st in zip(shape, strides) if st < 0)
                    high = dtype.itemsize + sum((d - 1) * st for d, st in zip(shape, strides) if st > 0)
                raw = (ctypes.c_uint8 * max(high - low, 1)).from_address(ptr + low)
                arr = np.ndarray(shape, dtype, np.frombuffer(raw, np.uint8), -low, strides)
                args.append(FakeCUDAArray(arr) if arr.ndim else arr)
            elif kind == "record":
                raw = (ctypes.c_uint8 * dtype.itemsize).from_address(v)
                # The record in device memory; a recarray's record has the attribute access
                # the simulator gives only to a top-level one (also inside a tuple here).
                args.append(np.frombuffer(raw, dtype).view(np.recarray)[0])
            else:
                args.append(v)
        args = _renest(func.template, iter(args))
        # No garbage collection while the simulator's unit threads start: a handle's finalizer
        # run there (the collector picks any thread) would call this driver, whose lock the
        # thread waiting for them holds: a deadlock no real driver can have.
        collecting = gc.isenabled()
        gc.disable()
        try:
            with SIMULATOR_LOCK:
                func.fake[grid, block, 0, shared](*args)
        except Exception as exc:  # noqa: BLE001 - a kernel fault breaks the context (sticky)
            if word and type(exc).__name__ in func.raises:
                # The kernel's own raise: its id in the launch's error word (module docstring).
                ctypes.c_int32.from_address(word).value = _exception_id(exc)
                self.words_written += 1
                return
            self.broken = R.CUDA_ERROR_ILLEGAL_ADDRESS
            self.fault_reason = exc
            for st in self.streams.values():
                st.ops.clear()
        finally:
            if collecting:
                gc.enable()

    def _decode(self, func: _Function, params: int) -> list:
        """Copy the kernel's parameters out of ``kernelParams`` (the driver does it at launch)."""
        n = func.layout.nparams
        ptrs = (ctypes.c_void_p * max(n, 1)).from_address(params)
        values = []
        k = 0
        for kind in func.kinds:
            if kind[0] == "array":
                ndim = kind[1]
                raw = [ctypes.c_int64.from_address(ptrs[k + j]).value for j in range(5 + 2 * ndim)]
                meminfo, parent, nitems, itemsize, data = raw[:5]
                shape = tuple(raw[5:5 + ndim])
                strides = tuple(raw[5 + ndim:])
                assert meminfo == 0 and parent == 0, "meminfo/parent must be null"
                assert itemsize == kind[2], f"itemsize {itemsize} != {kind[2]}"
                assert nitems == int(np.prod(shape, dtype=np.int64)), "nitems does not match shape"
                # (any strides: F-ordered, strided and broadcast views keep theirs, as
                # numba-cuda packs them; the kernel is run over exactly those)
                values.append(("array", (ctypes.c_uint64.from_address(ptrs[k + 4]).value, shape,
                                         strides)))
                k += 5 + 2 * ndim
            elif kind[0] == "record":
                values.append(("record", ctypes.c_uint64.from_address(ptrs[k]).value))
                k += 1
            else:
                fmt = scalar_format(kind[1])
                parts = []
                for ch in fmt:
                    size = struct.calcsize("<" + ch)
                    parts.append(struct.unpack("<" + ch, ctypes.string_at(ptrs[k], size))[0])
                    k += 1
                value = complex(parts[0], parts[1]) if len(parts) == 2 else parts[0]
                values.append(("scalar", kind[1].type(value)))
        word = ctypes.c_uint64.from_address(ptrs[k]).value if func.layout.error_word else 0
        return values, word

    # -- the API -------------------------------------------------------------------------------------
    def cuGetErrorString(self, code):
        return (OK, f"fake: {getattr(code, 'name', code)}".encode())

    def cuInit(self, flags):
        return (OK,)

    def cuDeviceGetCount(self):
        return (OK, self.devices)

    def cuDeviceGet(self, ordinal):
        if not 0 <= ordinal < self.devices:
            return (R.CUDA_ERROR_INVALID_DEVICE, None)
        return (OK, ordinal)

    def cuDeviceGetName(self, length, dev):
        return (OK, f"Fake GPU {dev}".encode())

    def cuDeviceGetAttribute(self, attr, dev):
        if attr == _real.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
            return (OK, self.MAX_SHARED_PER_BLOCK_OPTIN)
        return (OK, self.sm_count)

    def cuFuncGetAttribute(self, attr, f):
        if attr != _real.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
            return (R.CUDA_ERROR_NOT_SUPPORTED, None)
        return (OK, self.functions[int(f)].max_dynamic_shared)

    def cuFuncSetAttribute(self, f, attr, value):
        self.calls["cuFuncSetAttribute"] += 1
        if attr != _real.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES \
                or not 0 <= value <= self.MAX_SHARED_PER_BLOCK_OPTIN:
            return (R.CUDA_ERROR_INVALID_VALUE,)
        self.functions[int(f)].max_dynamic_shared = value
        return (OK,)

    def cuDevicePrimaryCtxRetain(self, dev):
        return (OK, 1000 + int(dev))

    def cuCtxGetCurrent(self):
        self.calls["cuCtxGetCurrent"] += 1
        return (OK, getattr(self._local, "ctx", 0))

    def cuCtxSetCurrent(self, ctx):
        self.calls["cuCtxSetCurrent"] += 1
        self._local.ctx = int(ctx)
        return (OK,)

    def _ctx_device(self):
        ctx = getattr(self._local, "ctx", 0)
        if ctx not in self.device_of_ctx:
            raise RuntimeError("fake driver: no current context (the server must activate it)")
        return self.device_of_ctx[ctx]

    def cuCtxSynchronize(self):
        with self._lock:
            return (self._drain(lambda: not any(st.ops for st in self.streams.values())),)

    def cuMemAlloc(self, nbytes):
        with self._lock:
            if self.broken is not None:
                return (self.broken, None)
            return (OK, self._alloc_host(nbytes, self._ctx_device()))

    def cuMemFree(self, ptr):
        with self._lock:
            self.allocs.pop(int(ptr), None)
            return (OK,)

    def cuMemAllocHost(self, nbytes):
        with self._lock:
            return (OK, self._alloc_host(nbytes, -1))

    def cuMemFreeHost(self, ptr):
        return self.cuMemFree(ptr)

    def cuMemHostGetDevicePointer(self, ptr, flags):
        self.calls["cuMemHostGetDevicePointer"] += 1
        return (OK, int(ptr))           # unified addressing: the same address

    def cuMemcpyHtoD(self, dst, src, n):
        if self.broken is not None:
            return self._sticky()
        self._ctx_device()
        ctypes.memmove(int(dst), int(src), n)
        return (OK,)

    def cuMemcpyDtoH(self, dst, src, n):
        if self.broken is not None:
            return self._sticky()
        self._ctx_device()
        ctypes.memmove(int(dst), int(src), n)
        return (OK,)

    def cuMemcpyHtoDAsync(self, dst, src, n, stream):
        with self._lock:
            if self.broken is not None:
                return self._sticky()
            self._enqueue(stream, ("copy", int(dst), int(src), n))
            return (OK,)

    cuMemcpyDtoHAsync = cuMemcpyHtoDAsync

    def cuMemGetAddressRange(self, ptr):
        found = self.find(int(ptr))
        if found is None:
            return (R.CUDA_ERROR_NOT_FOUND, None, None)
        return (OK, found[0], found[1])

    def cuPointerGetAttribute(self, attr, ptr):
        found = self.find(int(ptr))
        if found is None or found[2] < 0:
            return (R.CUDA_ERROR_INVALID_VALUE, None)
        return (OK, found[2])

    def cuStreamCreate(self, flags):
        with self._lock:
            sid = next(self._ids)
            self.streams[sid] = _Stream(sid)
            return (OK, _real.CUstream(sid))

    def cuStreamDestroy(self, stream):
        return (OK,)

    def cuStreamSynchronize(self, stream):
        with self._lock:
            st = self._stream(stream)
            return (self._drain(lambda: not st.ops),)

    def cuStreamWaitEvent(self, stream, event, flags):
        with self._lock:
            if self.broken is not None:
                return self._sticky()
            ev = self.events[int(event)]
            self._stream(stream).ops.append(("wait", ev, ev.gen))
            self.calls["cuStreamWaitEvent"] += 1
            return (OK,)

    def cuEventCreate(self, flags):
        with self._lock:
            eid = next(self._ids)
            self.events[eid] = _Event(not (flags & 2))
            return (OK, _real.CUevent(eid))

    def cuEventDestroy(self, event):
        return (OK,)

    def cuEventRecord(self, event, stream):
        with self._lock:
            if self.broken is not None:
                return self._sticky()
            ev = self.events[int(event)]
            ev.gen += 1
            self._stream(stream).ops.append(("record", ev, ev.gen))
            self.calls["cuEventRecord"] += 1
            return (OK,)

    def cuEventQuery(self, event):
        with self._lock:
            if self.broken is not None:
                return self._sticky()
            ev = self.events[int(event)]
            return (OK,) if ev.done(ev.gen) else (R.CUDA_ERROR_NOT_READY,)

    def cuEventSynchronize(self, event):
        with self._lock:
            ev = self.events[int(event)]
            target = ev.gen
            return (self._drain(lambda: ev.done(target)),)

    def cuEventElapsedTime(self, start, end):
        return (OK, 0.5)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        with self._lock:
            if self.broken is not None:
                return self._sticky()
            if bx * by * bz > 1024 or bz > 64 or gy > 65535 or gz > 65535 or min(gx, gy, gz, bx, by, bz) < 1:
                return (R.CUDA_ERROR_INVALID_VALUE,)
            func = self.functions[int(f)]
            if shmem > func.max_dynamic_shared:     # as a driver: above 48 KiB only once opted in
                return (R.CUDA_ERROR_INVALID_VALUE,)
            values, word = self._decode(func, int(params))
            if func.layout.error_word:
                self.word_launches.append(word)
            self._enqueue(stream, ("kernel", func, (gx, gy, gz), (bx, by, bz), values, shmem,
                                   word))
            self.launches += 1
            self.shared_bytes_launched.append(shmem)
            return (OK,)

    def cuLaunchCooperativeKernel(self, f, gx, gy, gz, bx, by, bz, shmem, stream, params):
        self.cooperative_launches += 1
        return self.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, stream, params, 0)

    def cuKernelGetFunction(self, kernel):
        return (OK, _real.CUfunction(int(kernel)))

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, func, threads, shmem):
        return (OK, 2 if threads <= 1024 else 0)

    def cuStreamBeginCapture(self, stream, mode):
        with self._lock:
            self._stream(stream).capturing = []
            return (OK,)

    def cuStreamEndCapture(self, stream):
        with self._lock:
            st = self._stream(stream)
            nodes, st.capturing = st.capturing, None
            gid = next(self._ids)
            self.graphs[gid] = nodes
            return (OK, gid)

    def cuGraphInstantiate(self, graph, flags):
        gid = next(self._ids)
        self.execs[gid] = list(self.graphs[int(graph)])
        return (OK, gid)

    def cuGraphLaunch(self, graph_exec, stream):
        with self._lock:
            if self.broken is not None:
                return self._sticky()
            for op in self.execs[int(graph_exec)]:
                self._stream(stream).ops.append(op)
            self.calls["cuGraphLaunch"] += 1
            return (OK,)

    def cuGraphDestroy(self, graph):
        return (OK,)

    def cuGraphExecDestroy(self, graph_exec):
        return (OK,)

    def cuDriverGetVersion(self):
        return (OK, 12080)

    def cuModuleLoadData(self, image):
        """A fake "cubin" (``FakeCompiler.image_of``): the kernel's Python function, found by
        module and qualified name in this process, and the arguments it was compiled for."""
        data = bytes(image)
        if not data.startswith(FAKE_IMAGE_MAGIC):
            return (R.CUDA_ERROR_INVALID_IMAGE, None)
        modname, qualname, args = pickle.loads(data[len(FAKE_IMAGE_MAGIC):])
        found = sys.modules.get(modname)
        for part in qualname.split("."):
            found = getattr(found, part, None)
        py_func = getattr(found, "py_func", found)
        if not callable(py_func):
            return (R.CUDA_ERROR_INVALID_IMAGE, None)
        with self._lock:
            mid = next(self._ids)
            self.modules[mid] = (py_func, args)
            self.calls["cuModuleLoadData"] += 1
        return (OK, mid)

    def cuModuleGetFunction(self, module, name):
        py_func, args = self.modules[int(module)]
        if name != py_func.__name__.encode():
            return (R.CUDA_ERROR_NOT_FOUND, None)
        with self._lock:
            fid = next(self._ids)
            self.functions[fid] = _Function(py_func, args)
        return (OK, _real.CUfunction(fid))


class FakeCompiler:
    """Stands in for ``compiler.NumbaCudaCompiler``: "compiles" to a simulator kernel.

    With ``images`` (a ``Driver`` over the api and the device index), it also hands back a fake
    "cubin" for the on-disk cache (``diskcache.py``), which ``FakeApi.cuModuleLoadData`` loads in
    another process; ``compiled`` counts the compiles it did."""

    def __init__(self, api: FakeApi, images=None):
        self.api = api
        self.images = images          # (driver, device index) or None: no on-disk cache
        self.compiled = 0

    def disk_cache(self):
        if self.images is None:
            return None
        from numba_cube.backends.cuda.kernels.diskcache import DiskCache

        return DiskCache(*self.images)

    def image_of(self, compiled):
        from numba_cube.backends.cuda.kernels.diskcache import CodeImage

        if compiled.raises is not None:
            return "it can raise (as numba_cube's compiler: not kept)"
        func = compiled.source
        py_func = func.py_func
        data = FAKE_IMAGE_MAGIC + pickle.dumps((py_func.__module__, py_func.__qualname__,
                                                func.template))
        return CodeImage("cubin", data, func.name, f"// fake PTX of {func.name}")

    def compile(self, key, py_func, name, args, options, user_dispatcher=None,
                kernel_errors="check"):
        from numba_cube.errors import CompileError

        self.compiled += 1
        if getattr(py_func, "refuse_compile", False):
            raise CompileError(f"kernel {name} refused by the fake compiler")
        func = _Function(py_func, args, error_word=kernel_errors == "check"
                         and not options.get("debug"))
        fid = next(self.api._ids)
        self.api.functions[fid] = func
        api = self.api

        def occupancy(threads):
            return api.cuOccupancyMaxActiveBlocksPerMultiprocessor(fid, threads, 0)[1]

        # Which kernels need a cooperative launch is numba-cuda's answer on a GPU; here the same
        # question is asked of the Python code (does it use the grid group?).
        # Static shared memory is not compiled here: a kernel function may declare it for the
        # fake (``static_shared_bytes``), as ``refuse_compile`` declares a compile failure.
        static = getattr(py_func, "static_shared_bytes", 0)
        func.max_dynamic_shared = FakeApi.DEFAULT_SHARED_PER_BLOCK - static
        compiled = CompiledKernel(name, _real.CUfunction(fid), func.layout, 1024, static,
                                  occupancy, func, cooperative=uses_grid_sync(py_func))
        if func.raises:
            compiled.raises = FakeErrors()
        return compiled


class ForeignArray:
    """A foreign library's device array (like a CuPy array) on the fake device. ``view``, where
    given, is ``(byte offset, shape, byte strides)``: the array interface then describes that
    strided view of the memory (which holds ``data``) instead of all of it."""

    def __init__(self, api: FakeApi, data, device: int = 0, stream: int | None = LEGACY,
                 view=None):
        data = np.ascontiguousarray(data)
        self.api = api
        self.shape = data.shape
        self.dtype = data.dtype
        self.view = view
        api._local.ctx, saved = 1000 + device, getattr(api._local, "ctx", 0)
        try:
            self.ptr = api._alloc_host(data.nbytes, device)
        finally:
            api._local.ctx = saved
        ctypes.memmove(self.ptr, data.ctypes.data, data.nbytes)
        self.stream = stream

    @property
    def __cuda_array_interface__(self):
        if self.view is not None:
            offset, shape, strides = self.view
            return {"shape": shape, "typestr": self.dtype.str, "data": (self.ptr + offset, False),
                    "version": 3, "strides": strides, "stream": self.stream}
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "version": 3, "strides": None, "stream": self.stream}

    def get(self) -> np.ndarray:
        """Host copy after the fake device ran everything (like ``cupy.asnumpy`` + sync)."""
        with self.api._lock:
            self.api._drain(lambda: not any(st.ops for st in self.api.streams.values()))
        n = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        return np.frombuffer(ctypes.string_at(self.ptr, n), self.dtype).reshape(self.shape).copy()


class DLPackArray:
    """A foreign library's device array that speaks DLPack only (no array interface), on the fake
    device: ``__dlpack__`` returns a real ``DLManagedTensor`` capsule over fake-device memory."""

    def __init__(self, api: FakeApi, data, device: int = 0, device_type: int = 2, strides=None,
                 shape=None):
        """``strides`` (in elements, as DLPack counts them) and ``shape``, where given, describe
        a view of the memory holding ``data`` instead of all of it."""
        from numba_cube.backends.cuda.memory.dlpack import DLManagedTensor

        self.array = ForeignArray(api, data, device=device, stream=None)   # owns the memory
        shape = self.array.shape if shape is None else tuple(shape)
        ndim = len(shape)
        self._shape = (ctypes.c_int64 * max(ndim, 1))(*shape)
        self._strides = None if strides is None else (ctypes.c_int64 * ndim)(*strides)
        self._managed = managed = DLManagedTensor()
        t = managed.dl_tensor
        t.data, t.ndim, t.byte_offset = self.array.ptr, ndim, 0
        t.device.device_type, t.device.device_id = device_type, device
        t.dtype.code = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}[self.array.dtype.kind]
        t.dtype.bits, t.dtype.lanes = self.array.dtype.itemsize * 8, 1
        t.shape = self._shape
        if self._strides is not None:
            t.strides = self._strides
        self.streams_asked: list = []
        self.capsules: list = []

    def __dlpack_device__(self):
        t = self._managed.dl_tensor
        return (t.device.device_type, t.device.device_id)

    def __dlpack__(self, stream=None):
        self.streams_asked.append(stream)
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        capsule = new(ctypes.addressof(self._managed), b"dltensor", None)
        self.capsules.append(capsule)
        return capsule

    def capsule_consumed(self, capsule) -> bool:
        """Whether a consumer renamed the capsule (``used_dltensor``), taking over its deleter."""
        valid = ctypes.pythonapi.PyCapsule_IsValid
        valid.restype, valid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
        return not valid(capsule, b"dltensor")

    def get(self) -> np.ndarray:
        return self.array.get()


def register_fake_cuda(name: str = "fakecuda", devices: int = 2, images: bool = False) -> FakeApi:
    """Register backend ``name`` whose devices are CUDA servers (``make_gpu_server``) over one
    ``FakeApi``; ``images``: their compilers hand back fake cubins for the on-disk cache."""
    from numba_cube.backends.cuda.driver.driver import Driver
    from numba_cube.backends.cuda.server import make_gpu_server
    from numba_cube.runtime.registry import register_backend

    api = FakeApi(devices)
    driver = Driver(api)

    def factory(index):
        compiler = FakeCompiler(api, (driver, index) if images else None)
        api.compilers.append(compiler)
        return make_gpu_server(index, name, driver=driver, compiler=compiler)

    register_backend(name, factory, source="tests/cuda fake driver")
    return api
