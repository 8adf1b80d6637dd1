"""``reduction``: a kernel's per-chunk partials, reduced by Dask's tree reduction.

``reduction(kernel, *args, combine=np.sum, dim=256)`` launches ``kernel`` once per chunk, as
``map_blocks`` does, but its last parameter is a 1-D buffer of **partials**: one per cube of the
launch unless ``partials(chunk_shape)`` says how many (``count(chunk_shape)`` sizes the grid,
``ceil(chunk size / dim)`` cubes by default; both get the input chunk's shape). A typical kernel
has each cube reduce its part of the chunk (shared memory, warp shuffles) and one unit write the
cube's partial. On the worker the chunk's partials are read and reduced by ``combine`` to one
value per chunk; then ``dask.array.reduction`` combines those (``combine``, in a tree of
``split_every``) and ``aggregate`` (``combine`` unless given) makes the result: a 0-d Dask
array (``keepdims=True``: one of the input's rank). ``combine`` and ``aggregate`` are NumPy
reductions called as ``f(a, axis=..., keepdims=...)``: ``np.sum``, ``np.max``, ``np.min``,
``np.prod``, or your own with that signature.

It is a full reduction (every axis): a reduction along some axes is a ``map_blocks`` whose
output has the partials' shape (``chunks=``, ``drop_axis``), followed by any Dask reduction of
that array (``.sum(axis=...)``, ``dask.array.reduction``). The array arguments' chunks, a
chain of kernels before it included, stay handles up to the launch; the per-chunk partials are
the only host bytes read. Tasks are named ``<kernel>-partials`` and ``<kernel>-reduce``.
"""

from __future__ import annotations

import functools
import math

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.layers import ArrayBlockIdDep, ArrayChunkShapeDep

import numba_cube as cube

from .blocks import output_dtypes, prepared_args, refuse_bad_access
from .chunks import chunk_meta
from .graph import launch_handles
from .kernels import TravellingKernel
from .tasks import LaunchPlan, grid_for, launch_grid, read_block


def reduction(kernel, *args, combine=np.sum, aggregate=None, partials=None, dim=256,
              count=None, dtype=None, split_every=None, keepdims=False):
    """A kernel's per-chunk partials reduced to one value; see the module docstring."""
    kernel = cube.kernel(kernel)
    args = prepared_args(kernel, args, 1, "reduction")
    pure = refuse_bad_access(kernel, args, 1, out_ndim=1)
    (out_dtype,) = output_dtypes(kernel, args, dtype, None, 1)
    first = next(a for a in args if isinstance(a, da.Array))
    ind = tuple(range(first.ndim))
    plan = LaunchPlan(TravellingKernel(kernel), dim, count, (out_dtype,), pure_outputs=pure)
    token = tokenize(plan, partials, combine, *args)
    name = f"{kernel.name}-partials-{token}"
    argpairs = [x for a in args for x in ((launch_handles(a), ind) if isinstance(a, da.Array)
                                          else (a, None))]
    per_chunk = da.blockwise(
        functools.partial(_chunk_partials, plan, partials, combine, name), ind,
        ArrayChunkShapeDep(first.chunks), ind, ArrayBlockIdDep(first.chunks), ind, *argpairs,
        name=name, adjust_chunks=dict.fromkeys(ind, 1), concatenate=True, align_arrays=False,
        meta=chunk_meta(out_dtype, first.ndim))
    return da.reduction(per_chunk, chunk=_as_is, combine=combine,
                        aggregate=aggregate if aggregate is not None else combine,
                        axis=None, keepdims=keepdims, dtype=out_dtype, split_every=split_every,
                        name=f"{kernel.name}-reduce", meta=chunk_meta(out_dtype, 0))


def _as_is(block, axis=None, keepdims=None):
    """``dask.array.reduction``'s chunk step: the per-chunk value is made already."""
    return block


def _chunk_partials(plan: LaunchPlan, partials, combine, name: str, in_shape: tuple,
                    block_id: tuple, *blocks) -> np.ndarray:
    """The task of one chunk: the launch into its partials, read and combined to one value."""
    cubes = grid_for(plan, in_shape)
    n = partials(in_shape) if partials is not None else (
        math.prod(cubes) if isinstance(cubes, tuple) else int(cubes))
    handle = launch_grid(plan, cubes, (int(n),), block_id, blocks)
    host = read_block(name, handle, block_id)
    return np.asarray(combine(host, axis=None, keepdims=True)).reshape((1,) * len(in_shape))

