"""``map_overlap``: a kernel per chunk with halos, as ``dask.array.map_overlap``.

``map_overlap(kernel, *args, depth=1, boundary="reflect", dim=256)`` gives each chunk of every
array argument ``depth`` more elements on each side along each axis, taken from its neighbours
(Dask's ``overlap``: the chunks are exchanged as array chunks, so a numba_cube array argument is
read to the host here), and at the array's own edges what ``boundary`` says: ``"reflect"``,
``"periodic"``, ``"nearest"``, ``"none"`` (nothing: edge chunks are smaller) or a constant,
per axis if given as a dict or tuple, all as in Dask. The kernel runs once per grown chunk, its
output of the grown chunk's shape; with ``trim=True`` (the default) the halo is cut off the
output *on the device*: each output chunk is a view of the launch's buffer, so a following
``map_blocks`` takes it without a copy. ``trim=False`` is Dask's "the function trims itself":
the kernel's output has the trimmed chunk's shape, and it writes ``out[i]`` from
``x[i + depth]`` on. Either way the result has the chunks of the (possibly rechunked: a chunk
smaller than ``depth`` is merged, as Dask does) input.

The kernel sees the grown chunk only: a stencil reading ``x[i - 1]`` must leave its first
``depth`` outputs alone (they are trimmed) or guard them, exactly as a NumPy function passed to
``dask.array.map_overlap`` does. ``depth`` is one int per axis (an int, a tuple or a dict);
asymmetric depths (a pair per axis) are refused. The other arguments are ``map_blocks``' (no
``chunks=``, ``drop_axis`` or ``new_axis``: the output has the input's shape).
"""

from __future__ import annotations

import dask.array as da
from dask.array.overlap import coerce_boundary, coerce_depth, overlap

import numba_cube as cube
from numba_cube.errors import LaunchArgumentError

from .blocks import build, output_dtypes, prepared_args, refuse_bad_access
from .chunks import checked_meta
from .kernels import TravellingKernel
from .tasks import HaloTrim, LaunchPlan


def map_overlap(kernel, *args, depth=1, boundary="reflect", trim=True, dim=256, count=None,
                dtype=None, meta=None, outputs: int = 1):
    """A kernel launch per chunk grown by a halo; see the module docstring."""
    kernel = cube.kernel(kernel)
    what = f"map_overlap({kernel.name}, ...)"
    args = prepared_args(kernel, args, outputs, "map_overlap")
    pure = refuse_bad_access(kernel, args, outputs)
    dtypes = output_dtypes(kernel, args, dtype, checked_meta(meta, what), outputs)
    ndim = next(a.ndim for a in args if isinstance(a, da.Array))
    depths = coerce_depth(ndim, depth)
    if any(isinstance(d, tuple) for d in depths.values()) or any(d < 0 for d in depths.values()
                                                                 if isinstance(d, int)):
        raise LaunchArgumentError(
            f"{what}: depth={depth!r}; numba_cube's map_overlap takes one depth >= 0 per axis "
            "(an int, a tuple of ints or a dict), not a (left, right) pair")
    boundaries = coerce_boundary(ndim, boundary)
    grown = tuple(overlap(a, depths, boundaries) if isinstance(a, da.Array) else a for a in args)
    first = next(a for a in grown if isinstance(a, da.Array))
    halo = HaloTrim(tuple(depths[ax] for ax in range(ndim)),
                    tuple(_is_none(boundaries[ax]) for ax in range(ndim)), first.numblocks)
    out_chunks = tuple(
        tuple(c - sum(_sides(halo, ax, i)) for i, c in enumerate(first.chunks[ax]))
        for ax in range(ndim))
    # trim=False is Dask's "the function trims itself": the kernel writes the trimmed chunk
    # trimmed outputs are views, never pooled; trim=False outputs are whole buffers
    plan = LaunchPlan(TravellingKernel(kernel), dim, count, dtypes, halo if trim else None,
                      pure_outputs=pure)
    return build(plan, grown, tuple(range(ndim))[::-1], out_chunks, {},
                 first.chunks if trim else None)


def _is_none(kind) -> bool:
    return isinstance(kind, str) and kind == "none"


def _sides(halo: HaloTrim, axis: int, index: int) -> tuple[int, int]:
    block_id = tuple(index if ax == axis else 0 for ax in range(len(halo.depth)))
    cut = halo.slices(block_id)[axis]
    return cut.start, -cut.stop if cut.stop is not None else 0


__all__ = ["map_overlap"]
