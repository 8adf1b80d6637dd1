"""The armed launch's generated check (``runtime/graphs/auto_match.py``) answers what comparing the
launch keys would, and refuses handles of another device."""

from __future__ import annotations

import numpy as np
import pytest

import numba_cube as cube
from numba_cube.runtime.graphs.auto_graph import launch_key
from numba_cube.runtime.graphs.auto_match import expectation

from .._util import PythonDevices


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


def test_the_identity_first_check_agrees_with_key_equality(devices):
    """Given the traced arguments, the check (which then matches the traced handle, int and
    options objects by identity first) is still True exactly when the keys are equal: the same
    handle matches, a view made afresh with an equal binding matches by value, another buffer,
    another device's buffer and a bool for an int geometry never match."""
    client, other = devices.fresh(), devices.fresh()
    x, y, foreign = client.create(np.ones(4)), client.create(np.ones(4)), other.create(np.ones(4))
    opts = ()
    launches = [(1, 1, (2.0, x)), (1, 1, (2.0, y)), (1, 1, (2.0, x[:])), (1, 1, (2.0, foreign)),
                (1, 1, (2, x)), ((1, 1), 1, (2.0, x)), (2, 1, (2.0, y[1:])),
                (True, 1, (2.0, x)), (1, True, (2.0, x))]   # (True == 1, but no geometry)
    for count, dim, args in launches[:3] + launches[4:7]:
        key = launch_key(k, count, dim, args, 0, opts)
        matches = expectation(key, launch_key, client.server, args)
        for count2, dim2, args2 in launches:
            want = launch_key(k, count2, dim2, args2, 0, opts) == key \
                and all(a.server is client.server for a in args2 if isinstance(a, cube.Handle))
            assert matches(k, count2, dim2, args2, 0, opts) is want


def test_traced_arguments_that_do_not_make_the_key_give_no_identity_match(devices):
    """A traced handle is trusted by identity only when it is bound as the key says: handed the
    arguments of another launch, the check still refuses that other launch's handle."""
    client = devices.fresh()
    x, y = client.create(np.ones(4)), client.create(np.ones(4))
    matches = expectation(launch_key(k, 1, 1, (2.0, x), 0, ()), launch_key, client.server, (2.0, y))
    assert matches(k, 1, 1, (2.0, x), 0, ())
    assert not matches(k, 1, 1, (2.0, y), 0, ())
