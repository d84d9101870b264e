#!/usr/bin/env bash
# Every check a GPU change must pass, in one run on a GPU machine: GPU tests, benchmark,
# sanitizers, CPU tests (docs/design.md, "Verifying GPU changes").
#
#   bash scripts/device_visit.sh                    # every stage
#   STAGES="gpu bench" BUDGET=300 bash scripts/device_visit.sh
#   STAGES=gpu GPU_TESTS="tests/gpu/test_cuda_volumes.py" GPU_LIMIT=400 bash scripts/device_visit.sh
#   STAGES="memcheck racecheck" SANITIZE_ARGS=--volumes RACECHECK_ARGS="--volumes --one-piece" \
#     bash scripts/device_visit.sh
#
# Stages: gpu (GPU tests), bench (benchmarks/bench_cuda.py), vbench
# (benchmarks/bench_cuda_volumes.py --large), memcheck and
# racecheck (compute-sanitizer), cli (scripts/compare_backends.sh: --device cuda
# and --device cpu give byte-identical files for .devdata/docs and
# .devdata/depth), gccl-bench (gccl bench against OpenCV and cupyx: JSON, CSV
# and plot), multi (benchmarks/bench_multi_gpu.py: one GPU against all), e2e
# (benchmarks/bench_end_to_end.py on 16 cores against the OpenCV/cc3d
# pipeline), polygons (benchmarks/bench_polygons.py: whole runs without and with
# --polygons on .devdata/docs, on the GPU, and the same for the checkout in
# .before/ when present), vcli (benchmarks/bench_volume_cli.py: volume files end to
# end against their read + write floor and a 16-process cc3d script, with each --device of
# VCLI_DEVICES), chunked (benchmarks/bench_chunked.py --large 1024: one GPU worker, 16 CPU
# workers, one CPU worker), cpu (the CPU test suite).
#
# Run from the repository root. Carried wheels in .whl/ (cc3d, imagecodecs, and
# setuptools >= 77 where the machine's is older) are installed into /tmp/site first,
# then the CPU engine is compiled in place (setup.py build_ext --inplace); the
# benchmark reads .devdata/pageseg1.png and .devdata/*.depth.png when present. Each stage has a time limit and the whole
# run a budget (BUDGET seconds, default 560), so one hang cannot cost the
# rest. Logs go to $OUT (default /tmp/gccl-visit); a short summary is printed
# last and kept in $OUT/summary.txt.
set -u
OUT=${OUT:-/tmp/gccl-visit}
STAGES=${STAGES:-"gpu bench vbench memcheck racecheck cli gccl-bench cpu"}
SANITIZE_ARGS=${SANITIZE_ARGS:-}  # e.g. --volumes: only the volume kernels under the sanitizers
RACECHECK_ARGS=${RACECHECK_ARGS:-$SANITIZE_ARGS}  # racecheck's, where they differ
SANITIZE_LIMIT=${SANITIZE_LIMIT:-120}  # seconds each sanitizer may take
GPU_TESTS=${GPU_TESTS:-tests/gpu}  # what the gpu stage runs
GPU_LIMIT=${GPU_LIMIT:-300}  # seconds the gpu stage may take
VCLI_DEVICES=${VCLI_DEVICES:-"auto cuda"}  # the vcli stage's --device, one run each
BUDGET=${BUDGET:-560}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
fi
PYTHONPATH=/tmp/site python3 setup.py -q build_ext --inplace || exit 1
# Byte-compiled, as a pip install is: the GPU machine sets PYTHONDONTWRITEBYTECODE,
# so otherwise every run compiles the sources again (imagecodecs' many modules above all).
python3 -m compileall -q -j 8 ccl_cli /tmp/site >/dev/null 2>&1
export PYTHONPATH=.:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
summary="$OUT/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
# run_stage NAME LIMIT LOG COMMAND...: skipped when not in STAGES or out of budget.
run_stage() {
  local name=$1 limit=$2 log=$3
  shift 3
  [[ " $STAGES " == *" $name "* ]] || return 1
  local left=$((BUDGET - SECONDS - 5))
  if ((left < 20)); then
    note "$name: skipped (budget spent)"
    return 1
  fi
  ((limit > left)) && limit=$left
  local start=$SECONDS
  timeout "$limit" "$@" >"$log" 2>&1
  rc=$?
  took=$((SECONDS - start))
  return 0
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv \
  >>"$summary" 2>&1
python3 -c "from ccl_cli.backends.cuda.loader import cuda_status; print(cuda_status())" >>"$summary" 2>&1

# shellcheck disable=SC2086  # GPU_TESTS is a list of paths
if run_stage gpu "$GPU_LIMIT" "$OUT/gpu-tests.log" python3 -m pytest $GPU_TESTS -q -p no:cacheprovider \
  -rfE --durations=15; then
  note "gpu tests (rc $rc, $took s): $(tail -n 1 "$OUT/gpu-tests.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/gpu-tests.log" | head -n 15 | tee -a "$summary"
fi
doc=$(ls .devdata/pageseg1.png 2>/dev/null | head -n 1)
depth=$(ls .devdata/*.depth.png 2>/dev/null | head -n 1)
if run_stage bench 200 "$OUT/bench.log" python3 benchmarks/bench_cuda.py \
  ${doc:+--doc "$doc"} ${depth:+--depth "$depth"} --json "$OUT/bench.json"; then
  note "bench (rc $rc, $took s):"
  if [ $rc -eq 0 ]; then
    sed -n '/^copy bandwidth/,$p' "$OUT/bench.log" | tee -a "$summary"
  else
    tail -n 25 "$OUT/bench.log" | tee -a "$summary"
  fi
fi
if run_stage vbench 240 "$OUT/vbench.log" python3 benchmarks/bench_cuda_volumes.py --large \
  --json "$OUT/vbench.json"; then
  note "volume bench (rc $rc, $took s):"
  tail -n 16 "$OUT/vbench.log" | tee -a "$summary"
fi
for tool in memcheck racecheck; do
  args=$SANITIZE_ARGS
  [ "$tool" = racecheck ] && args=$RACECHECK_ARGS
  # shellcheck disable=SC2086  # args is a list of options
  if run_stage $tool "$SANITIZE_LIMIT" "$OUT/$tool.log" compute-sanitizer --tool $tool \
    --error-exitcode 99 python3 scripts/sanitize_run.py $args; then
    found=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|sanitize_run:' "$OUT/$tool.log" | tr '\n' ' ')
    note "$tool (rc $rc, $took s): $found"
  fi
done
compare() {  # compare NAME INPUT OPTIONS...: one byte-identical CLI comparison
  local name=$1
  shift
  [ -d "$1" ] || return 0
  if run_stage cli 120 "$OUT/cli-$name.log" bash scripts/compare_backends.sh "$1" "/tmp/cmp-$name" \
    "${@:2}"; then
    note "cli $name (rc $rc, $took s): $(tail -n 1 "$OUT/cli-$name.log")"
  fi
}
compare docs8 .devdata/docs --invert
compare docs4 .devdata/docs --invert --connectivity 4 --min-area 5
compare depth8 .devdata/depth --tau 20 --min-area 50
compare depth4 .devdata/depth --tau 20 --connectivity 4
compare samples sample_data --background none --tau 3
if run_stage gccl-bench 240 "$OUT/gccl-bench.log" python3 -m ccl_cli bench --level kernel \
  --sizes 1920x1080,4000x3000 --batch 1,64 --repeat 5 --json "$OUT/gccl-bench.json" \
  --csv "$OUT/gccl-bench.csv" --plot "$OUT/gccl-bench.png"; then
  note "gccl bench (rc $rc, $took s): see gccl-bench.log"
fi
if run_stage multi 240 "$OUT/multi.log" python3 benchmarks/bench_multi_gpu.py --repeat 5; then
  note "multi-GPU (rc $rc, $took s):"
  grep "^|" "$OUT/multi.log" | tee -a "$summary"
fi
# End to end on 16 cores, as many as the one-GPU device machine has.
if run_stage e2e 400 "$OUT/e2e.log" taskset -c 0-15 python3 benchmarks/bench_end_to_end.py \
  --depth-source .devdata/depth --docs-source .devdata/docs --work /tmp/e2e \
  --json "$OUT/e2e.json" --gccl-options "" --gccl-options "--processes 1" \
  --gccl-options "--processes 16 --workers 1" \
  --gccl-options "--label-format tiff --tiff-compression zstd"; then
  note "end to end (rc $rc, $took s):"
  tail -n 14 "$OUT/e2e.log" | tee -a "$summary"
fi
if run_stage polygons 200 "$OUT/polygons.log" python3 benchmarks/bench_polygons.py --runs 5 \
  --device cuda .devdata/docs/*; then
  note "polygons (rc $rc, $took s):"
  grep "^|" "$OUT/polygons.log" | tee -a "$summary"
  if [ -d .before ]; then
    (cd .before && PYTHONPATH=/tmp/site python3 setup.py -q build_ext --inplace) >/dev/null 2>&1
    timeout 200 python3 benchmarks/bench_polygons.py --runs 5 --device cuda --package .before \
      .devdata/docs/* >"$OUT/polygons-before.log" 2>&1
    note "polygons before (rc $?):"
    grep "^|" "$OUT/polygons-before.log" | tee -a "$summary"
  fi
fi
for device in $VCLI_DEVICES; do
  if run_stage vcli 400 "$OUT/vcli-$device.log" taskset -c 0-15 python3 \
    benchmarks/bench_volume_cli.py --device "$device" --processes 16 --repeat 3 --work /tmp/vcli \
    --json "$OUT/vcli-$device.json"; then
    note "volume files end to end, --device $device (rc $rc, $took s):"
    tail -n 8 "$OUT/vcli-$device.log" | tee -a "$summary"
  fi
done
# (name, bench_chunked.py's arguments): one GPU worker, 16 CPU workers, one CPU worker.
for run in "gpu-worker:--workers 1 --device cuda --memory-limit 8GiB" \
  "cpu-16-workers:--workers 16 --memory-limit 4GiB" "cpu-1-worker:--workers 1 --memory-limit 8GiB"; do
  name=${run%%:*}
  # shellcheck disable=SC2086  # the arguments are a list
  if run_stage chunked 240 "$OUT/chunked-$name.log" taskset -c 0-15 python3 \
    benchmarks/bench_chunked.py --size 256 --repeat 1 --large 1024 ${run#*:}; then
    note "chunked 1024^3, $name (rc $rc, $took s):"
    grep -E "floor|one piece|gccl chunked 1024|tasks" "$OUT/chunked-$name.log" | tee -a "$summary"
  fi
done
if run_stage cpu 120 "$OUT/cpu-tests.log" python3 -m pytest tests -q -p no:cacheprovider \
  --ignore=tests/gpu; then
  note "cpu tests (rc $rc, $took s): $(tail -n 1 "$OUT/cpu-tests.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/cpu-tests.log" | head -n 5 | tee -a "$summary"
fi
echo "--- summary"
cat "$summary"
