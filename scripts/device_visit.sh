#!/usr/bin/env bash
# One visit to the GPU machine: GPU tests, CPU tests, sanitizers, benchmark.
#
#   bash scripts/device_visit.sh            # every stage
#   STAGES="gpu bench" bash scripts/device_visit.sh
#
# Run from the repository root. Carried wheels in .whl/ (cc3d, imagecodecs) are
# installed into /tmp/site first; data for the benchmark is read from .devdata/
# (pageseg1.png, a depth PNG) when present. Logs go to $OUT (default
# /tmp/gccl-visit); a short summary is printed last and kept in $OUT/summary.txt.
set -u
OUT=${OUT:-/tmp/gccl-visit}
STAGES=${STAGES:-"gpu cpu memcheck racecheck bench"}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=.:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
summary="$OUT/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
stage() { [[ " $STAGES " == *" $1 "* ]]; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv \
  >>"$summary" 2>&1
python3 -c "from ccl_cli.backends.cuda import cuda_status; print(cuda_status())" >>"$summary" 2>&1

if stage gpu; then
  start=$SECONDS
  python3 -m pytest tests/gpu -q -p no:cacheprovider -rfEs >"$OUT/gpu-tests.log" 2>&1
  note "gpu tests (rc $?, $((SECONDS - start)) s): $(tail -n 1 "$OUT/gpu-tests.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/gpu-tests.log" | head -n 15 | tee -a "$summary"
fi
if stage cpu; then
  start=$SECONDS
  python3 -m pytest tests -q -p no:cacheprovider --ignore=tests/gpu -x >"$OUT/cpu-tests.log" 2>&1
  note "cpu tests (rc $?, $((SECONDS - start)) s): $(tail -n 1 "$OUT/cpu-tests.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/cpu-tests.log" | head -n 5 | tee -a "$summary"
fi
for tool in memcheck racecheck; do
  if stage $tool; then
    start=$SECONDS
    compute-sanitizer --tool $tool --error-exitcode 99 python3 scripts/sanitize_run.py \
      >"$OUT/$tool.log" 2>&1
    note "$tool (rc $?, $((SECONDS - start)) s): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|sanitize_run:' "$OUT/$tool.log" | tr '\n' ' ')"
  fi
done
if stage bench; then
  doc=$(ls .devdata/pageseg1.png 2>/dev/null | head -n 1)
  depth=$(ls .devdata/*.depth.png 2>/dev/null | head -n 1)
  python3 benchmarks/bench_cuda.py ${doc:+--doc "$doc"} ${depth:+--depth "$depth"} \
    --json "$OUT/bench.json" >"$OUT/bench.log" 2>&1
  rc=$?
  note "bench (rc $rc):"
  if [ $rc -eq 0 ]; then
    sed -n '/^copy bandwidth/,$p' "$OUT/bench.log" | tee -a "$summary"
  else
    tail -n 25 "$OUT/bench.log" | tee -a "$summary"
  fi
fi
echo "--- summary"
cat "$summary"
