"""The layers of a numba_cube dask array: their names, and the blockwise layers themselves.

A ``map_blocks`` (``map_overlap``) of kernel ``axpy`` adds two layers to the graph:

- ``axpy-launch-<token>``: the **handle chunks**, one launch per chunk (``tasks.launch_block``);
- ``axpy-<token>``: the **array chunks** read from them (``tasks.read_block``), the array
  returned.

So Dask's tools (the dashboard's task stream, ``progress()``, performance reports) group tasks
by kernel: ``dask.utils.key_split`` of a key is ``axpy`` or ``axpy-launch``. Dask fuses each
chunk's launch and read (and a chain of kernels over the same chunks) into one task when the
graph is optimized; a fused task's key is its last layer's, so a fused chain is named after its
last kernel (with ``array-`` in front when it starts at a ``from_array``).

With several outputs the launch layer ``axpy-launches-<token>`` holds a tuple of handles per
chunk, and each output ``i`` has its own array ``axpy-<token_i>`` over its handles
``axpy-launch-<token_i>``. A later launch finds the handle layer under an array by that name
(``launch_handles``), in the graph the array already holds; ``handles_of`` gives users those
chunks through one more layer, ``axpy-handles-<token>``.
"""

from __future__ import annotations

import functools
import operator

import dask.array as da
from dask.base import tokenize
from dask.layers import ArrayBlockIdDep, ArrayChunkShapeDep

from .chunks import chunk_meta
from .staging import expose
from .tasks import read_block

LAUNCH_INFIX = "-launch-"


def handles_name(array_name: str) -> str:
    """The name of the handle layer under the array ``array_name`` (``axpy-<t>`` ->
    ``axpy-launch-<t>``)."""
    prefix, _, token = array_name.rpartition("-")
    return f"{prefix}{LAUNCH_INFIX}{token}"


def output_names(kernel_name: str, token: str, outputs: int) -> list[str]:
    """The names of the arrays a launch layer's outputs are read into."""
    if outputs == 1:
        return [f"{kernel_name}-{token}"]
    return [f"{kernel_name}-{tokenize(token, i)}" for i in range(outputs)]


def launch_name(kernel_name: str, token: str, outputs: int) -> str:
    """The launch layer's name: the one output's handle layer, or the tuples' layer."""
    if outputs == 1:
        return handles_name(output_names(kernel_name, token, 1)[0])
    return f"{kernel_name}-launches-{token}"


def launch_handles(arg):
    """The handle layer under an array ``map_blocks`` returned, for numba_cube's own launches,
    else ``arg`` itself (another array, or one rebuilt from its read chunks: persisted,
    sliced)."""
    if not isinstance(arg, da.Array) or "-" not in arg.name:
        return arg
    name = handles_name(arg.name)
    if name not in arg.dask.layers or arg.name not in arg.dask.layers:
        return arg
    return da.Array(arg.dask, name, arg.chunks, meta=chunk_meta(arg.dtype, arg.ndim))


def handles_of(arg):
    """The handle chunks under an array ``map_blocks`` returned (a Dask array whose chunks are
    numba_cube ``Handle``s, kept on their workers when persisted), else ``arg`` itself. Its
    layer ``axpy-handles-<token>`` marks each chunk as seen by user code, so its worker never
    reuses the buffer (``staging.py``: a view made of it would not show)."""
    found = launch_handles(arg)
    if found is arg:
        return arg
    prefix, _, token = arg.name.rpartition("-")
    return da.map_blocks(expose, found, name=f"{prefix}-handles-{token}",
                         meta=chunk_meta(arg.dtype, arg.ndim))


def launch_layer(task, name: str, out_ind: tuple, out_chunks: tuple, new_axes: dict,
                 argpairs: list, meta, launch_chunks: tuple | None = None) -> da.Array:
    """The blockwise layer of ``task(out_shape, block_id, *blocks)`` over ``argpairs`` ((array,
    index) or (value, None)), with the output chunks given; inputs along an index missing from
    ``out_ind`` arrive whole (the caller made them one chunk). ``out_shape`` is the block's in
    ``launch_chunks`` (what the launch writes: a halo's grown chunk), ``out_chunks`` unless
    given."""
    shapes = ArrayChunkShapeDep(launch_chunks if launch_chunks is not None else out_chunks)
    return da.blockwise(
        task, out_ind, shapes, out_ind, ArrayBlockIdDep(out_chunks), out_ind,
        *[x for pair in argpairs for x in pair],
        name=name, new_axes=new_axes, adjust_chunks=dict(zip(out_ind, out_chunks)),
        concatenate=True, align_arrays=False, meta=meta)


def select_output(launches: da.Array, index: int, name: str, dtype) -> da.Array:
    """Output ``index`` of a launch layer of handle tuples, as its own handle layer."""
    return da.map_blocks(operator.getitem, launches, index, name=name,
                         meta=chunk_meta(dtype, launches.ndim))


def read_layer(handles: da.Array, name: str) -> da.Array:
    """The array chunks of a handle layer: the array the user gets."""
    ind = tuple(range(handles.ndim))
    # the name inside a partial: a string argument equal to a layer's name would be taken by
    # Dask's blockwise fusion for that layer's output
    return da.blockwise(functools.partial(read_block, name), ind, handles, ind,
                        ArrayBlockIdDep(handles.chunks), ind, name=name,
                        concatenate=True, align_arrays=False,
                        meta=chunk_meta(handles.dtype, handles.ndim))
