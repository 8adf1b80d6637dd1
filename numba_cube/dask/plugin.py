"""The worker plugin: one numba_cube client per Dask worker, on the device the worker owns.

``setup(client, device="cpu")`` registers ``CubeWorkerPlugin`` with ``Client.register_plugin``;
every worker (present and future: Dask runs a registered plugin on workers that join later, and
on a restarted worker) then makes its client once, in ``setup``. Tasks find it with
``worker_client()``; they launch on it from Dask's own threads, so the runtime's per-thread
streams and inferred dependencies apply inside each worker unchanged.

Which device: ``"cpu"`` gives each worker a logical CPU device of its own (``cpu:0``, ``cpu:1``
for two workers sharing one process, ``LocalCluster(processes=False)``: two workers must not
share one client's streams and memory table, and a worker in its own process gets ``cpu:0``);
``"cuda"`` is the first device the worker sees (dask-cuda's ``CUDA_VISIBLE_DEVICES`` makes it the
worker's GPU), ``"cuda:N"`` or ``"cpu:N"`` are taken as they are.

The clients live in a table keyed by worker address, not on the plugin: with in-process workers
one plugin object may be handed to several workers, and the plugin must not mix them up.
"""

from __future__ import annotations

import copy
import itertools
import threading
import warnings

from distributed import WorkerPlugin, get_worker

import numba_cube as cube
from numba_cube.errors import CubeError, CubeWarning

# No import of serialize here (it imports this module): unpickling the plugin on a worker
# imports this package first, whose __init__ registers the handle serializer.

PLUGIN_NAME = "numba_cube"

_clients: dict[str, cube.Client] = {}
# Why a worker has no client: the error its plugin's setup raised (BackendNotFound, say), so that
# tasks there raise the cause rather than "call setup".
_setup_errors: dict[str, BaseException] = {}
_clients_lock = threading.Lock()
# The next logical CPU device a worker of this process takes (see the module docstring).
_cpu_indices = itertools.count()


class ClusterSetupError(CubeError, RuntimeError):
    """A numba_cube task ran on a worker that has no numba_cube client: ``setup`` was not called
    (or the worker's plugin failed; its error is in the worker's log)."""


class CubeWorkerPlugin(WorkerPlugin):
    """Makes the worker's numba_cube client (``device`` and client ``options`` as
    ``cube.client`` takes them) when the worker starts, drops it when the worker closes."""

    name = PLUGIN_NAME

    def __init__(self, device: str = "cpu", **options):
        self.device = device
        self.options = options

    def setup(self, worker) -> None:
        _numba_reads_the_workers_environment()
        device = self.device
        if device == "cpu":
            device = f"cpu:{next(_cpu_indices)}"
        try:
            new_client = cube.client(device, **self.options)
        except Exception as error:
            with _clients_lock:
                _clients.pop(worker.address, None)
                _setup_errors[worker.address] = error
            raise
        with _clients_lock:
            _clients[worker.address] = new_client
            _setup_errors.pop(worker.address, None)

    def teardown(self, worker) -> None:
        with _clients_lock:
            _clients.pop(worker.address, None)
            _setup_errors.pop(worker.address, None)


def _numba_reads_the_workers_environment() -> None:
    """Make Numba read ``NUMBA_NUM_THREADS`` (and its other variables) from the environment the
    worker has now, before any kernel runs.

    Why: a Dask nanny applies a worker's ``env=`` after the worker process has imported Numba,
    whose config read the variables at import. Numba re-reads them only when it compiles; a
    numba_cube kernel loaded from the disk cache compiles nothing, so its first parallel loop
    launches Numba's thread pool with the count read at import, and the next ``@njit`` compile
    in that worker then fails with Numba's "Cannot set NUMBA_NUM_THREADS to a different value
    once the threads have been launched". Re-reading here, while no pool runs, launches the
    pool with the environment's count. If a pool already runs with another count (something
    ran Numba's parallel code before the plugin), nothing can change it: a warning says so."""
    from numba.core import config as numba_config

    try:
        numba_config.reload_config()
    except RuntimeError as error:
        warnings.warn(f"numba_cube.dask: Numba's thread pool already runs in this worker with "
                      f"another thread count than its environment's NUMBA_NUM_THREADS ({error}); "
                      "set it before the worker starts (LocalCluster(env=...) is applied late)",
                      CubeWarning, stacklevel=2)


def setup(client, device: str = "cpu", **options) -> dict[str, str]:
    """Give every worker of ``client``'s cluster its numba_cube client; returns worker address ->
    device name. Calling it again replaces the plugin (and so every worker's client)."""
    client.register_plugin(CubeWorkerPlugin(device, **options), name=PLUGIN_NAME)
    return client.run(_this_workers_device)


def _this_workers_device(dask_worker) -> str:
    # client.run hands the worker in (get_worker() is for tasks, not for run's functions)
    return _client_or_cause(dask_worker.address).device


def worker_client() -> cube.Client:
    """The numba_cube client of the worker running the calling task (``ClusterSetupError``
    outside a set-up worker)."""
    try:
        address = get_worker().address
    except ValueError:
        raise ClusterSetupError("worker_client() is for code running on a Dask worker") from None
    return _client_or_cause(address)


def _client_or_cause(address: str) -> cube.Client:
    """The worker's client; else the error its setup raised (a copy, noted with the worker: the
    real cause, BackendNotFound say), else ``ClusterSetupError`` saying to call ``setup``."""
    found = _clients.get(address)
    if found is not None:
        return found
    cause = _setup_errors.get(address)
    if cause is not None:
        error = copy.copy(cause)
        error.add_note(f"numba_cube.dask.setup could not make a numba_cube client on Dask "
                       f"worker {address}: this is its error")
        raise error
    raise ClusterSetupError(
        f"Dask worker {address} has no numba_cube client: call "
        "numba_cube.dask.setup(client, device=...) before running numba_cube tasks")


def this_worker_address() -> str:
    """The address of the Dask worker running the calling task, or ``"?"`` outside one."""
    try:
        return get_worker().address
    except ValueError:
        return "?"


def client_of(handle) -> cube.Client:
    """A client that owns ``handle``'s device: the worker client on it, else ``cube.client``'s
    default one for the device (a handle of another in-process worker)."""
    for candidate in list(_clients.values()):
        if candidate.device == handle.device:
            return candidate
    return cube.client(handle.device)


def worker_of(handle) -> str | None:
    """The address of the worker of this process whose client owns ``handle``'s device."""
    for address, candidate in list(_clients.items()):
        if candidate.device == handle.device:
            return address
    return None
