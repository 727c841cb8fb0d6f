#!/usr/bin/env bash
# launch-cache on a GPU machine: the GPU variant (CuPy, GPU 0; the study needs one GPU whatever
# the machine has) at the defaults and with long kernels, plus the CPU variant at the seed's
# 8 threads on this host's many cores. Writes $OUT/launch_cache.tar.gz holding result bundles
# ready to unpack into traces/launch-cache/ (import them with `python -m workbench import`).
# Run from the repository root. LAUNCHES overrides the GPU launch count (default 16384).
set -euo pipefail
source "$(dirname "$0")/common.sh" launch-cache
LAUNCHES="${LAUNCHES:-16384}"
gpu="$("$PY" -c 'from studies._launch_cache.gpu import device_text; print(device_text()["gpu"].replace(" ", "-"))')"

run() {  # run NAME ARGS...: one study run, exported as NAME.bundle.json
    local name="$1"; shift
    echo "== launch-cache $name: $*"
    "$PY" -m workbench run launch-cache "$@" >/dev/null
    "$PY" -m workbench export latest -o "$dir/$name.bundle.json"
}

run "gpu-default-$gpu" --set target=gpu --set "launches=$LAUNCHES"
run "gpu-long-kernels-$gpu" --set target=gpu --set launches=4096 --set passes=200
run "cpu-8threads-host-of-$gpu" --set target=cpu --set threads=8
run "cpu-8threads-long-kernels-host-of-$gpu" --set target=cpu --set threads=8 --set passes=64
pack launch_cache
