"""Run numba-cuda's ``cudapy`` tests through numba_cube and compare with the reference.

    python tests/conformance/run_cudapy.py                      # every module, CPU backend
    python tests/conformance/run_cudapy.py --backend cuda       # on a GPU, against numba-cuda
    python tests/conformance/run_cudapy.py -m test_atomics -m test_laplace --json out.json

Each test module runs twice, in its own processes (a crash loses one module, not the run): once
as the reference (numba-cuda's simulator for ``cpu``, plain numba-cuda on the GPU for ``cuda``)
and once with every kernel launch routed through numba_cube (``cudapy_plugin.py``). A test counts
when it passes in the reference and launches at least one kernel through numba_cube. It is then:

- **passed**: it passes through numba_cube too;
- **refused**: a launch raised a typed refusal (``CompileError``, ``LaunchArgumentError``);
- **failed**: a launch raised another error, or the test failed for a reason other than an
  assertion after clean launches, or its process crashed or timed out;
- **wrong**: every launch succeeded and the test's assertion failed: numba_cube returned
  different numbers without an error. The target is zero.

The table prints per module and in total; ``--json`` writes every counted test with its class and
the first error, which is where to start reading.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pkgutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE = "numba.cuda.tests.cudapy"
CLASSES = ("passed", "refused", "failed", "wrong")

#: Tests that pin a property of the *reference itself*, not of the kernel language: they do not
#: count. Each says why; the list is printed with every run so nothing leaves the count silently.
NOT_THE_LANGUAGE = {
    # numba-cuda's dispatcher object and its caches: numba_cube compiles and launches through
    # its own, so the numba dispatcher these tests inspect was never asked to compile.
    ("test_array", "TestCudaArray::test_issue_4628"):
        "counts the overloads of numba's dispatcher object",
    ("test_caching", "CUDACachingTest::test_cache_reuse"):
        "counts numba-cuda's disk-cache hits",
    ("test_caching", "CUDACachingTest::test_caching"):
        "counts numba-cuda's disk-cache files",
    ("test_caching", "LaunchConfigInsensitiveCachingTest::test_launch_config_insensitive_cache_keys"):
        "counts numba-cuda's disk-cache index keys",
    ("test_caching", "CUDACachingTest::test_recompile"):
        "pins numba-cuda's disk cache returning code compiled with a global's old value (numba "
        "documents that its cache does not see changed globals); numba_cube's kernel id covers "
        "globals, so it compiles the new value",
    ("test_dispatcher", "TestDispatcher::test_launch_config_args_are_thread_local"):
        "inspects numba's launch-configuration objects during its own compile",
    ("test_dispatcher", "TestDispatcher::test_capture_compile_config"):
        "inspects numba's launch-configuration objects during its own compile",
    ("test_dispatcher", "TestDispatcher::test_launch_config_available_during_compile"):
        "inspects numba's launch-configuration objects during its own compile",
    ("test_dispatcher", "TestDispatcher::test_dispatcher_mark_launch_config_sensitive"):
        "replaces numba's dispatcher._compile_for_args to mark the kernel launch-config "
        "sensitive during numba's own launch-time compile; numba_cube compiles with "
        "dispatcher.compile(signature), which that hook never sees",
    ("test_dispatcher", "TestDispatcher::test_ambiguous_new_version"):
        "counts the overloads of numba's dispatcher object",
    ("test_dispatcher", "TestDispatcher::test_explicit_signatures_device_unsafe"):
        "its value assertions pass; it then counts the overloads of numba's dispatcher object",
    ("test_ssa", "TestSSA::test_undefined_var"):
        "expects numba's compile-time warning from a second compile of the same kernel under "
        "another Numba setting; numba_cube compiled that kernel once",
    ("test_cuda_array_interface", "TestCudaArrayInterface::test_launch_sync"):
        "asserts numba's host-side Stream.synchronize() on a foreign array's stream; numba_cube "
        "orders after that stream on the device (an event), which the mock cannot see",
    ("test_cuda_array_interface", "TestCudaArrayInterface::test_launch_sync_two_streams"):
        "as test_launch_sync, with two foreign streams",
}

#: Tests whose reference answer on the CPU backend's run is one of numba-cuda's *simulator*
#: (the reference there) and differs from numba-cuda on a GPU: not counted on the CPU backend
#: only. On a GPU the reference is numba-cuda itself and these count as any test.
SIMULATOR_QUIRKS = {
    ("test_array_alignment", "TestCudasimUnsupportedAlignment::test_local_unsupported"):
        "asserts that the simulator refuses alignment= (a simulator limitation; numba-cuda "
        "and numba_cube both accept it)",
    ("test_array_alignment", "TestCudasimUnsupportedAlignment::test_shared_unsupported"):
        "asserts that the simulator refuses alignment= (a simulator limitation)",
    ("test_intrinsics", "TestCudaIntrinsic::test_round_to_f4_halfway"):
        "the simulator drops the declared float32 signature and rounds the float64 0.3425 with "
        "CPython's round() (0.343); numba-cuda's own algorithm (cudaimpl.round_to_impl, "
        "round-half-even on y = 342.5) gives 0.342 for that float64, as numba_cube's CPU backend "
        "does; on a GPU, where the signature makes it a float32, numba_cube gives 0.343 and passes",
    **{("test_intrinsics", f"TestCudaIntrinsic::{t}"):
       "declares a 32-bit scalar (void(int32[:], int32) or uint32); the simulator drops the "
       "signature and its clz counts 32 "
       "bits whatever the type, so the reference says 32-bit while the Python int reaches "
       "numba_cube's CPU kernel as int64 (as it would reach numba-cuda without the signature) "
       "and clz counts 64; on a GPU, with the signature, numba_cube counts 32 and passes"
       for t in ("test_clz_i4", "test_clz_i4_0s", "test_clz_i4_1s", "test_clz_u4")},
    ("test_intrinsics", "TestCudaIntrinsic::test_brev_u4"):
        "declares void(uint32[:], uint32); the simulator drops the signature and its brev "
        "reverses 32 bits of the Python int, while the int reaches numba_cube's CPU kernel as "
        "int64, for which numba-cuda's brev has no overload (a CompileError); on a GPU, with "
        "the signature, numba_cube reverses 32 bits and passes",
    ("test_exception", "TestException::test_zero_division_error_in_debug"):
        "expects FloatingPointError when config.ENABLE_CUDASIM is set (the simulator divides "
        "with NumPy) and ZeroDivisionError on a GPU; numba_cube's CPU backend raises "
        "ZeroDivisionError, numba-cuda's GPU behaviour",
}


def all_modules() -> list[str]:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    code = ("import pkgutil, numba.cuda.tests.cudapy as p; "
            "print('\\n'.join(m.name for m in pkgutil.iter_modules(p.__path__)))")
    names = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=True).stdout.split()
    return sorted(n for n in names if n.startswith("test_"))


def run_module(module: str, mode: str, backend: str, workdir: Path, timeout: float) -> dict:
    """Run one module in one mode; return {test: row} (rows from the plugin) plus a status."""
    out = workdir / f"{module}.{mode}.jsonl"
    out.unlink(missing_ok=True)
    env = dict(os.environ)
    env["NUMBA_CUBE_CONFORMANCE"] = mode if mode == "baseline" else backend
    env["NUMBA_CUBE_CONFORMANCE_OUT"] = str(out)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    env.setdefault("NUMBA_CUBE_CACHE_DIR", str(workdir / "cache"))
    if backend == "cpu":
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    ini = workdir / "pytest.ini"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "cudapy_plugin",
           "-c", str(ini), "--rootdir", str(workdir), "--import-mode=importlib",
           "-o", "faulthandler_timeout=0", "--pyargs", f"{PACKAGE}.{module}"]
    status = "ok"
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, cwd=workdir, capture_output=True, text=True,
                              timeout=timeout)
        if proc.returncode not in (0, 1, 5):       # 1: some tests failed; 5: none collected
            status = f"exit {proc.returncode}: {(proc.stdout + proc.stderr)[-600:]}"
    except subprocess.TimeoutExpired:
        status = f"timed out after {timeout:.0f} s"
    return {"status": status, "rows": read_rows(out), "seconds": time.perf_counter() - start}


def read_rows(path: Path) -> dict:
    rows = {}
    if path.exists():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            rows[row["test"]] = row
    return rows


def classify(base: dict | None, routed: dict | None, routed_status: str) -> str | None:
    """The class of one test, or None when it does not count."""
    if base is None or base["outcome"] != "passed":
        return None
    if routed is None:
        # Not reported: its process crashed or timed out before it finished. Whether it would
        # have launched is unknown; a crash of a module that launches counts against us.
        return "failed" if routed_status != "ok" else None
    launches = routed["launches"]
    if not launches:
        return None
    if routed["outcome"] == "passed":
        return "passed"
    if routed["outcome"] == "skipped":
        return None
    outcomes = {e["outcome"] for e in launches}
    if "refused" in outcomes:
        return "refused"
    if "error" in outcomes:
        return "failed"
    return "wrong" if routed["error_type"] == "AssertionError" else "failed"


def first_error(routed: dict | None, status: str) -> str:
    if routed is None:
        return status
    for e in routed["launches"]:
        if e["outcome"] != "ok":
            return f"{e['kernel']}: {e.get('error', '')}"
    return f"{routed.get('error_type')}: {routed.get('error')}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("-m", "--module", action="append", help="a cudapy module (default: all)")
    ap.add_argument("-j", "--jobs", type=int, default=max(1, (os.cpu_count() or 2)))
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per module and mode")
    ap.add_argument("--json", help="write every counted test with its class here")
    ap.add_argument("--workdir", help="keep the per-module logs here (default: a temp dir)")
    ap.add_argument("--summarize", action="store_true",
                    help="run nothing: summarize the logs already in --workdir")
    args = ap.parse_args(argv)

    modules = args.module or all_modules()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="cudapy-conformance-"))
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "pytest.ini").write_text("[pytest]\n")

    if args.summarize:
        results = {(m, mode): {"status": "ok", "rows": read_rows(workdir / f"{m}.{mode}.jsonl")}
                   for m in modules for mode in ("baseline", "routed")}
    else:
        jobs = {}
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for m in modules:
                for mode in ("baseline", "routed"):
                    jobs[(m, mode)] = pool.submit(run_module, m, mode, args.backend, workdir,
                                                  args.timeout)
        results = {key: f.result() for key, f in jobs.items()}

    not_counted = dict(NOT_THE_LANGUAGE)
    if args.backend == "cpu":
        not_counted.update(SIMULATOR_QUIRKS)
    table, detail = {}, []
    for m in modules:
        base, routed = results[(m, "baseline")], results[(m, "routed")]
        counts = dict.fromkeys(CLASSES, 0)
        for test in sorted(set(base["rows"]) | set(routed["rows"])):
            b, r = base["rows"].get(test), routed["rows"].get(test)
            cls = classify(b, r, routed["status"])
            if cls is None or (m, test) in not_counted:
                continue
            counts[cls] += 1
            if cls != "passed":
                detail.append({"module": m, "test": test, "class": cls,
                               "error": first_error(r, routed["status"])})
        table[m] = (counts, routed["status"], base["status"],
                    base.get("seconds", 0.0) + routed.get("seconds", 0.0))

    width = max(len(m) for m in modules)
    print(f"{'module':<{width}}  " + "  ".join(f"{c:>7}" for c in CLASSES))
    total = dict.fromkeys(CLASSES, 0)
    for m, (counts, status, _, _) in table.items():
        for c in CLASSES:
            total[c] += counts[c]
        if not any(counts.values()) and status == "ok":
            continue
        note = "" if status == "ok" else f"  ({status.splitlines()[0][:60]})"
        print(f"{m:<{width}}  " + "  ".join(f"{counts[c]:>7}" for c in CLASSES) + note)
    counted = sum(total.values())
    print(f"{'total':<{width}}  " + "  ".join(f"{total[c]:>7}" for c in CLASSES)
          + f"   ({counted} tests launch a kernel and pass in the reference)")
    if counted:
        print(f"pass rate {total['passed'] / counted:.1%}; silently wrong: {total['wrong']}")
    excluded = [(m, t, why) for (m, t), why in not_counted.items() if m in modules]
    for m, t, why in excluded:
        print(f"not counted: {m}::{t}: {why}")
    if args.json:
        Path(args.json).write_text(json.dumps({"backend": args.backend, "total": total,
                                               "modules": {m: t[0] for m, t in table.items()},
                                               "seconds": {m: round(t[3], 1) for m, t in table.items()},
                                               "tests": detail}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
