"""The armed launch's generated check (``runtime/auto_graph_match.py``) answers what comparing the
launch keys would, and refuses handles of another device."""

from __future__ import annotations

import numpy as np
import pytest

import numba_cube as cube
from numba_cube.runtime.auto_graph import launch_key
from numba_cube.runtime.auto_graph_match import expectation

from ._util import PythonDevices


@cube.kernel
def k(a, x):
    x[:] = a * x


@pytest.fixture(scope="module")
def devices():
    d = PythonDevices("rt_auto_graph_match")
    yield d
    d.close()


def test_the_generated_check_agrees_with_key_equality(devices):
    """For plain and non-plain launches (int and tuple geometry, float, signed zero, int, bool,
    NumPy and complex scalars), the check is True exactly when the keys are equal."""
    client = devices.fresh()
    x, y = client.create(np.ones(4)), client.create(np.ones(4))
    opts = ()
    launches = [(1, 1, (2.0, x)), (1, 1, (0.0, x)), (1, 1, (-0.0, x)), (1, 1, (2, x)),
                (1, 1, (True, x)), (1, 1, (1, x)), ((1, 1), 1, (2.0, x)), (1, 2, (2.0, y)),
                (1, 1, (np.float32(2.0), x)), (1, 1, (complex(0.0, -0.0), x)),
                (1, 1, (2.0, x[:])), (2, 1, (2.0, x))]
    for count, dim, args in launches:
        key = launch_key(k, count, dim, args, 0, opts)
        matches = expectation(key, launch_key, client.server)
        for count2, dim2, args2 in launches:
            want = launch_key(k, count2, dim2, args2, 0, opts) == key
            assert matches(k, count2, dim2, args2, 0, opts) is want


def test_a_handle_of_another_device_never_matches(devices):
    """Equal bindings of two devices are not the same buffer: no match."""
    a, b = devices.fresh(), devices.fresh()
    x, foreign = a.create(np.ones(4)), b.create(np.ones(4))
    assert x.binding() == foreign.binding()
    for count in (1, (1, 1)):       # the unrolled check and the key-comparing one
        matches = expectation(launch_key(k, count, 1, (2.0, x), 0, ()), launch_key, a.server)
        assert matches(k, count, 1, (2.0, x), 0, ())
        assert not matches(k, count, 1, (2.0, foreign), 0, ())
