#!/usr/bin/env bash
# The full `gccl bench` on a GPU machine (the H200 of docs/performance.md: one GPU,
# 16 cores). Run it from the repository root, with any wheels the machine cannot
# download (cc3d, imagecodecs) in .whl/ (docs/design.md, "Verifying GPU changes"):
#
#   bash scripts/device_bench.sh
#
# Usage: device_bench.sh [PART [EXTRA OPTIONS...]]. PART picks what runs: all (default),
# kernel or e2e; `all` takes several minutes. Extra options go to every bench run, e.g.
# `device_bench.sh all --sizes 640x480 --repeat 3` for a one-minute smoke test.
#   kernel: every generated case (5 families x 640x480, 1920x1080, 4000x3000 x 4c and 8c),
#           every available engine, batches 1,8,32,64 (capped at 133 Mpixel a batch).
#   e2e:    files in, label images + CSVs out, 1920x1080, 8c; random-0.1 is left out
#           because its 133k components per image make it a test of CSV writing.
# Writes under $OUT: info.txt, nvidia-smi.txt, and bench-<part>.{json,csv,png,log}.
# Exit status: the worst of the runs (1: an engine disagreed or failed; see the logs).
set -uo pipefail
PART=${1:-all}
shift $(($# > 0 ? 1 : 0))
EXTRA=("$@")
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 2
fi
# The CPU engine compiled in place, and everything byte-compiled as a pip install is (see
# scripts/device_visit.sh).
PYTHONPATH=/tmp/site python3 setup.py -q build_ext --inplace || exit 2
python3 -m compileall -q -j 8 ccl_cli /tmp/site >/dev/null 2>&1
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
python3 -m ccl_cli info >"$OUT/info.txt" 2>&1
status=0

bench() {  # bench NAME ARGS...: one gccl bench run, its reports and log under $OUT
    local name=$1
    shift
    echo "== gccl bench $* ($name)"
    python3 -m ccl_cli bench "$@" "${EXTRA[@]}" --json "$OUT/$name.json" --csv "$OUT/$name.csv" \
        --plot "$OUT/$name.png" 2>&1 | tee "$OUT/$name.log"
    local code=${PIPESTATUS[0]}
    echo "== $name: exit $code"
    ((code > status)) && status=$code
}

if [[ $PART == all || $PART == kernel ]]; then
    bench bench-kernel --level kernel
fi
if [[ $PART == all || $PART == e2e ]]; then
    bench bench-e2e --level end-to-end --sizes 1920x1080 --connectivity 8 \
        --cases random-0.5,random-0.9,document,depth --batch 1,8,64
fi
exit $status
