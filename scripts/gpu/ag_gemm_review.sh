#!/usr/bin/env bash
# The seed review's experiments on ONE GPU (an H100 or H200), at an emulated world size 2
# (studies/ag_gemm/kernelbench.py): the barrier before the flag release on and off (checked
# launches from a NaN-filled staging buffer, TRIALS per shape and setting; time with over
# without) and tile-contiguous against row-major staging, fp16, M=1024/4096/16384,
# N=3584, K=8192. Then the kernel-mode GPU test (the barrier knob compiles and checks).
# Writes $OUT/ag_gemm_review.tar.gz: the bundle and its printed table, for traces/ag-gemm/.
set -uo pipefail
source "$(dirname "$0")/common.sh" ag-gemm
gpu="$("$PY" -c 'import torch; print(torch.cuda.get_device_name(0).split()[1].lower())')"
timeout "${BENCH_TIMEOUT:-300}" "$PY" benchmarks/ag_gemm_kernel.py --m "${M:-1024,4096,16384}" --dtype "${DTYPE:-fp16}" --emulate 2 \
    --repeat "${REPEAT:-30}" --trace off --set experiments=barrier,layout --set trials="${TRIALS:-200}" \
    --bundle-dir "$dir" --tag "review-$gpu${TAG:-}" > "$dir/review_$gpu${TAG:-}.md" || status=1
cat "$dir/review_$gpu${TAG:-}.md"
if [ "${RUN_PYTEST:-1}" = 1 ]; then
  timeout "${PYTEST_TIMEOUT:-200}" "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/studies/ag_gemm/test_study.py 2>&1 \
      | tee "$dir/pytest_gpu_review_$gpu.txt" | tail -5
fi
pack ag_gemm_review
exit $status
