#!/usr/bin/env bash
# The CUDA backend's check on a GPU machine, in one go:
#   1. the environment (GPU, library versions);
#   2. the CUDA test suite for real: python3 -m pytest tests/cuda -x -q (the cases under
#      tests/cuda/cases run on the GPU; the simulator/fake-driver subprocess runs are skipped
#      there because a GPU is present);
#   3. the CUDA benchmark (benchmarks/bench_cuda.py);
#   4. a compact summary.
# Run from anywhere: bash benchmarks/gpu_check.sh. No network, no install: numba_cube is used
# from this checkout through PYTHONPATH. Outputs are copied to $OUT when it is set.
# GPU_CHECK_PYTEST_ARGS overrides "-x -q" (e.g. "-q" to see every failure in one run).
# Time limits (tests 300 s, benchmark 270 s) keep the whole run under a 10-minute device slot.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
OUTDIR="${OUT:-$(mktemp -d)}"
PY="${PYTHON:-python3}"

echo "== environment =="
nvidia-smi -L 2>/dev/null || echo "nvidia-smi: not available"
"$PY" - <<'PYEOF'
import importlib, sys
print("python", sys.version.split()[0])
for name in ("numpy", "numba", "numba_cuda", "cuda.bindings", "cuda.core", "cupy", "torch"):
    try:
        mod = importlib.import_module(name)
        print(f"{name:14s}", getattr(mod, "__version__", "?"))
    except Exception as exc:
        print(f"{name:14s} not importable ({type(exc).__name__})")
from numba_cube.backends.cuda.driver import probe
print("cuda backend  ", "available" if probe.available() is None else probe.available(),
      f"({probe.device_count()} device(s))")
PYEOF

echo
echo "== tests: $PY -m pytest tests/cuda ${GPU_CHECK_PYTEST_ARGS:--x -q} =="
timeout 300 "$PY" -m pytest tests/cuda ${GPU_CHECK_PYTEST_ARGS:--x -q} -p no:cacheprovider -rs 2>&1 | tee "$OUTDIR/pytest_cuda.txt"
TEST_RC=${PIPESTATUS[0]}

echo
echo "== benchmark: $PY benchmarks/bench_cuda.py =="
OUT="$OUTDIR" timeout 270 "$PY" benchmarks/bench_cuda.py 2>&1 | tee "$OUTDIR/bench_cuda.txt"
BENCH_RC=${PIPESTATUS[0]}

echo
echo "================ gpu_check summary ================"
echo "tests  (rc=$TEST_RC): $(grep -E '(passed|failed|error)' "$OUTDIR/pytest_cuda.txt" | tail -1)"
grep -E '^(FAILED|ERROR) ' "$OUTDIR/pytest_cuda.txt" | head -10
echo "bench  (rc=$BENCH_RC):"
sed -n '/== bench_cuda summary ==/,$p' "$OUTDIR/bench_cuda.txt" | tail -n +2
echo "outputs in $OUTDIR"
[ "$TEST_RC" -eq 0 ] && [ "$BENCH_RC" -eq 0 ]
