#!/usr/bin/env bash
# One-go GPU check (issues 10, 18, 28): the test legs on CuPy and torch CUDA, plain and tiled attention against torch CUDA,
# and the pooled NumPy path's CPU figures beside them.
#
#   bash benchmarks/gpu_check.sh            # from the repository root; about 5 minutes on an H200
#
# 1. The tests' GPU legs (tests/conftest.py marks them `gpu`: the functional, nn, optimiser, training, gradcheck and
#    torch-parity tests on CuPy arrays and on torch CUDA tensors), each leg run alone, with a summary per leg.
# 2. (CuPy and CUDA torch both there) benchmarks/gpu_bench.py and attention_scaling.py write, for notebook 08:
#      mhattn/data/gpu_check.json                 plain/tiled/torch times at B 32, T 1024 and B 1, T 8192
#      mhattn/data/attention_scaling_cupy.json    forward/backward time against T on CuPy
# 3. (torch there) the pooled NumPy path's CPU figures beside them: benchmarks/bench_threads.py, one round (MHA
#    forward + backward against torch's CPU MultiheadAttention at B1 T2048, B2 T1024, B16 T128; the BLAS kernel and
#    CPU named), printed here and kept in mhattn/data/gpu_check_cpu.txt, with OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset.
# Needs: NumPy 2, pytest, array-api-compat, and CuPy with a CUDA device (cupy-cuda13x or cupy-cuda12x) and/or a CUDA
# build of torch; no nbval, no network. Without any GPU library it stops at once (exit 2), checking and writing
# nothing: it never passes silently. Exit 1 when a leg fails or runs no test; 0 when every leg available passed.
# Time caps 300 + 150 + 60 + 150 s keep it under 11 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}

fail() { echo "gpu_check: $*" >&2; exit 2; }

have_cupy=no have_torch_cuda=no
"$PY" -c "import cupy" 2>/dev/null && have_cupy=missing-device
"$PY" -c "import cupy, sys; sys.exit(0 if cupy.is_available() else 1)" 2>/dev/null && have_cupy=yes
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null && have_torch_cuda=yes
if [ "$have_cupy" != yes ] && [ "$have_torch_cuda" != yes ]; then
  [ "$have_cupy" = no ] && echo "gpu_check: CuPy is not installed (pip install cupy-cuda13x or cupy-cuda12x)" >&2
  [ "$have_cupy" = missing-device ] && echo "gpu_check: CuPy found no CUDA device" >&2
  fail "torch is missing or has no CUDA either; no GPU leg can run, nothing was checked"
fi

declare -A summary
status=0
run_leg() {  # $1: the leg's test id (conftest.py), $2: yes when its library and device are there
  local leg=$1 ok=$2 log
  if [ "$ok" != yes ]; then
    summary[$leg]="not run (library or CUDA device missing)"
    return
  fi
  echo "== tests on the $leg leg =="
  log=$(mktemp)
  timeout 300 "$PY" -m pytest tests -m gpu -k "$leg" -p no:randomly -o addopts="-q -p no:cacheprovider" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]} last
  last=$(grep -E "[0-9]+ (passed|failed|skipped|error)" "$log" | tail -1)
  rm -f "$log"
  summary[$leg]="${last:-no pytest summary} (rc $rc)"
  if [ "$rc" -ne 0 ] || ! grep -q "passed" <<<"$last"; then status=1; fi
}

start=$SECONDS
run_leg cupy "$have_cupy"
run_leg torch-cuda "$have_torch_cuda"
echo "legs: $((SECONDS - start)) s"

if [ "$have_cupy" = yes ] && [ "$have_torch_cuda" = yes ]; then
  echo "== plain and tiled against torch CUDA =="
  if timeout 150 "$PY" benchmarks/gpu_bench.py --device cuda --out mhattn/data/gpu_check.json; then
    summary[gpu_bench]="wrote mhattn/data/gpu_check.json"
  else
    summary[gpu_bench]="FAILED (rc $?)"; status=1
  fi
  echo "== attention cost against T on CuPy =="
  if timeout 60 "$PY" benchmarks/attention_scaling.py --backend cupy --lengths 64 128 256 512 1024 2048 4096 \
    --out mhattn/data/attention_scaling_cupy.json; then
    summary[attention_scaling]="wrote mhattn/data/attention_scaling_cupy.json"
  else
    summary[attention_scaling]="FAILED (rc $?)"; status=1
  fi
else
  summary[benchmarks]="not run (they need CuPy and CUDA torch both)"
fi

if "$PY" -c "import torch, threadpoolctl" 2>/dev/null; then
  echo "== the pooled NumPy path on this machine's CPU =="
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE timeout 150 "$PY" benchmarks/bench_threads.py --rounds 1 --reps 3 \
    --exercise-calls 100 | tee mhattn/data/gpu_check_cpu.txt
  rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 0 ]; then
    summary[cpu_pooled]="wrote mhattn/data/gpu_check_cpu.txt"
  else
    summary[cpu_pooled]="FAILED (rc $rc)"; status=1
  fi
else
  summary[cpu_pooled]="not run (it needs torch and threadpoolctl)"
fi

echo
echo "== gpu_check summary ($SECONDS s) =="
for key in cupy torch-cuda gpu_bench attention_scaling benchmarks cpu_pooled; do
  [ -n "${summary[$key]+set}" ] && printf '  %-18s %s\n' "$key" "${summary[$key]}"
done
[ "$status" -eq 0 ] && echo "gpu_check: passed" || echo "gpu_check: FAILED (see above)" >&2
exit "$status"
