"""What a warm launch matches (``runtime/launch/warm_match.py``), shared by the host and CUDA warm paths.

An armed launch matches a later one only when every handle is the same handle (the identity of
its binding: a view of the same buffer is another handle) and every scalar has the same type; a
different number of arguments, or a scalar where a handle was, is no match (the caller reads
the exceptions as such). Anything that cannot be matched so cheaply is never armed.
"""

from __future__ import annotations

import numpy as np
import pytest

import numba_cube as cube
from numba_cube.runtime.launch.warm_match import entry_matcher, match_of, matcher


@pytest.fixture(scope="module")
def handles():
    c = cube.client("cpu")
    return c.create(np.zeros(4)), c.create(np.ones(4))


def test_same_handles_and_scalar_types_match(handles):
    """Handles by identity, scalars by type: the value of a scalar does not matter."""
    a, b = handles
    expect = match_of((a, 2.0, b, 3))
    match = matcher((True, False, True, False))
    assert match((a, 5.5, b, 7), expect)
    assert not match((b, 5.5, a, 7), expect)          # the other handle
    assert not match((a, 5, b, 7), expect)            # an int where a float was
    assert not match((a, 5.5, a[:2], 7), expect)      # a view is another handle


def test_another_arity_or_a_scalar_for_a_handle_is_no_match(handles):
    """The generated matcher raises what its callers read as "no match"."""
    a, b = handles
    expect = match_of((a, b))
    match = matcher((True, True))
    with pytest.raises(ValueError):
        match((a, b, a), expect)
    with pytest.raises(AttributeError):
        match((a, 1.0), expect)
    assert matcher(())((), ())


def test_what_cannot_be_matched_cheaply_is_not_armed(handles):
    """A tuple, a NumPy array or any other object makes ``match_of`` answer None; NumPy scalars
    of numeric kinds match by type."""
    a, _ = handles
    assert match_of((a, (1, 2))) is None
    assert match_of((a, np.zeros(2))) is None
    armed = match_of((a, np.float32(1.0)))
    assert len(armed) == 2 and armed[1] is np.float32


def test_an_entry_matcher_checks_stream_geometry_options_and_shared_bytes_first(handles):
    """The CUDA warm path's per-entry matcher answers as the entry's separate comparisons did:
    the same stream object, equal count, dim and options, an int shared-memory size equal to the
    entry's (64.0 is no match: the general path refuses a size that is not an int), then the
    arguments as ``matcher`` compares them (with its exceptions for another arity or a scalar
    where a handle was)."""
    a, b = handles
    stream, other_stream = object(), object()
    options = (("fastmath", True),)
    match = entry_matcher(stream, (2, 1), 64, options, 64, match_of((a, 2.0)))
    assert match((a, 5.5), (2, 1), 64, stream, options, 64)
    assert match((a, 5.5), (2, 1), 64, stream, (("fastmath", True),), 64)     # an equal key
    assert not match((a, 5.5), (2, 1), 64, other_stream, options, 64)
    assert not match((a, 5.5), (2, 2), 64, stream, options, 64)
    assert not match((a, 5.5), (2, 1), 32, stream, options, 64)
    assert not match((a, 5.5), (2, 1), 64, stream, (), 64)
    assert not match((a, 5.5), (2, 1), 64, stream, options, 0)
    assert not match((a, 5.5), (2, 1), 64, stream, options, 64.0)
    assert not match((b, 5.5), (2, 1), 64, stream, options, 64)
    with pytest.raises(ValueError):
        match((a, 5.5, b), (2, 1), 64, stream, options, 64)
    with pytest.raises(AttributeError):
        match((1.0, 5.5), (2, 1), 64, stream, options, 64)
    assert entry_matcher(stream, 1, 1, (), 0, ())((), 1, 1, stream, (), 0)

