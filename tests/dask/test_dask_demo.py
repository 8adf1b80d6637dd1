"""``python -m numba_cube demo --dask`` (``numba_cube/dask/demo.py``): runs on a two-worker
local cluster, says where chunks ran, finds NumPy's result, and shows the injected failure
with its root cause."""

from __future__ import annotations

from numba_cube.cli import main


def test_demo_dask_runs_and_explains(capsys):
    """Exit 0; the output lists both workers' clients, the result equal to NumPy's, and the
    failure's first kernel, root cause and worker."""
    assert main(["demo", "--dask"]) == 0
    out = capsys.readouterr().out
    assert out.count("-> cpu:") == 2
    assert "equal to NumPy's: True" in out
    assert "LaunchFailure of kernel checked_sqrt-" in out
    assert "root cause: ValueError: a negative input reached checked_sqrt" in out
    assert "numba_cube.dask: chunk (3,) of square-" in out and "on Dask worker tcp://" in out
