#!/usr/bin/env bash
# The conformance run on a GPU machine: numba-cuda's cudapy tests, plain numba-cuda as the
# reference, every launch routed through numba_cube's CUDA client (run_cudapy.py --backend cuda).
# Run from the checkout: bash tests/conformance/gpu_run.sh [run_cudapy.py arguments...]
# Uses numba_cube from this checkout (PYTHONPATH); writes the table and the JSON to $OUT if set.
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
OUTDIR="${OUT:-$(mktemp -d)}"
PY="${PYTHON:-python3}"
nvidia-smi -L 2>/dev/null || echo "nvidia-smi: not available"
"$PY" tests/conformance/run_cudapy.py --backend cuda --json "$OUTDIR/conformance_cuda.json" \
    --workdir "${CONFORMANCE_WORKDIR:-/tmp/cudapy-gpu}" "$@" 2>&1 | tee "$OUTDIR/conformance_cuda.txt"
