"""``numba_cube/errors.py``: what a ``LaunchFailure`` keeps when it is pickled (to another
process: a Dask worker's error reaching the client)."""

from __future__ import annotations

import pickle

import numba_cube as cube


def test_a_pickled_launch_failure_keeps_root_kernel_chain_and_notes():
    """Unpickled, the failure is of the same combined class, with the same root, kernel id,
    chain and notes (where it was seen), and the same message."""
    failure = cube.LaunchFailure(ValueError("negative input"), "first-0123456789ab",
                                 ("first-0123456789ab", "second-ba9876543210"))
    failure.add_note("the buffer failed on Dask worker tcp://127.0.0.1:1")
    back = pickle.loads(pickle.dumps(failure))
    assert isinstance(back, cube.LaunchFailure) and isinstance(back, ValueError)
    assert type(back).__name__ == type(failure).__name__
    assert isinstance(back.root, ValueError) and str(back.root) == "negative input"
    assert (back.kernel_id, back.chain) == (failure.kernel_id, failure.chain)
    assert back.__notes__ == failure.__notes__
    assert str(back) == str(failure)
    assert not hasattr(pickle.loads(pickle.dumps(cube.LaunchFailure(KeyError(1), "k"))), "__notes__")
