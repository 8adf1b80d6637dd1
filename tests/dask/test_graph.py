"""The graph of a numba_cube dask array as Dask's tools see it: keys named after the kernels
(``axpy-<token>``, ``axpy-launch-<token>``), in the task stream the scheduler records (what the
dashboard and ``progress()`` show), and a chain of kernels fused by Dask's optimizer into one
task per chunk."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
from dask.utils import key_split
from distributed import get_task_stream

import numba_cube.dask as cubed
from numba_cube.dask.graph import handles_name, launch_handles
from chain_kernels import axpy, halve, square


def test_keys_carry_the_kernels_name():
    """The array is ``axpy-<token>``, its launches ``axpy-launch-<token>`` and the handle chunks
    ``handles_of`` gives ``axpy-handles-<token>``: ``key_split`` (how Dask groups tasks for the
    dashboard and ``progress()``) gives the kernel's name."""
    x = da.from_array(np.arange(10.0), chunks=5)
    y = cubed.map_blocks(axpy, 2.0, x, x)
    assert key_split(y.name) == "axpy"
    assert launch_handles(y).name == handles_name(y.name)
    assert key_split(launch_handles(y).name) == "axpy-launch"
    assert key_split(cubed.handles_of(y).name) == "axpy-handles"     # what users get
    assert {key_split(k) for k in dict(y.dask)} == {"axpy", "axpy-launch", "array"}


def test_the_task_stream_shows_the_kernels(thread_client):
    """Tasks the scheduler's task stream records for a computed chain are named after its
    kernels (a fused task by its last one), with none named after numba_cube itself."""
    x = da.from_array(np.arange(400.0), chunks=100)
    z = cubed.map_blocks(square, cubed.map_blocks(axpy, 1.0, x, x), dim=64)
    with get_task_stream(thread_client) as stream:
        result = thread_client.compute(z).result()   # this cluster's, not the default client's
    np.testing.assert_array_equal(result, (2.0 * np.arange(400.0)) ** 2)
    groups = {key_split(record["key"]) for record in stream.data}
    assert any("square" in group for group in groups), groups
    assert not any("numba_cube" in group for group in groups), groups


def test_a_chain_of_kernels_runs_as_one_task_per_chunk():
    """Three kernels over 4 chunks: Dask's optimizer (blockwise and linear fusion) leaves one
    task per chunk, named after the chain's last kernel."""
    x = da.from_array(np.arange(400.0), chunks=100)
    z = cubed.map_blocks(halve, cubed.map_blocks(square, cubed.map_blocks(axpy, 1.0, x, x)))
    (optimized,) = dask.optimize(z)
    graph = dict(optimized.__dask_graph__())
    tasks = [k for k, v in graph.items() if type(v).__name__ != "Alias"]
    assert len(tasks) == 4
    assert all("halve" in key_split(k) for k in tasks)


def test_the_dask_extra_installs_what_the_dashboard_needs():
    """The ``dask`` extra names bokeh at least as new as distributed requires for its dashboard,
    and the bokeh installed meets distributed's requirement (the dashboard's modules import)."""
    import re
    from importlib.metadata import version
    from pathlib import Path

    from distributed.versions import BOKEH_REQUIREMENT
    from packaging.version import Version

    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    extra = re.search(r'^dask = \[(.*)\]$', pyproject, re.M).group(1)
    pinned = re.search(r'"bokeh>=([0-9.]+)"', extra)
    assert pinned, extra
    assert BOKEH_REQUIREMENT.specifier.contains(pinned.group(1))
    assert BOKEH_REQUIREMENT.specifier.contains(Version(version("bokeh")))
    import distributed.dashboard.core  # noqa: F401 - fails with a bokeh Dask cannot use
