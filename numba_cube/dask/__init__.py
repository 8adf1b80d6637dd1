"""numba_cube kernels on a Dask cluster: one numba_cube client per worker, chunks kept on it.

``pip install 'numba_cube[dask]'`` (``dask[array]``, ``distributed``, bokeh for the dashboard);
the core never imports this package. What it offers::

    import numba_cube.dask as cubed
    cubed.setup(client, device="cpu")              # a worker plugin: one cube client per worker
    y = cubed.map_blocks(axpy, 2.0, x, x, dim=256)  # a kernel per chunk; y is a dask array
    z = cubed.map_blocks(scale, y, dim=256)         # y's chunks stay handles on their worker
    s = cubed.map_overlap(stencil, z, depth=1, boundary="periodic")   # halos, trimmed on device
    t = cubed.reduction(block_sums, s, combine=np.sum)                # per-chunk partials
    t.compute()                                      # host bytes only where Dask needs them
    cubed.precompile(client, [(axpy, 2.0, a, a, a)]) # a dry run on every worker

| module | room |
| --- | --- |
| plugin.py | the worker plugin, the per-worker client, ``setup`` |
| kernels.py | kernels travelling to the workers (by reference, or by value with their source) |
| serialize.py | handles crossing workers as host bytes; failed chunks as their ``LaunchFailure`` |
| chunks.py | what a chunk of the arrays returned is (NumPy today): the one place that decides |
| tasks.py | the tasks on the workers: a launch per chunk, its read, notes naming chunk and worker |
| staging.py | buffers a worker thread reuses between chunks, so that launches repeat exactly |
| graph.py | the layers: names after the kernel (``axpy-<token>``), handle and read layers |
| blocks.py | ``map_blocks``: Dask's shape arguments, several outputs |
| overlap.py | ``map_overlap``: halos and boundaries as Dask's, trimmed on the device |
| reduction.py | ``reduction``: a kernel's per-chunk partials through Dask's tree reduction |
| precompile.py | ``precompile``: a dry run of given launches on every worker |
| demo.py | ``python -m numba_cube demo --dask`` |
"""

from __future__ import annotations

from . import serialize as _serialize  # noqa: F401 - registers the handle serializer with Dask
from .blocks import map_blocks
from .graph import handles_of
from .overlap import map_overlap
from .plugin import ClusterSetupError, CubeWorkerPlugin, setup, worker_client
from .precompile import PrecompileReport, precompile
from .reduction import reduction

__all__ = ["setup", "map_blocks", "map_overlap", "reduction", "handles_of", "precompile",
           "PrecompileReport", "CubeWorkerPlugin", "worker_client", "ClusterSetupError"]
