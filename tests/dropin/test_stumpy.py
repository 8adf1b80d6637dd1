"""A library written against numba.cuda, unchanged: stumpy's ``gpu_stump`` under the layer
against ``stumpy.stump`` (stumpy's own CPU code) as the reference. stumpy decorates its kernels
with eager signatures at import, so it is imported in a fresh process after ``install``.

Today the CPU translator refuses ``_compute_and_update_PI_kernel`` (every unit writes
``QT_out[0]``, which unit 0 then reads, inside a grid-stride loop with no barrier): a typed
``CompileError`` naming the line, recorded here as an expected failure until the translator
runs it; any other outcome must be stumpy.stump's numbers."""

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

T = np.random.default_rng(0).random(96)
try:
    got = stumpy.gpu_stump(T, 8)
except numba_cube.CompileError as exc:
    print("REFUSED", exc)
    raise SystemExit(0)
ref = stumpy.stump(T, 8)          # (after: its compile is the slow part of this test)
assert np.allclose(ref[:, 0].astype(float), got[:, 0].astype(float))
assert (ref[:, 1] == got[:, 1]).all()
print("EQUAL")
"""


def test_gpu_stump_equals_stump_or_is_refused_by_name(tmp_path):
    """gpu_stump's matrix profile equals stumpy.stump's, or its kernel is a typed refusal."""
    script = tmp_path / "stump.py"
    script.write_text(_PROGRAM)
    out = subprocess.run([sys.executable, "-W", "ignore", str(script)], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    if out.stdout.startswith("REFUSED"):
        assert "gpu_stump.py, line" in out.stdout
        pytest.xfail("the CPU translator refuses gpu_stump's kernel: " + out.stdout[:300])
    assert out.stdout.strip() == "EQUAL"
