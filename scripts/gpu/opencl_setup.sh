# Shared set-up for OpenCL on a GPU machine; source it from the repository root (PY set).
# pyopencl is not in the GPU image: it installs the wheels carried in .whl (pyopencl, pytools,
# platformdirs, siphash24; cp312 manylinux, see /work/.library/device/README.md) into /tmp/site.
# NVIDIA's OpenCL library ships with the driver but has no ICD file there: this finds
# libnvidia-opencl.so.1 and points OCL_ICD_VENDORS at a file naming it.
if ! $PY -c 'import pyopencl' 2>/dev/null; then
  if ls .whl/pyopencl-*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  else
    echo "pyopencl is missing and no wheels in .whl; only the CUDA experiment will run" >&2
  fi
fi

ocl_lib=""
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/cuda/lib64; do
  if [ -e "$d/libnvidia-opencl.so.1" ]; then ocl_lib="$d/libnvidia-opencl.so.1"; break; fi
done
[ -z "$ocl_lib" ] && ocl_lib=$(find / -xdev -name 'libnvidia-opencl.so.1' 2>/dev/null | head -1)
if [ -n "$ocl_lib" ]; then
  mkdir -p /tmp/ocl-icd && echo "$ocl_lib" > /tmp/ocl-icd/nvidia.icd
  export OCL_ICD_VENDORS=/tmp/ocl-icd
  echo "NVIDIA OpenCL: $ocl_lib"
else
  echo "libnvidia-opencl.so.1 not found: no NVIDIA OpenCL platform" >&2
fi
$PY - <<'PYEOF'
try:
    from studies.opencl_events import clrt
    for p in clrt.platforms():
        print("OpenCL platform:", p)
except Exception as exc:
    print("OpenCL:", type(exc).__name__, exc)
PYEOF
