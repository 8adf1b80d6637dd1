"""``map_blocks``: one kernel launch per chunk, the chunks kept as handles on their worker.

``map_blocks(kernel, *args, dim=256)`` launches ``kernel`` once per chunk on the worker holding
it, with ``args`` followed by a new output buffer of the chunk's shape: the kernel's last
parameter is its output (``axpy(a, x, y, out)`` is mapped as ``map_blocks(axpy, 2.0, x, y)``).
Arrays are Dask arrays (NumPy arrays are chunked like the first Dask one); everything else is
passed to every launch as it is. The count is ``ceil(chunk size / dim)`` cubes, or what
``count(chunk_shape)`` returns.

What it returns is an ordinary Dask array of NumPy chunks, so every Dask operation and
``compute()`` work on it; underneath it sit the launches' handle chunks, and a ``map_blocks`` of
such an array takes those handles directly: a chain of kernels never leaves the device, and
only a chunk something else reads becomes host bytes (read on its worker, which waits for its
writers and raises its ``LaunchFailure``). The two layers are named ``numba_cube-<token>`` (the
handles) and ``numba_cube-read-<token>`` (the array returned), which is how a later
``map_blocks`` finds the first under the second in the graph the array already holds.

Two kernels are refused on the client, before anything is sent (``LaunchArgumentError``, naming
the kernel and the parameter), by the IO analysis (CONTRACT.md 4.2):

- one writing one of its inputs: the chunks are Dask's values, shared by every task that reads
  them, and writing one would change them under those;
- one that never writes its last parameter (an output-first signature, a forgotten store): every
  chunk would be the new buffer as allocated, and no launch fails, so nothing on the client
  would say so. "Never" is what the analysis can prove; an access it cannot resolve counts as a
  write, as everywhere else.
"""

from __future__ import annotations

import functools
import math

import dask.array as da
import numpy as np
from dask.base import tokenize

import numba_cube as cube
from numba_cube.errors import LaunchArgumentError
from numba_cube.kernel.kernel import resolve_access
from numba_cube.runtime.handle import Handle

from .kernels import TravellingKernel
from .plugin import client_of, worker_of, worker_client
from .serialize import FailedChunk, raise_failure

HANDLES_PREFIX = "numba_cube-"
READ_PREFIX = "numba_cube-read-"


def map_blocks(kernel, *args, dim=256, count=None, dtype=None) -> da.Array:
    """A kernel launch per chunk; see the module docstring. ``dtype`` of the output: the first
    array argument's unless given."""
    kernel = cube.kernel(kernel)
    if len(args) != len(kernel.params) - 1:
        raise LaunchArgumentError(
            f"kernel {kernel.name} takes {len(kernel.params)} arguments, its last the output "
            f"map_blocks makes per chunk; got {len(args)} (expected {len(kernel.params) - 1})")
    arrays = [a for a in args if isinstance(a, (da.Array, np.ndarray))]
    if not arrays:
        raise LaunchArgumentError(f"map_blocks({kernel.name}, ...) needs at least one array")
    first = next((a for a in arrays if isinstance(a, da.Array)), None)
    args = tuple(da.from_array(a, chunks=first.chunks if first is not None else "auto")
                 if isinstance(a, np.ndarray) else a for a in args)
    first = first if first is not None else next(a for a in args if isinstance(a, da.Array))
    for a in args:
        if isinstance(a, da.Array) and a.shape != first.shape:
            raise LaunchArgumentError(
                f"map_blocks({kernel.name}, ...): arrays of shapes {a.shape} and {first.shape}; "
                "every array argument has the shape of the output")
    _refuse_bad_access(kernel, args)
    out_dtype = np.dtype(dtype if dtype is not None else first.dtype)
    meta = np.empty((0,) * first.ndim, out_dtype)
    token = tokenize(TravellingKernel(kernel), dim, count, out_dtype, *args)
    handles = da.map_blocks(
        functools.partial(_launch_block, TravellingKernel(kernel), dim, count, out_dtype),
        *(handles_of(a) for a in args), dtype=out_dtype, meta=meta,
        name=HANDLES_PREFIX + token)
    return da.map_blocks(_read_block, handles, dtype=out_dtype, meta=meta,
                         name=READ_PREFIX + token)


def _refuse_bad_access(kernel: cube.Kernel, args) -> None:
    """Refuse a kernel that writes an input or never writes its output (module docstring)."""
    ndims = tuple(a.ndim if isinstance(a, da.Array) else None for a in args) + (_output_ndim(args),)
    access = resolve_access(kernel, ndims)
    for name, arg, (_, written) in zip(kernel.params, args, access):
        if isinstance(arg, da.Array) and written:
            raise LaunchArgumentError(
                f"kernel {kernel.name} writes (or may write: declare reads=/writes=) its input "
                f"{name!r}; map_blocks chunks are Dask's values, shared by every task reading "
                "them, so a kernel may write only its output (the last parameter)")
    if not access[-1][1]:
        # Checked here: on the workers such a launch succeeds, and its chunks are whatever the
        # new output buffer held, with no failure for compute() to raise.
        raise LaunchArgumentError(
            f"kernel {kernel.name} never writes its last parameter {kernel.params[-1]!r}, which "
            "map_blocks makes per chunk as the output: every chunk would be left as allocated. "
            "The output is the last parameter (axpy(a, x, y, out) is mapped as "
            "map_blocks(axpy, a, x, y))")


def _output_ndim(args) -> int:
    return next(a.ndim for a in args if isinstance(a, da.Array))


def handles_of(arg):
    """The handle chunks under an array ``map_blocks`` returned (a Dask array whose chunks are
    numba_cube ``Handle``s, kept on their workers when persisted), else ``arg`` itself."""
    if not (isinstance(arg, da.Array) and arg.name.startswith(READ_PREFIX)):
        return arg
    handles_name = HANDLES_PREFIX + arg.name[len(READ_PREFIX):]
    if handles_name not in arg.dask.layers:       # persisted, or rebuilt: only the read chunks
        return arg
    return da.Array(arg.dask, handles_name, arg.chunks,
                    meta=np.empty((0,) * arg.ndim, arg.dtype))


def _launch_block(travelling: TravellingKernel, dim, count, out_dtype, *blocks):
    """The task of one chunk: the kernel launched on this worker's client into a new output."""
    client = worker_client()
    launch_args, shape = [], None
    for block in blocks:
        if isinstance(block, FailedChunk):
            raise_failure(block)
        if isinstance(block, Handle):
            if block.device != client.device:      # another in-process worker's chunk
                block = client.create(_read_block(block))
        elif isinstance(block, np.ndarray):
            block = client.create(block)
        if shape is None and isinstance(block, Handle):
            shape = block.shape
        launch_args.append(block)
    out = client.empty(shape, out_dtype)
    cubes = count(shape) if count is not None else max(1, math.ceil(math.prod(shape) / _units(dim)))
    # real_run: a precompile's dry run is process-wide, and must not skip this job's launches
    with cube.real_run():
        client.launch(travelling.kernel, cubes, dim, *launch_args, out)
    return out


def _units(dim) -> int:
    return math.prod(dim) if isinstance(dim, tuple) else int(dim)


def _read_block(block):
    """The host chunk of a handle chunk: waits for its writers; raises its ``LaunchFailure``."""
    if isinstance(block, FailedChunk):
        raise_failure(block)
    if isinstance(block, np.ndarray):              # moved here: the serializer read it already
        return block
    try:
        return client_of(block).read(block)
    except cube.LaunchFailure as failure:
        raise_failure(FailedChunk(failure, worker_of(block)))
