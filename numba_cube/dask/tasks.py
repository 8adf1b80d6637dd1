"""The tasks a numba_cube dask array runs on the workers: one launch per chunk, and its read.

``launch_block`` launches the kernel on the worker's client, with the chunk's arguments followed
by output buffers of the output chunk's shape (Dask hands each task its output chunk's shape
and index, ``graph.launch_layer``), and returns the output handles: views of them when a halo is
trimmed (``map_overlap``: the trim stays on the device). NumPy input chunks and free pure
outputs use this thread's reused buffers (``staging.py``), so launches repeat exactly.
``read_block`` turns a handle chunk into an array chunk (``chunks.array_chunk``).

Every error a task raises about a chunk names the kernel (a ``LaunchFailure`` names the kernel
that failed first, and its chain), and a note gives the chunk's index, the array and the Dask
worker: ``compute()`` re-raises the task's error, notes included.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

import numba_cube as cube
from numba_cube.errors import CubeError
from numba_cube.runtime.memory.handle import Handle

from .chunks import array_chunk
from .kernels import TravellingKernel
from .plugin import client_of, this_worker_address, worker_client
from .serialize import FailedChunk, raise_failure
from .staging import pooled_output, staged_input


class HaloTrim(NamedTuple):
    """What ``map_overlap`` trims off each output chunk: ``depth`` per axis, on both sides,
    except on the array's own edges along axes whose boundary is ``"none"`` (nothing was added
    there)."""
    depth: tuple[int, ...]
    none_axes: tuple[bool, ...]
    numblocks: tuple[int, ...]

    def slices(self, block_id: tuple[int, ...]) -> tuple[slice, ...]:
        out = []
        for d, none, i, n in zip(self.depth, self.none_axes, block_id, self.numblocks):
            left = d if (i > 0 or not none) else 0
            right = d if (i < n - 1 or not none) else 0
            out.append(slice(left, -right if right else None))
        return tuple(out)


class LaunchPlan(NamedTuple):
    """What every chunk's launch of one layer shares (pickled with each task: keep it small)."""
    travelling: TravellingKernel
    dim: object
    count: Callable | None
    out_dtypes: tuple[np.dtype, ...]
    trim: HaloTrim | None = None
    #: every output is a pure output (written, never read): its buffer may be a pooled one
    pure_outputs: bool = False

    @property
    def kernel_name(self) -> str:
        return self.travelling.kernel.name


def where(name: str, block_id) -> str:
    """The note saying which chunk, of which array, on which worker."""
    return (f"numba_cube.dask: chunk {tuple(block_id)} of {name}, on Dask worker "
            f"{this_worker_address()}")


def launch_block(plan: LaunchPlan, out_shape: tuple, block_id: tuple, *blocks):
    """The task of one chunk's launch (module docstring)."""
    return launch_grid(plan, grid_for(plan, out_shape), out_shape, block_id, blocks)


def grid_for(plan: LaunchPlan, shape: tuple):
    """The cube count of a launch over a chunk of ``shape``: ``count(shape)``, else
    ``ceil(size / dim)``."""
    if plan.count is not None:
        return plan.count(shape)
    return max(1, math.ceil(math.prod(shape) / _units(plan.dim)))


def launch_grid(plan: LaunchPlan, cubes, out_shape: tuple, block_id: tuple, blocks):
    """One chunk's launch of ``cubes`` cubes into new outputs of ``out_shape``: the output
    handles (trimmed views for a halo), one or a tuple."""
    kernel = plan.travelling.kernel
    try:
        client = worker_client()
        # one copy per distinct chunk: axpy(a, x, x) gets the same chunk twice
        copies: dict[int, object] = {}
        args = [copies[id(b)] if id(b) in copies
                else copies.setdefault(id(b), _on_device(client, b, kernel.id, slot))
                for slot, b in enumerate(blocks)]
        if plan.pure_outputs and plan.trim is None:
            outs = [pooled_output(client, kernel.id, slot, out_shape, dtype)
                    for slot, dtype in enumerate(plan.out_dtypes)]
        else:
            outs = [client.empty(out_shape, dtype) for dtype in plan.out_dtypes]
        # real_run: a precompile's dry run is process-wide, and must not skip this job's launches
        with cube.real_run():
            client.launch(kernel, cubes, plan.dim, *args, *outs)
    except CubeError as error:
        _note_once(error, where(f"{kernel.name}'s launch", block_id))
        raise
    if plan.trim is not None:
        index = plan.trim.slices(block_id)
        outs = [out[index] for out in outs]
    return outs[0] if len(outs) == 1 else tuple(outs)


def _on_device(client, block, owner: str, slot: int):
    if isinstance(block, FailedChunk):
        raise_failure(block)
    if isinstance(block, Handle):
        if block.device != client.device:          # another in-process worker's chunk
            return client.create(array_chunk(block, client_of(block)))
        return block
    if isinstance(block, np.ndarray):
        return staged_input(client, owner, slot, block)
    return block


def _units(dim) -> int:
    return math.prod(dim) if isinstance(dim, tuple) else int(dim)


def read_block(name: str, block, block_id: tuple):
    """The array chunk of a handle chunk: waits for its writers; raises its ``LaunchFailure``
    with a note naming the chunk, the array and the worker."""
    try:
        if isinstance(block, FailedChunk):
            raise_failure(block)
        if isinstance(block, np.ndarray):          # moved here: the serializer read it already
            return block
        return array_chunk(block, client_of(block))
    except CubeError as error:
        _note_once(error, where(name, block_id))
        raise


def _note_once(error: BaseException, note: str) -> None:
    # A failure object travels: the same one may pass through several tasks of one chain
    if note not in getattr(error, "__notes__", ()):
        error.add_note(note)
