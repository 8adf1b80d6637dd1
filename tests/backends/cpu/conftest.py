"""Fixtures shared by the CPU backend's tests."""

import numpy as np
import pytest


@pytest.fixture
def rng():
    """A generator with a fresh seed each run, printed so that a failure can be replayed."""
    seed = np.random.SeedSequence().entropy
    print(f"rng seed: {seed}")
    return np.random.default_rng(seed)
