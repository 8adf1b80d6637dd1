"""The drop-in layer's tests run with it installed on the CPU backend, and leave numba.cuda as
they found it: ``layer`` installs for a test module and uninstalls after it."""

from __future__ import annotations

import pytest

import numba_cube


@pytest.fixture(scope="module")
def layer():
    """numba.cuda served by numba_cube's CPU backend, for the module's tests."""
    numba_cube.install("cpu")
    from numba import cuda

    yield cuda
    numba_cube.uninstall()
