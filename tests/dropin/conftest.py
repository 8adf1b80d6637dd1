"""The drop-in layer's tests run with it installed on the CPU backend, and leave numba.cuda as
they found it: ``layer`` installs for a test module and uninstalls after it."""

from __future__ import annotations

import os

import pytest

import numba_cube


def _skip_under_the_simulator() -> None:
    """Under ``NUMBA_ENABLE_CUDASIM=1`` numba.cuda is the simulator's module, which the layer does
    not serve (install refuses it, tests/dropin/test_install.py): these tests need the real one."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        pytest.skip("the session runs numba-cuda's simulator (NUMBA_ENABLE_CUDASIM=1)")


@pytest.fixture(autouse=True)
def _not_under_the_simulator():
    _skip_under_the_simulator()


@pytest.fixture(scope="module")
def layer():
    """numba.cuda served by numba_cube's CPU backend, for the module's tests."""
    _skip_under_the_simulator()
    numba_cube.install("cpu")
    from numba import cuda

    yield cuda
    numba_cube.uninstall()
