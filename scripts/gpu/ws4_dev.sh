#!/usr/bin/env bash
# Issue 35's one-GPU development call (an H100 or H200): the checks and timings that need a GPU
# but no peers, in one command. Stages (STAGES, default all, in this order):
#   env      GPU, driver, torch/triton, which copy and flag calls exist (cuda-python driver calls
#            or PyTorch, and its cuStreamWriteValue32);
#   hang     mc2-split's triton-persistent cycle forced on one GPU (every SM held by the
#            optimistic launch, cuBLAS matmuls queued behind it): the fixed two-launch protocol,
#            and, where OLD_ALLREDUCE names the kernel file before the fix, the old one-launch
#            protocol with its poll limit cut to 2^22 (a deadlock only the limit breaks);
#   kernel   the ag-gemm kernel on one GPU (benchmarks/ag_gemm_kernel.py): cuBLAS, the kernel
#            at world size 1, its GEMM path, the whole kernel at emulated world sizes 2 and 4
#            with SM fetch and with copy-engine fetch, and the copies alone (the bound), every
#            output checked before its time counts;
#   pytest   the GPU-marked tests of the two studies' new modules.
# TRITON_CACHE_DIR is packed into $OUT (triton_cache.tar.gz) so a next call can carry it.
set -uo pipefail
source "$(dirname "$0")/common.sh" ag-gemm
STAGES="${STAGES:-env hang kernel pytest}"
has() { [[ " $STAGES " == *" $1 "* ]]; }
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-/tmp/triton_cache}"
t0=$SECONDS
stage_done() { echo "== stage $1: $((SECONDS - t0)) s since start"; }
if has env; then
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv | tee "$dir/env.txt"
  "$PY" - <<'PY' 2>&1 | tee -a "$dir/env.txt"
import torch, triton
from kernels.triton import copyengine as ce
print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)
print("copy and flag calls:", "cuda-python driver" if ce._driver() else "PyTorch", "| flags:", ce.FlagWriter(True).how)
PY
  stage_done env
fi
if has hang; then
  "$PY" - <<'PY' 2>&1 | tee "$dir/hang.txt"
import json
from studies.mc2_split.emulate import starved_persistent
print("fixed protocol:", json.dumps(starved_persistent(limit_s=60)))
PY
  if [ -n "${OLD_ALLREDUCE:-}" ]; then
    "$PY" "$OLD_ALLREDUCE" 2>&1 | tee -a "$dir/hang.txt"
  fi
  stage_done hang
fi
if has kernel; then
  timeout "${KERNEL_TIMEOUT:-330}" "$PY" benchmarks/ag_gemm_kernel.py --m "${M:-1024,4096,16384}" --dtype "${DTYPE:-fp16}" \
      --emulate "${EMULATE:-2,4}" --repeat "${REPEAT:-10}" --trace off ${KERNEL_SETS:-} \
      --bundle-dir "$dir" --tag "kernel-dev" > "$dir/kernel_dev.md" 2>"$dir/kernel_dev.err"
  echo "exit $?"; cat "$dir/kernel_dev.md"; tail -5 "$dir/kernel_dev.err"
  stage_done kernel
fi
if has pytest; then
  timeout "${PYTEST_TIMEOUT:-120}" "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/studies 2>&1 \
      | tee "$dir/pytest_gpu_dev.txt" | tail -5
  stage_done pytest
fi
tar -C "$(dirname "$TRITON_CACHE_DIR")" -czf "$OUT/triton_cache.tar.gz" "$(basename "$TRITON_CACHE_DIR")" 2>/dev/null
pack ws4_dev
