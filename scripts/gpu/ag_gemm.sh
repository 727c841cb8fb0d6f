#!/usr/bin/env bash
# ag-gemm on a GPU machine, for every world size 2, 4, 8 that its GPU count allows:
#   1. correctness of every method at shapes that are not multiples of the block sizes
#      (M/ws, N, K off the 128/256/64 tiles), fp16 and bf16;
#   2. the benchmark table at the issue's shapes (N=3584, K=8192, M=1024/4096/16384), fp16
#      and bf16, with per-program traces of the fused kernel and torch.profiler traces of
#      every method at the largest M (fp16);
#   3. the seed's K-sharded formulation (shard=k): its all_gather_into_tensor baseline must fail
#      its check, all_gather + cat(dim=1) pass, both timed beside the row-sharded baselines;
#   4. the GPU-marked pytest tests.
# Writes $OUT/ag_gemm.tar.gz: bundles (*.bundle.json) and benchmark tables (benchmark_ws*.md),
# ready to unpack into traces/ag-gemm/. Run from the repository root.
set -uo pipefail
source "$(dirname "$0")/common.sh" ag-gemm
REPEAT="${REPEAT:-20}"
for ws in $(world_sizes); do
  echo "== ws=$ws correctness at shapes off the block sizes"
  "$PY" benchmarks/ag_gemm.py --world-size "$ws" --m 264,1000,2056 --n 3000 --k 4000 --dtype fp16,bf16 \
      --providers nccl,torch-fused,ce-chunked,hbm-buffer --repeat 3 --trace off --set chunks=2 --set timeout_s=120 \
      --bundle-dir "$dir" --tag correctness > "$dir/correctness_ws$ws.md" || status=1
  cat "$dir/correctness_ws$ws.md"
  "$PY" benchmarks/ag_gemm.py --world-size "$ws" --m 264,1000 --n 3000 --k 4000 --dtype fp16 \
      --providers hbm-buffer --repeat 3 --trace off --set block_m=64 --set k_tiles_per_flag=4 --set stage_layout=tiles \
      --set fetchers=3 --set timeout_s=90 --bundle-dir "$dir" --tag correctness-knobs > "$dir/correctness_knobs_ws$ws.md" || status=1
  cat "$dir/correctness_knobs_ws$ws.md"
  echo "== ws=$ws the seed's K-sharded formulation"
  "$PY" benchmarks/ag_gemm.py --world-size "$ws" --m 1024,16384 --dtype fp16 --set shard=rows,k \
      --providers nccl,all-gather-cat,all-gather,matmul --repeat "$REPEAT" --trace off --set timeout_s=200 \
      --bundle-dir "$dir" --tag k-shard > "$dir/k_shard_ws$ws.md" || status=1
  cat "$dir/k_shard_ws$ws.md"
  echo "== ws=$ws benchmark"
  "$PY" benchmarks/ag_gemm.py --world-size "$ws" --m 1024,4096,16384 --dtype fp16,bf16 --repeat "$REPEAT" \
      --trace all --set timeout_s=400 --bundle-dir "$dir" --tag bench > "$dir/benchmark_ws$ws.md" || status=1
  cat "$dir/benchmark_ws$ws.md"
done
echo "== pytest (gpu, multigpu)"
[ "${RUN_PYTEST:-1}" = 1 ] && "$PY" -m pytest -q -p no:cacheprovider -m "gpu or multigpu" tests/test_ag_gemm.py 2>&1 | tee "$dir/pytest_gpu.txt" | tail -5
pack ag_gemm
exit $status
