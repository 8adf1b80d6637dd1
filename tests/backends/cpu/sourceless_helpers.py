"""Helpers of the tests of kernels without source (``test_sourceless*.py``): kernels made by
``exec``, run through both generated variants of ``build_program``'s program."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from numba import cuda, float64, uint64

VARIANTS = ["serial", "parallel"]


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """Generated modules go to a private temp dir (imported by each test module, so per module)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path_factory.mktemp("cube_cache")))
        yield


@pytest.fixture
def rng():
    return np.random.default_rng(20261201)


def made(src, **names):
    """The functions ``src`` defines, made by exec (no source anywhere)."""
    ns = {"cuda": cuda, "np": np, "float64": float64, "uint64": uint64, **names}
    exec(textwrap.dedent(src), ns)
    return ns


def launch(program, variant, grid, block, *args):
    """Run one variant of a translated program on a ``grid`` of ``block`` (1 to 3 dims each)."""
    grid = tuple(grid) + (1,) * (3 - len(grid))
    block = tuple(block) + (1,) * (3 - len(block))
    getattr(program, variant)(*grid, *block, *args)
