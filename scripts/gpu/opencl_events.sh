#!/usr/bin/env bash
# opencl-events on a GPU machine: NVIDIA's OpenCL (callbacks, wait, dependency) and CUDA.
#
# Run from the repository root. pyopencl is not in the GPU image: carry its wheels in .whl
# (scripts/gpu/opencl_setup.sh installs them and makes NVIDIA's OpenCL visible). Results go to
# a temporary store; bundles to $OUT/opencl_events.tar.gz, ready to unpack into
# traces/opencl-events/. Uses GPU 0 only (the question is per device).
#
# OE_RUNS picks the runs (default: all of "callbacks wait cuda callbacks-pyopencl dependency").
# OE_SCALE=quick runs every experiment in seconds (a smoke test of the machine).
# OE_DEP_ARGS adds settings to the dependency run, e.g. "--set workers=28 --set sizes=33554432"
# (one missing point), and OE_LABEL a suffix to the bundles' names (not to overwrite a run).
#
# The dependency run enqueues from C (host=native, the seed's C++ setting: from Python the waiting
# thread competes with the enqueuing one for the GIL) and takes 150 measurements per
# point, each of about OE_DEP_MS ms: at each point a pilot of the baseline sets the runs per
# measurement (at most 512, the seed's cap on maps per measurement; at least 8), so the large
# sizes, where one run of 28 workers takes milliseconds, fit in the call too: about 220 s on an
# H100 (the committed run had 201 s and missed its last point: OE_DEP_CAP_S=270 leaves room).
# Its sizes are per worker, 4 KiB-32 MiB (total 28 KiB-224 MiB with 7 workers, 112 KiB-896 MiB
# with 28).
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
PY=${PY:-python3}
eval "$($PY -m workbench.running.launcher env)" || exit 1  # NVLink multicast off (workbench/running/launcher.py)
export PYTHONUNBUFFERED=1
export WORKBENCH_STORE=${WORKBENCH_STORE:-/tmp/wb-opencl-events.sqlite}
export WORKBENCH_LOCK=/tmp/wb-opencl-events.lock
PLAT=${OE_PLATFORM:-nvidia}  # OpenCL platform substring

source "$(dirname "$0")/opencl_setup.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true

BUDGET_S=${OE_BUDGET_S:-460}  # whole script; each run gets at most its cap and what is left
run() {  # run <label> <cap_s> --set ... : one study run; SIGINT at the cap keeps its finished points
  local label=$1 cap=$2; shift 2
  local left=$((BUDGET_S - SECONDS - 10))
  [ "$cap" -gt "$left" ] && cap=$left
  if [ "$cap" -le 5 ]; then echo "== $label: skipped, out of time"; return; fi
  echo "== $label (at most ${cap} s): $*"
  local t0=$SECONDS
  if timeout -s INT -k 10 "$cap" $PY -m workbench run opencl-events "$@" --json > "/tmp/oe-$label.json" 2> "/tmp/oe-$label.err"; then
    echo "   ok in $((SECONDS - t0)) s"
  else
    echo "   FAILED in $((SECONDS - t0)) s"; tail -5 "/tmp/oe-$label.err"
  fi
}

if [ "${OE_SCALE:-full}" = quick ]; then
  Q=(--quick)
  DEP=(--quick)
else
  Q=(--set measurements=20)
  DEP=(--set host=native --set reps=512 --set "target_ms=${OE_DEP_MS:-3}" --set measurements=150)
fi
RUNS=" ${OE_RUNS:-callbacks wait cuda callbacks-pyopencl dependency} "
want() { [[ "$RUNS" == *" $1 "* ]]; }
want callbacks && run callbacks 70 --set experiment=callbacks --set platform=$PLAT "${Q[@]}"
want wait && run wait 30 --set experiment=wait --set platform=$PLAT "${Q[@]}"
want cuda && run cuda 40 --set experiment=cuda "${Q[@]}"
want callbacks-pyopencl && run callbacks-pyopencl 30 --set experiment=callbacks --set platform=$PLAT \
  --set callback_impl=pyopencl --set combos=000,001,111 --set sizes=4096,65536,1048576,33554432 "${Q[@]}" \
  --set measurements=8
# shellcheck disable=SC2086  # OE_DEP_ARGS is a list of words
want dependency && run dependency "${OE_DEP_CAP_S:-270}" --set experiment=dependency --set platform=$PLAT "${DEP[@]}" \
  ${OE_DEP_ARGS:-}

mkdir -p /tmp/oe-bundles
OE_LABEL=${OE_LABEL:-} $PY - <<'EOF'
import os
from workbench.results.store import Store, write_bundle
s = Store()
for h in s.runs(study="opencl-events"):
    rec = s.load(h["run_id"])
    label = rec.params["experiment"] + ("-" + rec.params["callback_impl"] if rec.params["experiment"] != "cuda" else "")
    label += os.environ["OE_LABEL"]
    path = write_bundle(rec, f"/tmp/oe-bundles/{label}-{rec.env.get('gpu_names', ['cpu'])[0].replace(' ', '_')}.bundle.json")
    print(rec.status, len(rec.variants), "variants", sum(not v.correct for v in rec.variants), "failed ->", path)
EOF
tar -czf "$OUT/opencl_events.tar.gz" -C /tmp/oe-bundles .
cp /tmp/oe-*.err "$OUT"/ 2>/dev/null; tar -czf "$OUT/opencl_events_logs.tar.gz" -C /tmp $(cd /tmp && ls oe-*.err) 2>/dev/null
rm -f "$OUT"/oe-*.err
ls -la "$OUT"
