"""Fixtures shared by the CPU backend's tests, and their helper modules on ``sys.path``.

The tests sit in folders that mirror the backend's stages (``frontend/``, ``lower/``, ...); the
helper modules they share (``kernels_cases.py``, ``halves.py``, ``warp_cases.py``, ...) stay here,
and this directory is put on ``sys.path`` so that ``import kernels_cases`` works from any folder.
"""

import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


@pytest.fixture
def rng():
    """A generator with a fresh seed each run, printed so that a failure can be replayed."""
    seed = np.random.SeedSequence().entropy
    print(f"rng seed: {seed}")
    return np.random.default_rng(seed)


@pytest.fixture(scope="module")
def private_cache_dir(tmp_path_factory):
    """Generated modules go to a private temp dir for the module's tests, never to ~/.cache
    (``pytestmark = pytest.mark.usefixtures("private_cache_dir")``)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path_factory.mktemp("cube_cache")))
        yield
