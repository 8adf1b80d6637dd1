"""``python -m numba_cube demo``: the README's first command must work and say what it did."""

from __future__ import annotations

import subprocess
import sys


def test_demo_runs_and_every_check_passes():
    """The demo runs a real pipeline on the CPU backend, prints what it did, and exits 0 only if
    every result matched NumPy (pipeline, failure propagation and repair, cross-stream order)."""
    out = subprocess.run([sys.executable, "-m", "numba_cube", "demo", "--size", "65536"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert "matches NumPy: True" in text
    assert "relaunch repaired it: True" in text
    assert "correct: True" in text
    assert "dynamic" in text
    assert "autotune: block size" in text
