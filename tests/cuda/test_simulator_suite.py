"""Runs the CUDA test cases (``tests/cuda/cases``) where this session cannot collect them.

Without a GPU, the main test session does not collect ``cases/`` (``conftest.py``): numba-cuda's
simulator has to be chosen before ``numba.cuda`` is first imported, which this session did long
ago. So the cases run here in subprocesses, twice:

- under the simulator (``NUMBA_ENABLE_CUDASIM=1``): ``cube.client("cuda")`` is the simulator
  backend of the ``cudasim`` plugin (``plugins/numba_cube_cudasim``, installed as CI installs it;
  without it every case fails with the ``BackendNotFound`` that names the install command, never
  a silent skip), the way CI exercises the CUDA backend's contract;
- against the fake driver (``NUMBA_CUBE_TEST_CUDA_DEVICE=fakecuda``, whose kernels run on the
  same plugin's simulator machinery): the GPU path's own code (``CudaMechanism``: packed
  launches, events, pool, read-back and device-count dynamic counts, CUDA graphs, interop, faults) over
  host memory.

On a machine with a GPU the cases are collected directly, for real, and these are skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from numba_cube.backends.cuda.driver import probe

CASES = Path(__file__).parent / "cases"
ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.skipif(probe.device_count() > 0, reason="a GPU is present: the cases run for real"),
    pytest.mark.skipif(probe.simulating() or bool(os.environ.get("NUMBA_CUBE_TEST_CUDA_DEVICE")),
                       reason="this session collects the cases itself"),
]


def _run_cases(extra_env: dict) -> None:
    pytest.importorskip("numba_cuda")
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env.pop("NUMBA_CUBE_TEST_CUDA_DEVICE", None)
    env.update(extra_env)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    cmd = [sys.executable, "-m", "pytest", str(CASES), "-q", "-x", "-p", "no:cacheprovider",
           "-o", "addopts=-ra"]
    proc = subprocess.run(cmd, cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"CUDA cases failed ({extra_env}):\n{output}"
    assert " passed" in output, output


def test_cases_under_the_simulator():
    """Every CUDA case passes on numba-cuda's simulator (NUMBA_ENABLE_CUDASIM=1), no GPU needed."""
    _run_cases({"NUMBA_ENABLE_CUDASIM": "1"})


def test_cases_on_the_fake_driver():
    """Every CUDA case passes on the GPU path (CudaMechanism) over the fake driver."""
    pytest.importorskip("cuda.bindings")
    _run_cases({"NUMBA_CUBE_TEST_CUDA_DEVICE": "fakecuda"})
