"""numba-cuda's documentation examples (``numba/cuda/tests/doc_examples``, shipped in its wheel)
run unchanged through ``python -m numba_cube run -m pytest`` on the CPU backend.

Every one of them is skipped on numba-cuda's simulator ("cudasim doesn't support cuda import at
non-top-level"), so the simulator gives no floor; the floor is what passes here (``PASSING``),
and every other example must fail *loudly*, for the reason recorded in ``KNOWN_FAILURES`` (a
typed refusal naming the construct, or a numba-cuda internal that exists only after a GPU
compile), never with other numbers. It runs in about half a minute on two cores.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("numba_cuda", "filecheck")),
    reason="numba-cuda's doc examples need numba-cuda and filecheck (the test and cuda extras)")

#: the examples that pass (the floor: it only grows)
PASSING = {
    "test_cpu_gpu_compat.TestCpuGpuCompat.test_ex_cpu_gpu_compat",
    "test_globals.TestGlobals.test_ex_globals_constant_capture",
    "test_laplace.TestLaplace.test_ex_laplace",
    "test_matmul.test_matmul",
    "test_montecarlo.TestMonteCarlo.test_ex_montecarlo",
    "test_random.TestRandom.test_ex_3d_grid",
    "test_reduction.TestReduction.test_ex_reduction",
    "test_ufunc.TestUFunc.test_ex_cuda_ufunc_call",
    "test_vecadd.TestVecAdd.test_ex_vecadd",
}

#: the others: example -> what its failure message says (why it cannot pass on the CPU backend)
KNOWN_FAILURES = {
    # reads numba-cuda's compiled kernel (overloads[sig]), which only a GPU compile makes
    "test_cg.TestCooperativeGroups.test_ex_grid_sync": "KeyError",
    # a raw pointer from __cuda_array_interface__: host memory has none, as a NumPy array
    "test_cpointer.TestCPointer.test_ex_cpointer": "__cuda_array_interface__",
    # foreign CUDA C/C++ device functions (cuda.declare_device) need a CUDA compiler
    "test_ffi.TestFFI.test_ex_extra_includes": "UnsupportedAPIError",
    "test_ffi.TestFFI.test_ex_from_buffer": "UnsupportedAPIError",
    "test_ffi.TestFFI.test_ex_linking_cu": "UnsupportedAPIError",
    # a device array captured as a global (PRICES): the CPU translator takes NumPy arrays as
    # constants, not device arrays (a CompileError naming the global and the line)
    "test_globals.TestGlobals.test_ex_globals_device_array_capture": "DeviceNDArray",
    # this_grid().sync() only in units at a session boundary (the others return): a GPU lets
    # the units that exited pass; numba_cube raises DivergenceError naming the line
    "test_sessionize.TestSessionization.test_ex_sessionize": "DivergenceError",
}


def _plugin_args() -> list[str]:
    """``-p`` for the layer's pytest hook unless its entry point is installed (then pytest
    loads it already)."""
    installed = any(ep.value == "pytest_numba_cube"
                    for ep in importlib.metadata.entry_points(group="pytest11"))
    return [] if installed else ["-p", "pytest_numba_cube"]


def test_doc_examples_run_unchanged(tmp_path):
    """The examples in ``PASSING`` pass; every other one fails for its recorded reason."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    report = tmp_path / "report.xml"
    cmd = [sys.executable, "-m", "numba_cube", "run", "-m", "pytest", "-q", "-p",
           "no:cacheprovider", *_plugin_args(), "-c", str(tmp_path / "pytest.ini"), "--rootdir",
           str(tmp_path), "--import-mode=importlib", "-o", "faulthandler_timeout=0",
           f"--junitxml={report}", "--pyargs", "numba.cuda.tests.doc_examples"]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert report.exists(), out.stdout[-3000:] + out.stderr[-3000:]
    passed, failed = set(), {}
    for case in ET.parse(report).getroot().iter("testcase"):
        # classname "numba.cuda.tests.doc_examples.test_x.TestX" -> "test_x.TestX.<test>"
        name = case.get("classname").split("doc_examples.", 1)[-1] + "." + case.get("name")
        problem = case.find("failure") if case.find("failure") is not None else case.find("error")
        if problem is None and case.find("skipped") is None:
            passed.add(name)
        elif problem is not None:
            failed[name] = (problem.get("message") or "") + (problem.text or "")[-2000:]
    assert PASSING <= passed, (sorted(PASSING - passed), failed)
    unexplained = {n: m[:300] for n, m in failed.items()
                   if n not in KNOWN_FAILURES or KNOWN_FAILURES[n] not in m}
    assert unexplained == {}
