#!/usr/bin/env bash
# Issue 35's 4-GPU batch: two device calls of at most 9 minutes each on an nvidia-h100-x4 or
# nvidia-h200-x4 machine, each writing ONE archive, $OUT/ws4_batch_<call>.tar.gz (bundles with
# their environment and per-rank traces, printed tables, pytest output, env.txt, timing.txt),
# repacked after every stage, so a stage cut by its time box keeps what the others finished.
#
#   bash scripts/gpu/ws4_batch.sh 1   # ag-gemm benchmark at 4 and 2 ranks (fp16, bf16; M = 1024,
#                                     # 4096, 16384; N=3584, K=8192; every provider, the bound's
#                                     # halves, per-rank traces), the K-sharded formulation at 4
#                                     # ranks, cpu-reduction at 1-32 workers with phases at 32
#   bash scripts/gpu/ws4_batch.sh 2   # the review's experiments at 4 ranks (TRIALS checked launches
#                                     # per shape and barrier setting), mc2-split at 4 ranks REPEATS
#                                     # separate runs, pytest -m "gpu or multigpu" at 4 ranks
#   bash scripts/gpu/ws4_batch.sh g1  # issue 47 on ONE GPU: NCCL's own log of the baseline's calls and
#                                     # the collective probe at world size 1, the fused kernel against
#                                     # cuBLAS at emulated world sizes 2 and 4 (fp16 and bf16, one bundle
#                                     # each), the M=1024 sweep (plan small-m), the GPU tests of the probe
#                                     # and of the kernel mode
#   bash scripts/gpu/ws4_batch.sh x8  # issue 47 on an 8-GPU host (nvidia-h100-x8 / nvidia-h200-x8): the
#                                     # seed's table at 8 and 4 ranks with the bound (ag-gemm benchmark,
#                                     # every provider), mc2-split at 8 ranks (REPEATS_X8 runs) with the
#                                     # collective probe, M=1024 with k-group-major
#                                     # fetch and per-group waits at 8 and 4 ranks, pytest at 8 ranks
#   bash scripts/gpu/ws4_batch.sh x4  # issue 47 on a 4-GPU host: the seed's table at 4 ranks with the
#                                     # bound, M=1024 with k-group-major fetch at 4 ranks, mc2-split at 4
#                                     # ranks (REPEATS_X4 runs, each with its collective probe), pytest
#   bash scripts/gpu/ws4_batch.sh x2  # what a 2-GPU host (nvidia-h100-x2, 32 CPUs) allows while no
#                                     # 4-GPU kind is lent: the ag-gemm benchmark at 2 ranks,
#                                     # cpu-reduction at 1-32 workers, mc2-split at 2 ranks REPEATS
#                                     # runs, pytest -m "gpu or multigpu" at 2 ranks
#
# Each stage reuses the study scripts (ag_gemm.sh, mc2_split.sh, cpu_reduction.sh) or the
# benchmarks with variables, runs under its own time box (BOX_<stage> seconds) inside the call's
# BUDGET_S (default 500: the call's limit less packing), and prints one timing line. Run from the
# repository root; cpu-reduction needs the IREE runtime wheels in .whl/ and the modules
# precompiled into .workbench/cache/iree/ (docs/gpu.md says how), else that stage says so and
# is skipped. TRITON_CACHE_DIR (default /tmp/triton_ws4) is kept in the archive's sibling
# triton_cache.tar.gz, so a second call can carry it and skip recompiling.
set -uo pipefail
CALL="${1:-}"
case "$CALL" in
  1|2|x2|x4|x8|g1) source "$(dirname "$0")/common.sh" "ws4-batch-$CALL" ;;
  _*) dir="$WS4_DIR" ;;  # one of this script's own steps (below), run under a stage's time box
  *) echo "usage: $0 1|2|x2|x4|x8|g1" >&2; exit 2 ;;
esac
BUDGET_S="${BUDGET_S:-500}"
TRIALS="${TRIALS:-3700}"  # 0 of 3,700 failed: a two-sided 95% upper bound of 0.10% per shape and setting
REPEATS="${REPEATS:-5}"
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-/tmp/triton_ws4}"

# stage NAME BOX MIN CMD...: run CMD (its output in $dir/NAME.log, its tail printed) in at most
# BOX seconds and what is left of the budget; skipped when under MIN seconds are left
stage() {
  local name=$1 box=$2 min=$3 rc s left
  shift 3
  left=$((BUDGET_S - (SECONDS - t0)))
  if [ "$left" -lt "$min" ]; then
    echo "== stage $name: SKIPPED, $left s left of $BUDGET_S (needs $min)" | tee -a "$dir/timing.txt"
    return
  fi
  [ "$box" -gt "$((left - 10))" ] && box=$((left - 10))
  echo "== stage $name: box $box s"
  s=$SECONDS
  timeout -k 20 "$box" "$@" > "$dir/$name.log" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] && status=1
  tail -n "${TAIL:-25}" "$dir/$name.log"
  echo "== stage $name: rc=$rc$([ "$rc" = 124 ] && echo ' (time box)'), $((SECONDS - s)) s of box $box s," \
       "$((SECONDS - t0)) s since start" | tee -a "$dir/timing.txt"
  repack
}

# the sub-scripts' archives (in $PARTS) unpacked beside this call's own files, all packed as one
repack() {
  local f
  for f in "$PARTS"/*.tar.gz; do
    [ -e "$f" ] && tar -C "$dir" -xzf "$f"
  done
  pack "ws4_batch_$CALL" > /dev/null
  [ -d "$TRITON_CACHE_DIR" ] && tar -C "$(dirname "$TRITON_CACHE_DIR")" -czf "$OUT/triton_cache.tar.gz" \
      "$(basename "$TRITON_CACHE_DIR")" 2>/dev/null
  true
}

# --- the script's own steps (run as `bash ws4_batch.sh _<step>` so `timeout` can box them) ---
_env() {
  nvidia-smi
  nvidia-smi topo -m
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv
  lscpu | head -20
  free -g
  uptime
  "$PY" -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl",
torch.cuda.nccl.version(), "triton", triton.__version__, "gpus", torch.cuda.device_count())'
  "$PY" -c 'from kernels.triton import copyengine as c; print("copy and flag calls:", "cuda-python driver" if c._driver() else "PyTorch",
"| flags:", c.FlagWriter(True).how)'
  env | grep -E '^(NCCL_|TORCH_SYMM|NVSHMEM_|CUDA_)' | sort
}

_cpu() {
  if ! ls .whl/iree_base_runtime-*.whl > /dev/null 2>&1 || [ ! -d .workbench/cache/iree ]; then
    echo "cpu-reduction skipped: needs .whl/iree_base_runtime-*.whl (and zstandard) and .workbench/cache/iree"
    return 1
  fi
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}" || return 1
  OUT="$PARTS" WORKERS=1,2,4,8,16,32 PHASE_WORKERS=32 SHAPE_WORKERS=1,8,16,32 PACK=cpu_reduction \
      bash scripts/gpu/cpu_reduction.sh
}

_review() {
  # the review's experiments alone (fp16, the kernel and the bound's halves beside the baseline):
  # the barrier before the flag release off, TRIALS checked launches per shape with and without it
  # from NaN-filled staging, and tile-contiguous staging, timed beside the default
  "$PY" benchmarks/ag_gemm.py --world-size 4 --m 1024,4096,16384 --dtype fp16 \
      --providers nccl,hbm-buffer,hbm-buffer-ce,all-gather,matmul --repeat 15 --trace programs \
      --set experiments=barrier,layout --set trials="$TRIALS" --set timeout_s=$((BOX_review - 15)) \
      --bundle-dir "$dir" --tag review-ws4 > "$dir/review_ws4.md"
  local rc=$?
  cat "$dir/review_ws4.md"
  return $rc
}

_nccl_log() {
  # NCCL's own debug output of the baselines' calls at world size 1 (the raw log the probe parses,
  # kept as a test sample), then the probe itself through the launcher
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING NCCL_DEBUG_FILE="$dir/nccl_ws1.%h.%p.log" \
  MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 "$PY" - <<'PY'
import torch, torch.distributed as dist
torch.cuda.set_device(0)
dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
for numel in (4096 * 8192, 1024 * 8192):  # mc2-split's full all-reduce; ag-gemm's all-gather input at M=1024
    x = torch.zeros(numel, dtype=torch.float16, device="cuda")
    dist.all_reduce(x)
    out = torch.empty_like(x)
    dist.all_gather_into_tensor(out, x)
torch.cuda.synchronize()
dist.destroy_process_group()
print("nccl", torch.cuda.nccl.version())
PY
  "$PY" - <<'PY' > "$dir/collective_probe_ws1.json"
import json
from workbench.running import launcher
from workbench.seam.study import RunContext
print(json.dumps(launcher.probe_collectives([{"op": "all_reduce", "numel": 4096 * 8192, "dtype": "float16"},
                                             {"op": "all_gather", "numel": 1024 * 8192, "dtype": "float16"}], 1,
                                            RunContext()), indent=1))
PY
  cat "$dir/collective_probe_ws1.json"
}

_kmajor() {  # _kmajor WS: M=1024 with k-group-major fetch rows computed per k-group, beside the default
  # kernel and the baseline in one run per setting (the committed 4-rank traces: remote tiles wait
  # for their whole row, about 38 us of a 127 us kernel)
  local rc=0
  "$PY" benchmarks/ag_gemm.py --world-size "$1" --m 1024 --dtype fp16 --providers nccl,hbm-buffer,all-gather,matmul \
      --repeat 15 --trace programs --set wait_per_group=true --set fetch_order=k \
      --bundle-dir "$dir" --tag "m1024-kmajor-ws$1" > "$dir/m1024_kmajor_ws$1.md" || rc=$?
  cat "$dir/m1024_kmajor_ws$1.md"
  return $rc
}

_kernel() {  # _kernel DTYPE: the fused kernel against cuBLAS on one GPU, one bundle per dtype
  local card
  card="$("$PY" -c 'import torch; print(torch.cuda.get_device_name(0).split()[1].lower())')"
  "$PY" benchmarks/ag_gemm_kernel.py --m 1024,4096,16384 --dtype "$1" --emulate 2,4 --repeat "${REPEAT:-20}" \
      --trace off --bundle-dir "$dir" --tag "kernel-$card-i47-$1" > "$dir/kernel_${card}_i47_$1.md"
  local rc=$?
  cat "$dir/kernel_${card}_i47_$1.md"
  return $rc
}

if [[ "$CALL" == _* ]]; then
  "$CALL" "${@:2}"
  exit $?
fi
export PY WS4_DIR="$dir" PARTS="$(mktemp -d)" TRIALS BOX_review="${BOX_review:-170}"
t0=$SECONDS
status=0
stage env 40 30 bash "$0" _env
# the stages that more than one call runs: bench_ws2; mc2 WS RUNS TIMEOUT MIN; gpu_tests NAME MIN
bench_ws2() {
  stage bench-ws2 "$BOX_bench2" 100 env OUT="$PARTS" WORLD_SIZES=2 STAGES=bench REPEAT="${REPEAT:-15}" \
      EXPERIMENTS=breakdown BENCH_TIMEOUT=$((BOX_bench2 - 15)) PACK=ag_gemm_ws2 bash scripts/gpu/ag_gemm.sh
}
# REPEATS separate runs (the spread between runs is the finding), the collectives that decided
# the best split at 4 ranks before (triton-pull, triton-persistent) beside NCCL
mc2() {
  stage "mc2-ws$1" "$BOX_mc2" "$4" env OUT="$PARTS" WORLD_SIZES="$1" REPEATS="$2" REPS="${REPS:-15}" \
      PROVIDERS="${PROVIDERS:-default,triton-pull,triton-persistent}" CARVEOUT="${CARVEOUT:-0,16,24}" \
      RUN_TIMEOUT="${RUN_TIMEOUT:-$3}" RUN_PYTEST=0 PACK=mc2_split bash scripts/gpu/mc2_split.sh
}
gpu_tests() {
  stage pytest-gpu "$BOX_pytest" "$2" "$PY" -m pytest -q -p no:cacheprovider -m "gpu or multigpu" \
      tests/studies tests/workbench/test_harness_gpu.py
  cp "$dir/pytest-gpu.log" "$dir/$1" 2>/dev/null
}
if [ "$CALL" = 1 ]; then
  BOX_bench4="${BOX_bench4:-200}" BOX_bench2="${BOX_bench2:-150}" BOX_kshard="${BOX_kshard:-60}"
  BOX_cpu="${BOX_cpu:-100}"
  # every provider, the bound's halves, per-rank traces (torch.profiler at the largest M, the
  # fused kernels' programs at every shape); the review's experiments are the second call's
  stage bench-ws4 "$BOX_bench4" 120 env OUT="$PARTS" WORLD_SIZES=4 STAGES=bench REPEAT="${REPEAT:-15}" \
      EXPERIMENTS=breakdown BENCH_TIMEOUT=$((BOX_bench4 - 15)) PACK=ag_gemm_ws4 bash scripts/gpu/ag_gemm.sh
  bench_ws2
  stage k-shard-ws4 "$BOX_kshard" 40 env OUT="$PARTS" WORLD_SIZES=4 STAGES=k-shard REPEAT="${REPEAT:-15}" \
      PACK=ag_gemm_kshard bash scripts/gpu/ag_gemm.sh
  stage cpu-reduction "$BOX_cpu" 60 bash "$0" _cpu
elif [ "$CALL" = g1 ]; then
  stage nccl-log 90 40 bash "$0" _nccl_log
  stage kernel-fp16 "${BOX_kernel:-170}" 100 bash "$0" _kernel fp16
  stage sweep-small-m "${BOX_sweep:-130}" 80 "$PY" scripts/gpu/ag_gemm_kernel_sweep.py --plan small-m --m 1024,4096 \
      --dtype fp16 --repeat 15 --out "$dir/kernel-sweep-i47"
  stage pytest-gpu "${BOX_pytest:-90}" 60 "$PY" -m pytest -q -p no:cacheprovider -m gpu \
      tests/workbench/test_collectives.py tests/studies/ag_gemm
  stage kernel-bf16 "${BOX_kernel:-170}" 100 bash "$0" _kernel bf16
elif [ "$CALL" = x8 ]; then
  # the seed's rows 4 and 8 with the bound (timing_ws4_batch_1: 69 s for the 4-rank benchmark), then
  # mc2-split at 8 and 4 ranks for the planner's validation on a new host
  BOX_bench4="${BOX_bench4:-200}" BOX_mc2="${BOX_mc2:-150}" BOX_pytest="${BOX_pytest:-120}"
  stage bench-ws8 "${BOX_bench8:-220}" 120 env OUT="$PARTS" WORLD_SIZES=8 STAGES=bench REPEAT="${REPEAT:-15}" \
      EXPERIMENTS=breakdown BENCH_TIMEOUT=$((${BOX_bench8:-220} - 15)) PACK=ag_gemm_ws8 bash scripts/gpu/ag_gemm.sh
  stage bench-ws4 "$BOX_bench4" 120 env OUT="$PARTS" WORLD_SIZES=4 STAGES=bench REPEAT="${REPEAT:-15}" \
      EXPERIMENTS=breakdown BENCH_TIMEOUT=$((BOX_bench4 - 15)) PACK=ag_gemm_ws4 bash scripts/gpu/ag_gemm.sh
  stage m1024-kmajor-ws8 "${BOX_kmajor:-60}" 40 bash "$0" _kmajor 8
  mc2 8 "${REPEATS_X8:-2}" 90 100
  stage m1024-kmajor-ws4 "${BOX_kmajor:-60}" 40 bash "$0" _kmajor 4
  gpu_tests pytest_gpu_x8.txt 60
elif [ "$CALL" = x4 ]; then
  BOX_bench4="${BOX_bench4:-200}" BOX_mc2="${BOX_mc2:-200}" BOX_pytest="${BOX_pytest:-120}"
  stage bench-ws4 "$BOX_bench4" 120 env OUT="$PARTS" WORLD_SIZES=4 STAGES=bench REPEAT="${REPEAT:-15}" \
      EXPERIMENTS=breakdown BENCH_TIMEOUT=$((BOX_bench4 - 15)) PACK=ag_gemm_ws4 bash scripts/gpu/ag_gemm.sh
  stage m1024-kmajor-ws4 "${BOX_kmajor:-60}" 40 bash "$0" _kmajor 4
  mc2 4 "${REPEATS_X4:-3}" 90 100
  gpu_tests pytest_gpu_x4_i47.txt 60
elif [ "$CALL" = x2 ]; then
  BOX_bench2="${BOX_bench2:-150}" BOX_cpu="${BOX_cpu:-100}" BOX_mc2="${BOX_mc2:-120}" BOX_pytest="${BOX_pytest:-90}"
  bench_ws2
  stage cpu-reduction "$BOX_cpu" 60 bash "$0" _cpu
  mc2 2 "${REPEATS_X2:-3}" 35 80
  gpu_tests pytest_gpu_x2.txt 60
else
  BOX_mc2="${BOX_mc2:-240}" BOX_pytest="${BOX_pytest:-150}"
  stage review-ws4 "$BOX_review" 100 bash "$0" _review
  mc2 4 "$REPEATS" 90 120
  gpu_tests pytest_gpu_x4.txt 90
fi
echo "== call $CALL: $((SECONDS - t0)) s of $BUDGET_S" | tee -a "$dir/timing.txt"
repack
pack "ws4_batch_$CALL"
exit $status
