"""A library written against numba.cuda, unchanged: stumpy's GPU functions under the layer give
the numbers of stumpy's own CPU functions (the reference: stumpy's hand-written ``njit`` code).

stumpy decorates its kernels with eager signatures at import, so it is imported in a fresh
process after ``install``; one process runs every function, so stumpy's CPU code (the slow part:
its parallel ``njit`` compiles) and the layer's kernels are compiled once each. Series are small
(tens of points): the contract is equality, not scale. 48 s on two cores with cold caches,
almost all of it compiles.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("stumpy") is None,
                                reason="stumpy is not installed (the test extra)")

_PROGRAM = r"""
import numpy as np
import numba_cube
numba_cube.install("cpu")
import stumpy


def same_profile(name, ref, got):
    ref, got = np.asarray(ref), np.asarray(got)
    assert ref.shape == got.shape, (name, ref.shape, got.shape)
    assert np.allclose(ref[:, 0].astype(float), got[:, 0].astype(float)), name
    # nearest-neighbour, left and right indices: the same integers
    assert (ref[:, 1:].astype(np.int64) == got[:, 1:].astype(np.int64)).all(), name
    print(name, "equal")


rng = np.random.default_rng(0)
T_A, T_B = rng.random(64), rng.random(48)
m = 8
same_profile("gpu_stump self-join", stumpy.stump(T_A, m), stumpy.gpu_stump(T_A, m))
same_profile("gpu_stump AB-join", stumpy.stump(T_A, m, T_B, ignore_trivial=False),
             stumpy.gpu_stump(T_A, m, T_B, ignore_trivial=False))
same_profile("gpu_aamp self-join", stumpy.aamp(T_A, m), stumpy.gpu_aamp(T_A, m))
assert np.isclose(stumpy.mpdist(T_A, T_B, m), stumpy.gpu_mpdist(T_A, T_B, m)), "gpu_mpdist"
print("gpu_mpdist equal")
Ts = [rng.random(40), rng.random(36), rng.random(44)]
ref, got = stumpy.ostinato(Ts, m), stumpy.gpu_ostinato(Ts, m)
# (radius, index of the series, index of the subsequence)
assert np.isclose(ref[0], got[0]) and tuple(ref[1:]) == tuple(got[1:]), ("gpu_ostinato", ref, got)
print("gpu_ostinato equal")
"""

_FUNCTIONS = ("gpu_stump self-join", "gpu_stump AB-join", "gpu_aamp self-join", "gpu_mpdist",
              "gpu_ostinato")


def test_gpu_functions_equal_stumpys_cpu_functions(tmp_path):
    """gpu_stump (self-join and AB-join) equals stumpy.stump, gpu_aamp equals stumpy.aamp (the
    distances close, the nearest-neighbour / left / right indices identical), gpu_mpdist equals
    stumpy.mpdist and gpu_ostinato equals stumpy.ostinato, with stumpy unchanged."""
    script = tmp_path / "stumpy_gpu_vs_cpu.py"
    script.write_text(_PROGRAM)
    out = subprocess.run([sys.executable, "-W", "ignore", str(script)], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert out.stdout.split("\n")[:-1] == [f"{name} equal" for name in _FUNCTIONS]
