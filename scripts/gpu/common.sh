# Shared set-up of the GPU scripts; source it from the repository root:
#   source scripts/gpu/common.sh <study-id>
# NVLink multicast stays off (it can put a shared host's GPUs out of service), results go to a
# temporary store, $dir collects the files to commit, $OUT receives the packed archive.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export WORKBENCH_STORE="${WORKBENCH_STORE:-/tmp/wb.sqlite}"
OUT="${OUT:-out}"
PY="${PYTHON:-python3}"
dir="$(mktemp -d)/$1"
mkdir -p "$dir" "$OUT"

gpu_count() { "$PY" -c 'import torch; print(torch.cuda.device_count())'; }

# pack NAME: $dir as $OUT/NAME.tar.gz, ready to unpack into traces/
pack() {
  tar -C "$(dirname "$dir")" -czf "$OUT/$1.tar.gz" "$(basename "$dir")"
  echo "wrote $OUT/$1.tar.gz:"; tar -tzvf "$OUT/$1.tar.gz"
}
