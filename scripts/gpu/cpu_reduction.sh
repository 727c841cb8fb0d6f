#!/usr/bin/env bash
# cpu-reduction on a GPU machine's many-core host (the study needs no GPU, only cores). The
# host has Python and torch but neither IREE's compiler nor network, so the work is split:
#
#   here, with iree-base-compiler:   PYTHON=.venv/bin/python scripts/gpu/cpu_reduction.sh precompile
#       compiles every program of the runs below for each of TARGET_CPUS (default x86-64-v4,
#       x86-64-v3) into .workbench/cache/iree/, to travel with the checkout;
#   there, with the iree-base-runtime (and zstandard) wheels installed:  scripts/gpu/cpu_reduction.sh
#       reads the host's CPU model and flags first, picks x86-64-v4 when it has AVX-512
#       (F/BW/CD/DQ/VL), else x86-64-v3 (AVX2), and runs:
#         many-core         grid, sizes, grain, alloc, forkjoin at workers 1, 2, 4, 8, 16
#                           (no split, c=2, the aligned c=8, c=16; torch at the same thread counts)
#         many-core-phases  ireeperf + Tracy profiles of c=2 and the aligned c=8 at 8 and 16 workers
#                           (Tracy trimmed to 3 warm-up + 12 iterations)
#         seed-c8-shapes    c=8 as aligned / partial-tile (the seed's 9-shard shape) / even, at 1, 8, 16
#       then packs $OUT/cpu_reduction.tar.gz: bundles ready to unpack into traces/cpu-reduction/.
# Run from the repository root. The device README's wheel recipe gives the two wheels (cp312).
set -uo pipefail
source "$(dirname "$0")/common.sh" cpu-reduction
TARGET_CPUS="${TARGET_CPUS:-x86-64-v4 x86-64-v3}"
# WORKERS / PHASE_WORKERS / SHAPE_WORKERS: the worker counts of the three runs (defaults: the
# 16-core runs'; a 64-CPU host: WORKERS=1,2,4,8,16,32 PHASE_WORKERS=32 SHAPE_WORKERS=1,8,16,32)
RUNS=(
  "many-core|--preset many-core${WORKERS:+ --set workers=$WORKERS}"
  "many-core-phases|--preset many-core-phases${PHASE_WORKERS:+ --set workers=$PHASE_WORKERS --set profile_workers=$PHASE_WORKERS}"
  "seed-c8-shapes|--set experiments=grid --set chunks=8 --set split=aligned,partial-tile,even --set providers=iree-bench --set workers=${SHAPE_WORKERS:-1,8,16}"
)

if [ "${1:-}" = precompile ]; then
  for t in $TARGET_CPUS; do
    for r in "${RUNS[@]}"; do
      # shellcheck disable=SC2086
      "$PY" -m studies.cpu_reduction.precompile ${r#*|} --set "target_cpu=$t" || exit 1
    done
  done
  exit 0
fi

model="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2-) "
target=x86-64-v4
for f in avx512f avx512bw avx512cd avx512dq avx512vl; do
  case "$flags" in *" $f "*) ;; *) target=x86-64-v3 ;; esac
done
cores="$(nproc)"
echo "== host: $model, $cores CPUs; AVX-512 flags: $(echo "$flags" | tr ' ' '\n' | grep -c '^avx512'); target_cpu=$target"
echo "host: $model, $cores CPUs, target_cpu=$target" > "$dir/host.txt"
echo "$flags" >> "$dir/host.txt"

status=0
for r in "${RUNS[@]}"; do
  name="${r%%|*}"
  echo "== cpu-reduction $name: ${r#*|} --set target_cpu=$target"
  # shellcheck disable=SC2086
  "$PY" -m workbench run cpu-reduction ${r#*|} --set "target_cpu=$target" > "$dir/$name.txt" 2>&1 || status=1
  tail -n 25 "$dir/$name.txt"
  "$PY" -m workbench export latest -o "$dir/$name-${cores}cpu.bundle.json" || status=1
done
pack "${PACK:-cpu_reduction}"
exit $status
