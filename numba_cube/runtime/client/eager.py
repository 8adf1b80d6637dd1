"""The numba-style launch: ``kernel[count, dim](*args)`` with host NumPy arrays.

Existing numba.cuda code passes NumPy arrays and expects them updated when the call returns. So:
host arrays are copied into fresh handles, the launch runs on the current client, and the arrays
the kernel writes (its write set, CONTRACT.md 4.2) are read back into the caller's arrays. Handles
may be mixed in and are passed through untouched.

Layouts are numba.cuda's (``auto_device``): an F-ordered array stays F-ordered on the device (the
kernel is typed ``Array(..., "F")``), a broadcast one keeps its stride-0 axes over one copy of its
core, and an array that is no contiguous block is refused (``LayoutError``, a ``ValueError``), as
numba's ``sentry_contiguous`` refuses it (``_stage_array``).

Host arrays inside tuple arguments are copied in and back the same way (an array in a tuple is
copied back when the analysis says the tuple parameter is written). A structured scalar
(``arr[k]``, a NumPy record) is passed as numba.cuda passes it: by reference to a copy that is
copied back into the caller's record after the launch, written or not.

A kernel wrapped from a dispatcher with numba-cuda's ``extensions`` (launch-time argument
converters) runs them first, as numba-cuda does: each argument goes through every extension's
``prepare_args``, and what they leave in ``retr`` runs after the launch and the copy-backs.

The call is synchronous, so its failure is raised right there, as ``LaunchFailure``, whether or
not the launch writes a buffer that could carry it (a kernel with only scalar or read-only
arguments that raises, reads out of bounds or does not compile): the launch is submitted blocking
and the server hands back *its own* outcome (``Client.launch_and_wait``), instead of the failure
being looked for on buffers, where a launch that writes none would leave no trace. The caller's
arrays are then left as they were.

numba's launch-configuration stream (``kernel[count, dim, stream]``) is honoured or refused,
never dropped (``numba_launch_stream``): a ``cube.StreamId`` is the stream of that launch, 0 and
None the usual one, anything else a ``StreamIdError`` before anything is copied or launched.

numba's argument hints keep their meaning: ``cuda.In(a)`` is copied in and never back (whatever
the kernel writes into it stays on the device, as with numba.cuda), ``cuda.Out(a)`` and
``cuda.InOut(a)`` are copied back whether or not the analysis sees a write. A hint around
something that is not a host array (a device array) is passed through as its value.
"""

from __future__ import annotations

import sys

import numpy as np

from numba_cube.errors import LayoutError, StreamIdError
from numba_cube.kernel.io_ir import TUPLE
from numba_cube.kernel.kernel import resolve_access
from numba_cube.runtime.launch.arguments import RecordArgument
from numba_cube.runtime.registry import current_client
from numba_cube.runtime.streams.identity import StreamId

__all__ = ["launch_eager"]


#: where numba keeps its argument hint classes: on a GPU, and under the CUDA simulator
_HINT_MODULES = ("numba.cuda.args", "numba.cuda.simulator.args")

#: copy-back rule of a host array: only if written (no hint), never (In), always (Out, InOut)
_IF_WRITTEN, _NEVER, _ALWAYS = "if written", "never", "always"


def _unhint(arg):
    """``(value, copy-back rule)`` of a launch argument, looking through numba's hints. Only the
    hint modules already imported are asked: without numba.cuda there can be no hint."""
    for name in _HINT_MODULES:
        mod = sys.modules.get(name)
        if mod is not None and isinstance(arg, mod.ArgHint):
            return arg.value, (_NEVER if isinstance(arg, mod.In) else _ALWAYS)
    return arg, _IF_WRITTEN


def _stage(client, i: int, a, rule: str, host: list):
    """The launch argument for the caller's ``a``: host arrays (also inside tuples) copied into
    new handles, a structured scalar into a one-element handle passed by reference (numba.cuda's
    ``wrap_arg``: always copied back, into the caller's record). Each staged buffer is added to
    ``host`` as ``(parameter index, where to copy back, handle, rule)``."""
    if isinstance(a, np.ndarray):
        return _stage_array(client, i, a, rule, host)
    if isinstance(a, np.void) and a.dtype.fields is not None:
        # np.asarray of a record is a writable 0-d view of the record's own bytes (which are the
        # caller's array's, for a record taken as arr[k]): the copy back lands there.
        target = np.asarray(a)
        h = client.create(target.reshape(1))
        host.append((i, target, h, _ALWAYS))
        return RecordArgument(h)
    if isinstance(a, tuple):
        items = [_stage(client, i, v, rule, host) for v in a]
        return tuple(items) if type(a) is tuple else type(a)(*items)
    return a


def _warn_implicit_copy(client, values: list) -> None:
    """numba-cuda's ``NumbaPerformanceWarning`` for a host array copied to a GPU and back, under
    the same switches (``NUMBA_CUDA_WARN_ON_IMPLICIT_COPY``, ``NUMBA_DISABLE_PERFORMANCE_WARNINGS``).
    Not on the CPU backend (its memory is host memory), not for arrays the device can address
    (numba's mapped arrays carry ``__cuda_array_interface__``)."""
    if not client.device.startswith("cuda"):
        return
    config = sys.modules.get("numba.cuda.core.config")
    errors = sys.modules.get("numba.cuda.core.errors")
    if config is None or errors is None:
        return
    if not getattr(config, "CUDA_WARN_ON_IMPLICIT_COPY", 0) or \
            getattr(config, "DISABLE_PERFORMANCE_WARNINGS", 0):
        return
    if any(_copied_host_array(v) for v in values):
        import warnings

        warnings.warn(errors.NumbaPerformanceWarning(
            "Host array used in CUDA kernel will incur copy overhead to/from device."),
            stacklevel=3)


def _copied_host_array(value) -> bool:
    if isinstance(value, tuple):
        return any(_copied_host_array(v) for v in value)
    return isinstance(value, np.ndarray) and not hasattr(value, "__cuda_array_interface__")


def _stage_array(client, i: int, a: np.ndarray, rule: str, host: list):
    """A host array on the device as numba.cuda's ``auto_device`` puts it there: its *core*
    (the array without its broadcast, stride-0, axes: ``devicearray.array_core``) copied as it
    is laid out, C or F, and the kernel given the caller's shape with the stride-0 axes kept, so
    an F-ordered array is typed ``Array(..., "F")`` and a broadcast one reads (and writes) its
    one copy of each element. A core that is neither C- nor F-contiguous (``a[::2]``) is
    refused, as numba's ``sentry_contiguous`` refuses it."""
    if a.size == 0 or 0 not in a.strides:
        core, broadcast = a, False
    else:
        core, broadcast = a[tuple(0 if s == 0 else slice(None) for s in a.strides)], True
    if not (core.flags.c_contiguous or core.flags.f_contiguous):
        raise LayoutError(
            f"argument {i} is a host array of shape {a.shape} and strides {a.strides}, not one "
            "contiguous block (numba.cuda refuses it too: \"Array contains non-contiguous "
            "buffer\"); pass np.ascontiguousarray(...) of it")
    h = client.create(core)
    host.append((i, core, h, rule))
    if not broadcast:
        return h
    core_strides = iter(h.strides)
    strides = tuple(0 if s == 0 else next(core_strides) for s in a.strides)
    return h.strided_view(0, a.shape, strides)


def launch_eager(kernel, count, dim, *args, shared_bytes=0, stream=None) -> None:
    """``kernel[count, dim](*args)`` (``stream``, ``shared_bytes``: ``kernel[count, dim, stream,
    nbytes]``)."""
    client = current_client()
    stream_id = numba_launch_stream(stream, client.server)
    if stream_id is not None:
        # The launch's explicit stream wins over a pinned client's and the thread's, as numba's
        # stream argument names the queue of exactly this launch.
        client = client.set_stream(stream_id)
    retr: list = []
    if kernel.extensions:
        args = _run_extensions(kernel.extensions, args, retr)
    _launch_and_copy_back(client, kernel, count, dim, args, shared_bytes)
    for write_back in retr:         # the extensions' own copy-backs, after ours, as numba-cuda
        write_back()


def numba_launch_stream(stream, server=None) -> StreamId | None:
    """The ``StreamId`` of numba's launch-configuration stream, or None for the launch's usual
    stream (the client's pinned one, else the thread's).

    ``0`` and ``None`` are numba's default stream: numba_cube orders every launch after the work
    on the buffers it shares, so the default stream's serialization adds nothing a user can
    observe. A numba-cuda, CuPy or cuda.core stream object (``synchronize()`` or ``sync()``; what
    numba's own launch configuration holds on a GPU) is honoured the way a numba-style launch can: that
    launch is synchronous (it returns when the kernel is done), so synchronizing the foreign
    stream first orders it after everything queued there, and anything queued there later, or a
    ``stream.synchronize()`` after it, is ordered after it by construction. Any other value is a
    ``StreamIdError``."""
    if stream is None or (type(stream) is int and stream == 0):
        return None
    if isinstance(stream, StreamId):
        return stream
    # numba-cuda's and CuPy's streams have synchronize(); cuda.core's (what numba-cuda's own
    # launch configuration holds on a GPU, the default stream included) has sync().
    for name in ("synchronize", "sync"):
        synchronize = getattr(stream, name, None)
        if callable(synchronize):
            if server is None:
                synchronize()
            else:           # on this thread, with the device's context current (a CUDA one)
                server.synchronize_foreign(synchronize)
            return None
    raise StreamIdError(
        f"kernel[count, dim, stream] takes a cube.StreamId (cube.StreamId.new()), 0 or None (the "
        f"launch's usual stream), or a numba-cuda/CuPy stream object (synchronized first); got "
        f"{type(stream).__name__} {stream!r}")


def _run_extensions(extensions, args: tuple, retr: list) -> tuple:
    """Each argument through numba-cuda's ``extensions`` (``prepare_args(ty, val, stream=,
    retr=)``, in order), as numba-cuda runs them before a launch: an extension may wrap a value
    in an argument hint (``cuda.In``) or replace it; what it appends to ``retr`` runs after the
    launch. (Its ``ty`` is Numba's type of the value: numba_cube has no declared one to give.)"""
    from numba import typeof

    out = []
    for a in args:
        ty = typeof(a)
        for extension in extensions:
            ty, a = extension.prepare_args(ty, a, stream=0, retr=retr)
        out.append(a)
    return tuple(out)


def _launch_and_copy_back(client, kernel, count, dim, args, shared_bytes) -> None:
    converted, host, values = [], [], []
    for i, a in enumerate(args):
        a, rule = _unhint(a)
        values.append(a)
        converted.append(_stage(client, i, a, rule, host))
    if host:
        _warn_implicit_copy(client, values)
    # raises the launch's own failure
    client.launch_and_wait(kernel, count, dim, *converted, shared_bytes=shared_bytes,
                           extensions_done=True)
    if not host:
        return
    ndims = tuple(a.ndim if isinstance(a, np.ndarray) else TUPLE if isinstance(a, tuple)
                  else None if isinstance(a, np.void)        # a record: always copied back
                  else getattr(a, "ndim", None) if hasattr(a, "shape") else None
                  for a in values)
    access = resolve_access(kernel, ndims)
    written = [(i, a, h) for i, a, h, rule in host
               if rule == _ALWAYS or (rule == _IF_WRITTEN and access[i][1])]
    host = [(i, a, h) for i, a, h, _ in host]
    # Every host buffer is checked, written or not, so a failure that reached only a read-only input
    # (impossible today, cheap to cover) cannot pass silently.
    results = client.read_many([h for _, _, h in written]) if written else []
    for (_, a, _), data in zip(written, results):
        a[...] = data.reshape(a.shape)      # (a record's one-element buffer into its 0-d view)
    for answer in client.sync_buffers(*[h for _, _, h in host]):
        if answer is not None:
            raise answer
