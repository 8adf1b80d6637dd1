#!/usr/bin/env bash
# Issue 30 item 2 (kernel exceptions on CUDA without debug=True) on a GPU machine, in one go:
#   1. the environment; if numba does not import with the machine's NumPy, the NumPy wheel
#      carried in .whl/ (numba 0.68 wants NumPy <= 2.4) is installed into a private target
#      directory put first on PYTHONPATH (nothing else is installed);
#   2. the new GPU cases, verbose: tests/cuda/cases/test_cuda_raising_kernels.py (a raising
#      kernel's read raises LaunchFailure[ValueError] with the message, downstream launches carry
#      the root, asserts, an unrelated launch stays readable, numba-style launches raise, two
#      streams told apart, graphs refuse such kernels) and test_cuda_kernel_exceptions.py
#      (debug=True unchanged: blocking, the tid/ctaid prefix);
#   3. the whole CUDA suite (tests/cuda), as benchmarks/gpu_check.sh runs it;
#   4. the benchmark sections launch_host_time, bandwidth and kernel_errors (the new section 6:
#      warm launch host time and device time of a kernel that can raise, checked vs compiled
#      as before, in one process);
#   5. a compact summary.
# Run from anywhere: bash benchmarks/gpu_exceptions_check.sh. Outputs are copied to $OUT when set.
# Time limits (cases 90 s, suite 210 s, benchmark 150 s) keep the run under 8 minutes.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
OUTDIR="${OUT:-$(mktemp -d)}"
PY="${PYTHON:-python3}"

echo "== environment =="
nvidia-smi -L 2>/dev/null || echo "nvidia-smi: not available"
if ! "$PY" -c "import numba" >/dev/null 2>&1 && [ -d .whl ]; then
    DEPS="$(mktemp -d)"
    echo "numba does not import with this NumPy: installing the wheels of .whl/ into $DEPS"
    "$PY" -m pip install --quiet --no-index --find-links .whl --target "$DEPS" numpy 2>&1 | tail -3
    export PYTHONPATH="$DEPS:$PYTHONPATH"
fi
"$PY" - <<'PYEOF'
import importlib, sys
print("python", sys.version.split()[0])
for name in ("numpy", "numba", "numba_cuda", "cuda.bindings"):
    try:
        mod = importlib.import_module(name)
        print(f"{name:14s}", getattr(mod, "__version__", "?"))
    except Exception as exc:
        print(f"{name:14s} not importable ({type(exc).__name__}: {exc})")
from numba_cube.backends.cuda.driver import probe
print("cuda backend  ", "available" if probe.available() is None else probe.available(),
      f"({probe.device_count()} device(s))")
PYEOF

echo
echo "== new GPU cases (verbose) =="
timeout 90 "$PY" -m pytest tests/cuda/cases/test_cuda_raising_kernels.py \
    tests/cuda/cases/test_cuda_kernel_exceptions.py -v -p no:cacheprovider -rs 2>&1 \
    | tee "$OUTDIR/pytest_raising.txt"
CASES_RC=${PIPESTATUS[0]}

echo
echo "== the CUDA suite: $PY -m pytest tests/cuda -q =="
timeout 210 "$PY" -m pytest tests/cuda -q -p no:cacheprovider -rs 2>&1 | tee "$OUTDIR/pytest_cuda.txt"
SUITE_RC=${PIPESTATUS[0]}

echo
echo "== benchmark: bench_cuda.py --only=launch_host_time,bandwidth,kernel_errors =="
OUT="$OUTDIR" timeout 150 "$PY" benchmarks/bench_cuda.py \
    --only=launch_host_time,bandwidth,kernel_errors 2>&1 | tee "$OUTDIR/bench_cuda.txt"
BENCH_RC=${PIPESTATUS[0]}

echo
echo "================ gpu_exceptions_check summary ================"
echo "new cases (rc=$CASES_RC): $(grep -E '(passed|failed|error)' "$OUTDIR/pytest_raising.txt" | tail -1)"
grep -E '(FAILED|ERROR) ' "$OUTDIR/pytest_raising.txt" | head -10
echo "suite     (rc=$SUITE_RC): $(grep -E '(passed|failed|error)' "$OUTDIR/pytest_cuda.txt" | tail -1)"
grep -E '^(FAILED|ERROR) ' "$OUTDIR/pytest_cuda.txt" | head -10
echo "bench     (rc=$BENCH_RC):"
sed -n '/== bench_cuda summary ==/,$p' "$OUTDIR/bench_cuda.txt" | tail -n +2
echo "outputs in $OUTDIR"
[ "$CASES_RC" -eq 0 ] && [ "$SUITE_RC" -eq 0 ] && [ "$BENCH_RC" -eq 0 ]
