# Shared set-up of the GPU scripts; source it from the repository root:
#   source scripts/gpu/common.sh <study-id>
# NVLink multicast stays off (it can put a shared host's GPUs out of service; the one definition
# of those settings is workbench/running/launcher.py's MULTICAST_OFF), results go to a temporary store,
# $dir collects the files to commit, $OUT receives the packed archive.
PY="${PYTHON:-${PY:-python3}}"
eval "$("$PY" -m workbench.running.launcher env)" || { echo "cannot read the multicast-off settings" >&2; exit 1; }
export PYTHONUNBUFFERED=1
export WORKBENCH_STORE="${WORKBENCH_STORE:-/tmp/wb.sqlite}"
OUT="${OUT:-out}"
dir="$(mktemp -d)/$1"
mkdir -p "$dir" "$OUT"

# world_sizes: says which GPUs this machine has (on stderr) and prints the world sizes of
# $WORLD_SIZES (default 2 4 8) that they allow
world_sizes() {
  local ngpu ws
  ngpu="$("$PY" -c 'import torch; print(torch.cuda.device_count())')"
  echo "== $ngpu GPUs: $("$PY" -c 'import torch; print(torch.cuda.get_device_name(0))')" >&2
  for ws in ${WORLD_SIZES:-2 4 8}; do [ "$ws" -le "$ngpu" ] && echo "$ws"; done
}
status=0

# pack NAME: $dir as $OUT/NAME.tar.gz, ready to unpack into traces/ (written aside, then moved:
# a run killed while packing keeps the previous archive whole)
pack() {
  tar -C "$(dirname "$dir")" -czf "$OUT/$1.part" "$(basename "$dir")" && mv "$OUT/$1.part" "$OUT/$1.tar.gz"
  echo "wrote $OUT/$1.tar.gz:"; tar -tzvf "$OUT/$1.tar.gz"
}
