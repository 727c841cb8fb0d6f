#!/usr/bin/env bash
# mc2-split on a GPU machine: the seed shape (M=4096, K=3072, N=8192, fp16), chunked matmul +
# all-reduce, serial vs overlapped with NCCL (default and CTA-limited), the copy-engine and the
# Triton all-reduces, for every world size 2, 4, 8 that the GPU count allows, REPEATS times each
# (the spread over repeated runs, not the best one, is the headline); then the GPU pytest tests.
# Every rank's torch.profiler traces go into the bundles. Writes $OUT/$PACK.tar.gz (default
# mc2_split), again after each run (a time-out keeps the runs done): bundles (*.bundle.json),
# tables (benchmark_ws*.md) and spread.md (the spread over these runs and the committed ones;
# it reads bundles, which needs jsonschema: print it elsewhere with --spread where the GPU image
# lacks it), ready to unpack into traces/mc2-split/. REPEATS=0 runs the tests alone.
# Run from the repository root.
set -uo pipefail
source "$(dirname "$0")/common.sh" mc2-split
REPS="${REPS:-20}"
REPEATS="${REPEATS:-1}"
PROVIDERS="${PROVIDERS:-${COMMS:-default,limited,ce,ce-oneshot,triton,triton-pull,triton-persistent}}"
CARVEOUT="${CARVEOUT:-0,16,24}"
for ws in $(world_sizes); do
  for rep in $(seq 1 "$REPEATS"); do
    echo "== ws=$ws run $rep of $REPEATS"
    "$PY" benchmarks/mc2_split.py --world-size "$ws" --set reps="$REPS" --set providers="$PROVIDERS" --set carveout="$CARVEOUT" \
        --set timeout_s="${RUN_TIMEOUT:-500}" ${EXTRA_SETS:-} --bundle-dir "$dir" --tag seed-shape > "$dir/benchmark_ws${ws}_$rep.md" || status=1
    cat "$dir/benchmark_ws${ws}_$rep.md"
    pack "${PACK:-mc2_split}" > /dev/null
  done
done
if [ "$REPEATS" -gt 0 ] && "$PY" -c "import jsonschema" 2>/dev/null; then
  shopt -s nullglob  # a copy without traces/ has no committed runs to add
  "$PY" benchmarks/mc2_split.py --spread "$dir"/*.bundle.json traces/mc2-split/*.bundle.json > "$dir/spread.md"
  cat "$dir/spread.md"
fi
if [ "${RUN_PYTEST:-1}" = 1 ]; then
  echo "== pytest (gpu, multigpu)"
  timeout "${PYTEST_TIMEOUT:-200}" "$PY" -m pytest -q -p no:cacheprovider -m "gpu or multigpu" tests/studies/mc2_split/test_study.py \
      2>&1 | tee "$dir/pytest_gpu.txt" | tail -5
fi
pack "${PACK:-mc2_split}"
exit $status
