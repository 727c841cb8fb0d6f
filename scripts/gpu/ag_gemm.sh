#!/usr/bin/env bash
# ag-gemm on a GPU machine, for every world size 2, 4, 8 that its GPU count allows; STAGES
# picks among (default: all, in this order):
#   correctness  every method at shapes that are not multiples of the block sizes (M/ws, N, K
#                off the 128/256/64 tiles), fp16 and bf16, and the fused kernel with other knobs;
#   k-shard      the seed's K-sharded formulation (shard=k): its all_gather_into_tensor baseline
#                must fail its check, all_gather + cat(dim=1) pass, both timed beside the
#                row-sharded baselines;
#   bench        the benchmark table at the issue's shapes (N=3584, K=8192, M=1024/4096/16384),
#                fp16 and bf16, every provider in the same run, with the seed review's
#                experiments across the ranks (EXPERIMENTS, default barrier,layout: the fused
#                kernel without the barrier before its flag release, TRIALS checked launches from
#                NaN-filled staging with and without it, and tile-contiguous staging, timed beside
#                the others), every rank's per-program traces of the fused kernel and every rank's
#                torch.profiler traces at the largest M (fp16);
#   pytest       the GPU-marked tests of the study (PYTEST_FILES adds others, e.g. mc2-split's).
# After each stage $OUT/$PACK.tar.gz (default ag_gemm) holds what is done so far (a time-out keeps it): bundles
# (*.bundle.json), printed tables (*.md), pytest output, ready to unpack into traces/ag-gemm/.
# Run from the repository root.
set -uo pipefail
source "$(dirname "$0")/common.sh" ag-gemm
REPEAT="${REPEAT:-20}"
TRIALS="${TRIALS:-500}"
EXPERIMENTS="${EXPERIMENTS:-barrier,layout}"
STAGES="${STAGES:-correctness k-shard bench pytest}"
has() { [[ " $STAGES " == *" $1 "* ]]; }
for ws in $(world_sizes); do
  if has correctness; then
    echo "== ws=$ws correctness at shapes off the block sizes"
    "$PY" benchmarks/ag_gemm.py --world-size "$ws" --m 264,1000,2056 --n 3000 --k 4000 --dtype fp16,bf16 \
        --providers nccl,torch-fused,ce-chunked,hbm-buffer --repeat 3 --trace off --set chunks=2 --set timeout_s=120 \
        --bundle-dir "$dir" --tag correctness > "$dir/correctness_ws$ws.md" || status=1
    cat "$dir/correctness_ws$ws.md"
    "$PY" benchmarks/ag_gemm.py --world-size "$ws" --m 264,1000 --n 3000 --k 4000 --dtype fp16 \
        --providers hbm-buffer --repeat 3 --trace off --set block_m=64 --set k_tiles_per_flag=4 --set stage_layout=tiles \
        --set fetchers=3 --set timeout_s=90 --bundle-dir "$dir" --tag correctness-knobs > "$dir/correctness_knobs_ws$ws.md" || status=1
    cat "$dir/correctness_knobs_ws$ws.md"
    pack "${PACK:-ag_gemm}" > /dev/null
  fi
  if has k-shard; then
    echo "== ws=$ws the seed's K-sharded formulation"
    "$PY" benchmarks/ag_gemm.py --world-size "$ws" --m 1024,16384 --dtype fp16 --set shard=rows,k \
        --providers nccl,all-gather-cat,all-gather,matmul --repeat "$REPEAT" --trace off --set timeout_s=200 \
        --bundle-dir "$dir" --tag k-shard > "$dir/k_shard_ws$ws.md" || status=1
    cat "$dir/k_shard_ws$ws.md"
    pack "${PACK:-ag_gemm}" > /dev/null
  fi
  if has bench; then
    echo "== ws=$ws benchmark, with the review's experiments ($EXPERIMENTS, $TRIALS checked launches)"
    "$PY" benchmarks/ag_gemm.py --world-size "$ws" --m 1024,4096,16384 --dtype fp16,bf16 --repeat "$REPEAT" \
        --trace all --set experiments="$EXPERIMENTS" --set trials="$TRIALS" --set timeout_s="${BENCH_TIMEOUT:-400}" \
        --bundle-dir "$dir" --tag bench > "$dir/benchmark_ws$ws.md" || status=1
    cat "$dir/benchmark_ws$ws.md"
    pack "${PACK:-ag_gemm}" > /dev/null
  fi
done
if has pytest; then
  echo "== pytest (gpu, multigpu)"
  timeout "${PYTEST_TIMEOUT:-300}" "$PY" -m pytest -q -p no:cacheprovider -m "gpu or multigpu" tests/studies/ag_gemm/test_study.py \
      ${PYTEST_FILES:-} 2>&1 | tee "$dir/pytest_gpu.txt" | tail -5
fi
pack "${PACK:-ag_gemm}"
exit $status
