"""A bounded part of the conformance run, in every test session: numba-cuda's own ``cudapy``
tests of these modules, routed through numba_cube's CPU backend, with the simulator as the
reference (``run_cudapy.py``).

The contract it pins: **no test is silently wrong** (every launch succeeded and the numbers
differ from the reference), and the tests that passed when this floor was set still pass. The
modules were chosen for what they exercise (factory kernels and closures, NumPy scalar types,
operator and complex functions, shared-array shapes, exceptions and failures with no buffer to
live on, In/Out argument hints; device functions taking atomics and dtypes, exec'd kernels,
barrier values, grid sync, tuples, records, enums and dates) and for running in about two
minutes on two cores. The full run is
``python tests/conformance/run_cudapy.py`` (README, "Conformance").
"""

from __future__ import annotations

import importlib.util
import json

import pytest

import run_cudapy

MODULES = ["test_operator", "test_sm", "test_dispatcher", "test_exception", "test_userexc",
           "test_retrieve_autoconverted_arrays", "test_freevar", "test_globals", "test_casting",
           "test_idiv", "test_powi", "test_complex", "test_atomics", "test_sync",
           "test_cooperative_groups", "test_make_function_to_jit_function", "test_array_args",
           "test_record_dtype", "test_enums", "test_datetime", "test_constmem"]

#: passed tests of these modules when the floor was last raised (it only goes up)
PASSED_FLOOR = 297

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("numba_cuda", "filecheck")),
    reason="the conformance run needs numba-cuda and filecheck (the test and cuda extras)")


def test_subset_has_no_silently_wrong_test(tmp_path):
    """Every counted test of the subset passes or fails loudly; none is silently wrong, and the
    pass count does not fall below the floor."""
    out = tmp_path / "subset.json"
    args = ["--json", str(out), "--workdir", str(tmp_path / "work"), "--timeout", "600"]
    for m in MODULES:
        args += ["-m", m]
    assert run_cudapy.main(args) == 0
    result = json.loads(out.read_text())
    wrong = [f"{t['module']}::{t['test']}: {t['error']}" for t in result["tests"]
             if t["class"] == "wrong"]
    assert wrong == [], "silently wrong:\n" + "\n".join(wrong)
    assert result["total"]["passed"] >= PASSED_FLOOR, result["total"]
