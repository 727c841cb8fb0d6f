#!/usr/bin/env bash
# opencl-events on a GPU machine: NVIDIA's OpenCL (callbacks, wait, dependency) and CUDA.
#
# Run from the repository root. pyopencl is not in the GPU image: carry its wheels in .whl
# (pyopencl, pytools, platformdirs, siphash24, typing_extensions; cp312 manylinux, see
# /work/.library/device/README.md). NVIDIA's OpenCL library ships with the driver but has
# no ICD file there: this script finds libnvidia-opencl.so.1 and points OCL_ICD_VENDORS at
# a file naming it. Results go to a temporary store; bundles to $OUT/opencl_events.tar.gz,
# ready to unpack into traces/opencl-events/. Uses GPU 0 only (the question is per device).
#
# OE_SCALE=quick runs every experiment in seconds (a smoke test of the machine).
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
PY=${PY:-python3}
eval "$($PY -m workbench.launcher env)" || exit 1  # NVLink multicast off (workbench/launcher.py)
export PYTHONUNBUFFERED=1
export WORKBENCH_STORE=${WORKBENCH_STORE:-/tmp/wb-opencl-events.sqlite}
export WORKBENCH_LOCK=/tmp/wb-opencl-events.lock
PLAT=${OE_PLATFORM:-nvidia}  # OpenCL platform substring

if ! $PY -c 'import pyopencl' 2>/dev/null; then
  if ls .whl/pyopencl-*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  else
    echo "pyopencl is missing and no wheels in .whl; only the CUDA experiment will run" >&2
  fi
fi

lib=""
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/cuda/lib64; do
  if [ -e "$d/libnvidia-opencl.so.1" ]; then lib="$d/libnvidia-opencl.so.1"; break; fi
done
[ -z "$lib" ] && lib=$(find / -xdev -name 'libnvidia-opencl.so.1' 2>/dev/null | head -1)
if [ -n "$lib" ]; then
  mkdir -p /tmp/ocl-icd && echo "$lib" > /tmp/ocl-icd/nvidia.icd
  export OCL_ICD_VENDORS=/tmp/ocl-icd
  echo "NVIDIA OpenCL: $lib"
else
  echo "libnvidia-opencl.so.1 not found: no NVIDIA OpenCL platform" >&2
fi
$PY - <<'EOF'
try:
    from studies._opencl_events import clrt
    for p in clrt.platforms():
        print("OpenCL platform:", p)
except Exception as exc:
    print("OpenCL:", type(exc).__name__, exc)
EOF
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true

BUDGET_S=${OE_BUDGET_S:-250}  # whole script; each run gets at most its cap and what is left
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
  # the dependency runs enqueue 10-31 commands per run: fewer runs, measurements and sizes
  # (every 4x) so that 28 workers finish within the time cap too
  DEP=(--set reps=256 --set measurements=8 --set sizes=4096,16384,65536,262144,1048576,4194304,16777216,33554432)
fi
run callbacks 70 --set experiment=callbacks --set platform=$PLAT "${Q[@]}"
run wait 30 --set experiment=wait --set platform=$PLAT "${Q[@]}"
run cuda 40 --set experiment=cuda "${Q[@]}"
run callbacks-pyopencl 30 --set experiment=callbacks --set platform=$PLAT --set callback_impl=pyopencl \
  --set combos=000,001,111 --set sizes=4096,65536,1048576,33554432 "${Q[@]}" --set measurements=8
run dependency 110 --set experiment=dependency --set platform=$PLAT "${DEP[@]}"

mkdir -p /tmp/oe-bundles
$PY - <<'EOF'
from workbench.store import Store, write_bundle
s = Store()
for h in s.runs(study="opencl-events"):
    rec = s.load(h["run_id"])
    label = rec.params["experiment"] + ("-" + rec.params["callback_impl"] if rec.params["experiment"] != "cuda" else "")
    path = write_bundle(rec, f"/tmp/oe-bundles/{label}-{rec.env.get('gpu_names', ['cpu'])[0].replace(' ', '_')}.bundle.json")
    print(rec.status, len(rec.variants), "variants", sum(not v.correct for v in rec.variants), "failed ->", path)
EOF
tar -czf "$OUT/opencl_events.tar.gz" -C /tmp/oe-bundles .
cp /tmp/oe-*.err "$OUT"/ 2>/dev/null; tar -czf "$OUT/opencl_events_logs.tar.gz" -C /tmp $(cd /tmp && ls oe-*.err) 2>/dev/null
rm -f "$OUT"/oe-*.err
ls -la "$OUT"
