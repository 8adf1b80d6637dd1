"""``precompile``: a dry run on every worker, reporting per worker what compiled and what
failed; nothing runs, and bad launch specs are refused at the call."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numba_cube as cube
import numba_cube.dask as cubed


@cube.kernel
def double(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2.0 * x[i]


@cube.kernel
def uses_an_unknown_name(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = no_such_global[i]  # noqa: F821 - the compile failure under test


def test_every_worker_reports_what_compiled_and_what_failed(thread_client):
    """Each worker compiles the good kernel and reports the bad one's compile failure."""
    a = np.zeros(8)
    reports = cubed.precompile(thread_client, [(double, a, a), (uses_an_unknown_name, a, a)])
    assert len(reports) == 2
    for report in reports.values():
        assert report.compiled == (double.id,)
        assert set(report.failed) == {uses_an_unknown_name.id}
        assert isinstance(report.failed[uses_an_unknown_name.id], cube.CompileError)


def test_a_launch_spec_of_the_wrong_length_is_refused(thread_client):
    """Example arguments are every parameter's, the output included: fewer is a
    ``LaunchArgumentError`` before anything is sent."""
    with pytest.raises(cube.LaunchArgumentError, match="example arguments"):
        cubed.precompile(thread_client, [(double, np.zeros(8))])
