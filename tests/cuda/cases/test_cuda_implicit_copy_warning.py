"""numba-cuda's performance warning for host arrays, on a CUDA client: ``kernel[grid, block]``
with a host NumPy array copies it to the device and back, and says so with numba's own
``NumbaPerformanceWarning`` under numba's switch (``CUDA_WARN_ON_IMPLICIT_COPY``); device
arrays and handles are bound without a copy and warn nothing."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numba import cuda
from numba.cuda.core import config
from numba.cuda.core.errors import NumbaPerformanceWarning

import numba_cube as cube

from _cuda_setup import only


@cube.kernel
def _bump(r, x):
    r[0] = x + 1


@pytest.fixture
def on_client(client):
    cube.use(client)
    yield client
    cube.use(None)


def _with_switch(value):
    old = config.CUDA_WARN_ON_IMPLICIT_COPY
    config.CUDA_WARN_ON_IMPLICIT_COPY = value
    return old


@only("sim", "gpu", why="the warning is a 'cuda' client's; the fake driver's backend has another name")
def test_host_array_warns_as_numba_does(on_client):
    """A host array in a numba-style launch gives numba's warning, and the result still arrives."""
    old = _with_switch(1)
    try:
        r = np.zeros(1, dtype=np.float32)
        with pytest.warns(NumbaPerformanceWarning, match="Host array used in CUDA kernel will incur"):
            _bump[1, 1](r, 2)
        assert r[0] == 3
    finally:
        _with_switch(old)


def test_no_warning_when_switched_off_or_for_handles(on_client):
    """With numba's switch off, and for a handle (no copy), nothing is warned."""
    old = _with_switch(0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", NumbaPerformanceWarning)
            _bump[1, 1](np.zeros(1, dtype=np.float32), 2)
    finally:
        _with_switch(old)
    old = _with_switch(1)
    try:
        h = on_client.create(np.zeros(1, dtype=np.float32))
        with warnings.catch_warnings():
            warnings.simplefilter("error", NumbaPerformanceWarning)
            _bump[1, 1](h, 2)
        assert on_client.read(h)[0] == 3
    finally:
        _with_switch(old)
