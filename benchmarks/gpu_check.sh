#!/usr/bin/env bash
# One-go GPU check (issue 10): the test suite on CuPy, then plain and tiled attention against torch CUDA.
#
#   bash benchmarks/gpu_check.sh            # from the repository root; about 5 minutes on an H200
#
# Needs: CuPy with a CUDA device (cupy-cuda13x or cupy-cuda12x), a CUDA build of torch,
# NumPy 2, pytest; no nbval, no network. Writes (for notebook 08):
#   mhattn/data/gpu_check.json                 plain/tiled/torch times at B 32, T 1024 and B 1, T 8192
#   mhattn/data/attention_scaling_cupy.json    forward/backward time against T on CuPy
# Time caps 255 + 150 + 60 s keep it under 8 minutes. Stops with a message (exit 2) when CuPy, a device or CUDA torch is missing: it never passes silently.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}

fail() { echo "gpu_check: $*" >&2; exit 2; }

"$PY" -c "import cupy" 2>/dev/null || fail "CuPy is not installed (pip install cupy-cuda13x or cupy-cuda12x); nothing was checked"
"$PY" -c "import cupy, sys; sys.exit(0 if cupy.is_available() else 1)" || fail "CuPy found no CUDA device; nothing was checked"
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null \
  || fail "torch is missing or has no CUDA (install a CUDA build of torch); nothing was checked"

echo "== 1/3 test suite on CuPy (no notebooks) =="
start=$SECONDS
MHATTN_BACKEND=cupy timeout 255 "$PY" -m pytest tests -o addopts="-q -p no:cacheprovider" || fail "tests failed on CuPy (rc $?)"
echo "tests: $((SECONDS - start)) s"

echo "== 2/3 plain and tiled against torch CUDA =="
timeout 150 "$PY" benchmarks/gpu_bench.py --device cuda --out mhattn/data/gpu_check.json || fail "gpu_bench.py failed (rc $?)"

echo "== 3/3 attention cost against T on CuPy =="
timeout 60 "$PY" benchmarks/attention_scaling.py --backend cupy --lengths 64 128 256 512 1024 2048 4096 \
  --out mhattn/data/attention_scaling_cupy.json || fail "attention_scaling.py failed (rc $?)"
echo "gpu_check: done in $SECONDS s; records in mhattn/data/gpu_check.json and mhattn/data/attention_scaling_cupy.json"
