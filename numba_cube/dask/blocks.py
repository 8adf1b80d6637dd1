"""``map_blocks``: one kernel launch per chunk, the chunks kept as handles on their worker.

``map_blocks(kernel, *args, dim=256)`` launches ``kernel`` once per chunk on the worker holding
it, with ``args`` followed by new output buffers of the output chunk's shape: the kernel's last
``outputs`` parameters are its outputs (``axpy(a, x, y, out)`` is mapped as
``map_blocks(axpy, 2.0, x, y)``). Arrays are Dask arrays of one shape (NumPy arrays are chunked
like the first Dask one; a Dask array chunked otherwise is rechunked to it); everything else is
passed to every launch as it is. The count is ``ceil(output chunk size / dim)`` cubes, or what
``count(output chunk shape)`` returns.

Dask's shape arguments work as in ``dask.array.map_blocks``: ``chunks=`` (the output's chunks,
per axis an int, a tuple per block, or for new axes their size), ``drop_axis`` (an input axis
the output does not have: inputs are made one chunk along it first, as Dask concatenates them),
``new_axis``, ``dtype=`` and ``meta=`` (a NumPy array: ``chunks.py``). ``outputs=n`` maps a
kernel writing ``n`` outputs (its last ``n`` parameters, each of the output chunk's shape, with
``dtype=`` one dtype or one per output) and returns a tuple of ``n`` arrays sharing one launch
per chunk.

What it returns is an ordinary Dask array (``chunks.py``: NumPy chunks), so every Dask
operation and ``compute()`` work on it; underneath sit the launches' handle chunks
(``graph.py``), and a ``map_blocks`` of such an array takes those handles directly: a chain of
kernels never leaves the device, and only a chunk something else reads becomes host bytes.

Two kernels are refused on the client, before anything is sent (``LaunchArgumentError``, naming
the kernel and the parameter), by the IO analysis (CONTRACT.md 4.2): one writing one of its
inputs (the chunks are Dask's values, shared by every task that reads them), and one that never
writes an output (every chunk would be the new buffer as allocated, and nothing on the worker
fails). "Never" is what the analysis can prove; an access it cannot resolve counts as a write.
"""

from __future__ import annotations

import functools

import dask.array as da
import numpy as np
from dask.base import tokenize

import numba_cube as cube
from numba_cube.errors import LaunchArgumentError
from numba_cube.kernel.kernel import resolve_access

from .chunks import checked_meta, chunk_meta
from .graph import (handles_name, launch_handles, launch_layer, launch_name, output_names,
                    read_layer, select_output)
from .kernels import TravellingKernel
from .tasks import LaunchPlan, launch_block


def map_blocks(kernel, *args, dim=256, count=None, dtype=None, chunks=None, drop_axis=None,
               new_axis=None, meta=None, outputs: int = 1):
    """A kernel launch per chunk; see the module docstring. Returns a Dask array, or a tuple of
    ``outputs`` arrays."""
    kernel = cube.kernel(kernel)
    args = prepared_args(kernel, args, outputs, "map_blocks")
    pure = refuse_bad_access(kernel, args, outputs)
    dtypes = output_dtypes(kernel, args, dtype, checked_meta(meta, f"map_blocks({kernel.name})"),
                           outputs)
    drop_axis = _axes(drop_axis)
    new_axis = _axes(new_axis)
    first = next(a for a in args if isinstance(a, da.Array))
    if drop_axis:
        # Dask concatenates the blocks along a dropped axis; handle chunks do not concatenate,
        # so such inputs become one chunk along it first (from their array chunks)
        dropped = {ax % first.ndim: -1 for ax in drop_axis}
        args = tuple(a.rechunk(dropped) if isinstance(a, da.Array)
                     and any(len(a.chunks[ax]) > 1 for ax in dropped) else a for a in args)
        first = next(a for a in args if isinstance(a, da.Array))
    # Dask works the output chunks out (and checks the shape arguments) as for its own function
    template = da.map_blocks(_never_called, *args, chunks=chunks, drop_axis=drop_axis or [],
                             new_axis=new_axis, meta=chunk_meta(dtypes[0], 0),
                             name="numba_cube-template")
    out_ind, new_axes = _output_index(first.ndim, drop_axis, new_axis, template.chunks)
    plan = LaunchPlan(TravellingKernel(kernel), dim, count, dtypes, pure_outputs=pure)
    return build(plan, args, out_ind, template.chunks, new_axes)


def _never_called(*blocks):           # the template's function: only its chunks are used
    raise AssertionError("numba_cube's template layer is never computed")


def build(plan: LaunchPlan, args, out_ind: tuple, out_chunks: tuple, new_axes: dict,
          launch_chunks: tuple | None = None):
    """The launch layer of ``plan`` over ``args`` and the arrays read from it (``graph.py``);
    ``launch_chunks``: the shapes the launches write, if not ``out_chunks`` (a halo's)."""
    in_ind = tuple(range(max(a.ndim for a in args if isinstance(a, da.Array))))[::-1]
    argpairs = [(launch_handles(a), in_ind) if isinstance(a, da.Array) else (a, None)
                for a in args]
    token = tokenize(plan.travelling, plan.dim, plan.count, plan.out_dtypes, plan.trim,
                     out_chunks, *args)
    name = plan.kernel_name
    n = len(plan.out_dtypes)
    launches = launch_layer(functools.partial(launch_block, plan), launch_name(name, token, n),
                            out_ind, out_chunks, new_axes, argpairs,
                            chunk_meta(plan.out_dtypes[0], len(out_ind)), launch_chunks)
    arrays = []
    for i, (array_name, dtype) in enumerate(zip(output_names(name, token, n), plan.out_dtypes)):
        handles = (launches if n == 1 else
                   select_output(launches, i, handles_name(array_name), dtype))
        arrays.append(read_layer(handles, array_name))
    return arrays[0] if n == 1 else tuple(arrays)


def prepared_args(kernel: cube.Kernel, args: tuple, outputs: int, what: str) -> tuple:
    """``args`` checked against the kernel's parameters, NumPy arrays as Dask arrays chunked
    like the first Dask one, Dask arrays chunked alike."""
    if not isinstance(outputs, int) or not 1 <= outputs < len(kernel.params):
        raise LaunchArgumentError(
            f"{what}({kernel.name}, ...): outputs={outputs!r}; a kernel with "
            f"{len(kernel.params)} parameters has 1 to {len(kernel.params) - 1} outputs, its "
            "last parameters")
    if len(args) != len(kernel.params) - outputs:
        raise LaunchArgumentError(
            f"kernel {kernel.name} takes {len(kernel.params)} arguments, its last {outputs} the "
            f"output(s) {what} makes per chunk; got {len(args)} "
            f"(expected {len(kernel.params) - outputs})")
    arrays = [a for a in args if isinstance(a, (da.Array, np.ndarray))]
    if not arrays:
        raise LaunchArgumentError(f"{what}({kernel.name}, ...) needs at least one array")
    first = next((a for a in arrays if isinstance(a, da.Array)), None)
    args = tuple(da.from_array(a, chunks=first.chunks if first is not None else "auto")
                 if isinstance(a, np.ndarray) else a for a in args)
    first = first if first is not None else next(a for a in args if isinstance(a, da.Array))
    for a in args:
        if isinstance(a, da.Array) and a.shape != first.shape:
            raise LaunchArgumentError(
                f"{what}({kernel.name}, ...): arrays of shapes {a.shape} and {first.shape}; "
                "every array argument has one shape")
    # chunked otherwise: rechunked like the first (from its array chunks, as Dask would)
    return tuple(a.rechunk(first.chunks) if isinstance(a, da.Array) and a.chunks != first.chunks
                 else a for a in args)


def output_dtypes(kernel, args, dtype, meta, outputs: int) -> tuple[np.dtype, ...]:
    """One dtype per output: ``dtype`` (one, or one per output), else ``meta``'s, else the first
    array argument's."""
    if dtype is None:
        dtype = meta.dtype if meta is not None else next(
            a.dtype for a in args if isinstance(a, da.Array))
    dtypes = tuple(dtype) if isinstance(dtype, (list, tuple)) else (dtype,) * outputs
    if len(dtypes) != outputs:
        raise LaunchArgumentError(
            f"map_blocks({kernel.name}, ...): {len(dtypes)} dtypes for {outputs} outputs")
    return tuple(np.dtype(d) for d in dtypes)


def refuse_bad_access(kernel: cube.Kernel, args, outputs: int,
                      out_ndim: int | None = None) -> bool:
    """Refuse a kernel that writes an input or never writes an output (module docstring); the
    outputs have ``out_ndim`` dimensions (the first array argument's unless given). Returns
    whether every output is a pure output (written, never read)."""
    if out_ndim is None:
        out_ndim = next(a.ndim for a in args if isinstance(a, da.Array))
    ndims = tuple(a.ndim if isinstance(a, da.Array) else None for a in args)
    ndims += (out_ndim,) * outputs
    access = resolve_access(kernel, ndims)
    for name, arg, (_, written) in zip(kernel.params, args, access):
        if isinstance(arg, da.Array) and written:
            raise LaunchArgumentError(
                f"kernel {kernel.name} writes (or may write: declare reads=/writes=) its input "
                f"{name!r}; map_blocks chunks are Dask's values, shared by every task reading "
                "them, so a kernel may write only its outputs (the last parameters)")
    for name, (_, written) in zip(kernel.params[len(args):], access[len(args):]):
        if not written:
            # Checked here: on the workers such a launch succeeds, and its chunks are whatever
            # the new output buffer held, with no failure for compute() to raise.
            raise LaunchArgumentError(
                f"kernel {kernel.name} never writes its output parameter {name!r}, which "
                "map_blocks makes per chunk: every chunk would be left as allocated. The "
                "outputs are the last parameters (axpy(a, x, y, out) is mapped as "
                "map_blocks(axpy, a, x, y))")
    return not any(read for read, _ in access[len(args):])


def _axes(axes) -> list[int]:
    if axes is None:
        return []
    return [axes] if isinstance(axes, int) else list(axes)


def _output_index(ndim: int, drop_axis: list, new_axis: list, out_chunks: tuple):
    """The output's blockwise index and new axes, worked out as ``dask.array.map_blocks``
    does (its template gave the chunks)."""
    out_ind = tuple(range(ndim))[::-1]
    if drop_axis:
        dropped = {ax % ndim for ax in drop_axis}
        out_ind = tuple(x for i, x in enumerate(out_ind) if i not in dropped)
    if not new_axis and len(out_ind) < len(out_chunks):
        new_axis = list(range(len(out_chunks) - len(out_ind)))
    new_axes = {}
    if new_axis:
        out_ind = list(out_ind)
        for ax in sorted(new_axis):
            n = len(out_ind) + len(drop_axis)
            out_ind.insert(ax, n)
            new_axes[n] = out_chunks[ax]
        out_ind = tuple(out_ind)
    return out_ind, new_axes

