#!/usr/bin/env bash
# launch-cache on a GPU machine: the runs committed under traces/launch-cache/ (see its README).
# The GPU variant runs on GPU 0 (the study needs one GPU whatever the machine has); the CPU
# variant runs on this host's cores. Writes $OUT/launch_cache.tar.gz (re-packed after every run,
# so a run stopped at a time limit keeps what finished), ready to unpack into traces/.
# Run from the repository root.
#
#   STAGE=1   the seed's 256 launches with long kernels (calibrated to KERNEL_MS per kernel on
#             this GPU), 16,384 launches with tiny kernels, 4,096 with one-block kernels (where a
#             pool can overlap kernels), the size-limit runs, and the CPU runs
#   STAGE=2   the seed's 1,048,576 launches with the locked cache and the pool, one phase each.
#             Per-launch allocation is not run at that count: at about 0.2 ms a launch one phase
#             takes 3-4 minutes, more than the device time this had; its per-launch rate comes from
#             the 16,384-launch run of STAGE=1 (same kernels and threads), and the README says so
#   (unset)   both
# ONLY=REGEX keeps the runs whose name matches (grep -E), e.g. to re-measure some of them.
set -uo pipefail
source "$(dirname "$0")/common.sh" launch-cache
STAGE="${STAGE:-all}"
KERNEL_MS="${KERNEL_MS:-8}"
RUN_CAP_S="${RUN_CAP_S:-300}"
gpu="$("$PY" -c 'from studies.launch_cache.gpu import device_text; print(device_text()["gpu"].replace(" ", "-"))')"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true

run() {  # run NAME ARGS...: one study run, exported as NAME.bundle.json; a failure is reported, not fatal
  local name="$1"; shift
  [ -n "${ONLY:-}" ] && ! grep -qE -- "$ONLY" <<<"$name" && return 0
  echo "== launch-cache $name: $*"
  local t0=$SECONDS
  if timeout -s INT -k 10 "$RUN_CAP_S" "$PY" -m workbench run launch-cache "$@" --json > "/tmp/lc-$name.json" \
       2> "/tmp/lc-$name.err"; then
    echo "   ok in $((SECONDS - t0)) s"
  else
    echo "   FAILED or stopped in $((SECONDS - t0)) s"; tail -5 "/tmp/lc-$name.err"; status=1
  fi
  "$PY" -m workbench export latest -o "$dir/$name.bundle.json" && "$PY" - "$dir/$name.bundle.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["run"]
print(f"   {run['status']}: " + "; ".join(
    f"{v['variant']} real {sorted(r['real_s'] for r in v['extra'].get('repeats', []))} "
    f"user {sorted(r['user_s'] for r in v['extra'].get('repeats', []))} "
    f"sys {sorted(r['sys_s'] for r in v['extra'].get('repeats', []))}" + ("" if v["correct"] else f" FAILED {v['check']}")
    for v in run["variants"]))
PY
  tar -C "$(dirname "$dir")" -czf "$OUT/launch_cache.tar.gz" "$(basename "$dir")"
}

G=(--set target=gpu --set threads=8)
if [ "$STAGE" != 2 ]; then
  # Kernels that fill the GPU (8 blocks of 256 threads per multiprocessor) for about KERNEL_MS each,
  # so 256 launches take seconds (the seed's took 4 minutes: the claim is about the shape).
  passes="$("$PY" -c "from studies.launch_cache.gpu import passes_for_ms, kernel_ms
p = passes_for_ms($KERNEL_MS)
import sys; print(f'{p} passes: {kernel_ms(p):.2f} ms per kernel', file=sys.stderr); print(p)")"
  run "gpu-256-launches-long-kernels-$gpu" "${G[@]}" --set launches=256 --set blocks=0 --set "passes=$passes" \
    --set sync=true --set repeat=5
  run "gpu-16384-launches-$gpu" "${G[@]}" --set launches=16384
  run "gpu-4096-launches-one-block-kernels-$gpu" "${G[@]}" --set launches=4096 --set passes=200
  # The patch's size limit: 1 MiB of application data per launch, the block under (50 MB) and
  # over (200 MB) the 128 MiB limit, and the out-of-memory retry (every 64th data allocation).
  L=(--set launches=4096 --set data_bytes=1048576 --set policies=per_call,locked_cache,size_limit)
  run "gpu-size-limit-50MB-$gpu" "${G[@]}" "${L[@]}" --set sync=true
  run "gpu-size-limit-200MB-$gpu" "${G[@]}" "${L[@]}" --set sync=true --set scratch_bytes=200000000
  run "gpu-size-limit-oom-retry-$gpu" "${G[@]}" --set launches=4096 --set data_bytes=1048576 \
    --set policies=size_limit --set sync=true --set oom_every=64
  C=(--set target=cpu --set threads=8)
  run "cpu-8threads-host-of-$gpu" "${C[@]}"
  run "cpu-8threads-long-kernels-host-of-$gpu" "${C[@]}" --set passes=64
  run "cpu-size-limit-50MB-host-of-$gpu" "${C[@]}" --set data_bytes=1048576 --set malloc=pinned \
    --set policies=per_call,locked_cache,size_limit
  run "cpu-size-limit-200MB-host-of-$gpu" "${C[@]}" --set data_bytes=1048576 --set malloc=pinned \
    --set policies=per_call,locked_cache,size_limit --set scratch_bytes=200000000
fi
if [ "$STAGE" != 1 ]; then
  run "gpu-1048576-launches-$gpu" "${G[@]}" --set launches=1048576 --set policies=locked_cache,pool \
    --set sync=true --set repeat=1
fi
pack launch_cache
exit $status
