"""``precompile``: a dry run of given launches on every worker, before the job.

``precompile(client, [(kernel, *example_args), ...])`` runs, on each worker, one task pinned to
it that copies the example arrays onto the worker's device and issues every launch inside
``cube.dry_run()``: each kernel is compiled for those argument types (dtypes, ranks, layouts:
what a compile depends on; sizes do not matter) and cached, nothing runs. The example arguments
are every parameter's, the output included, as ``client.launch`` takes them.

It returns one ``PrecompileReport`` per worker address: what compiled, and what failed with its
exception. A dry run is process-wide; the launches of ``map_blocks`` tasks run inside
``cube.real_run()``, so a job running meanwhile is not skipped, and precompiles of workers sharing
one process run one at a time.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

import numba_cube as cube

from .kernels import TravellingKernel
from .plugin import worker_client

_dry_run_lock = threading.Lock()


class PrecompileReport(NamedTuple):
    """One worker's precompile: its device, the kernel ids that compiled, and per kernel id that
    failed the exception its launch would have raised."""
    device: str
    compiled: tuple[str, ...]
    failed: dict


def precompile(client, launches) -> dict[str, PrecompileReport]:
    """A dry run of ``launches`` on every worker of ``client``; see the module docstring."""
    parcels = []
    for launch in launches:
        kernel, *example_args = launch
        kernel = cube.kernel(kernel)
        if len(example_args) != len(kernel.params):
            raise cube.LaunchArgumentError(
                f"precompile: kernel {kernel.name} takes {len(kernel.params)} arguments (its "
                f"output included), got {len(example_args)} example arguments")
        parcels.append((TravellingKernel(kernel), tuple(example_args)))
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    futures = {address: client.submit(_precompile_here, parcels, workers=[address],
                                      allow_other_workers=False, pure=False)
               for address in workers}
    return {address: future.result() for address, future in futures.items()}


def _precompile_here(parcels) -> PrecompileReport:
    client = worker_client()
    refused = {}
    with _dry_run_lock, cube.dry_run() as run:
        for travelling, example_args in parcels:
            args = [client.create(a) if isinstance(a, np.ndarray) else a for a in example_args]
            try:
                client.launch(travelling.kernel, 1, 1, *args)
            except cube.CubeError as error:      # refused on the issuing thread (argument types)
                refused[travelling.kernel.id] = error
    failed = {**{f.kernel_id: f.error for f in run.failures}, **refused}
    compiled = tuple(dict.fromkeys(t.kernel.id for t, _ in parcels if t.kernel.id not in failed))
    return PrecompileReport(client.device, compiled, failed)
