#!/usr/bin/env bash
# Byte-identical check of the backends through the whole command line: label the
# same inputs with --device cpu and --device cuda and compare every output file
# (summary.csv without its seconds column; the run record names the backend and times).
#
#   scripts/compare_backends.sh INPUT OUTDIR [gccl label options...]
#   scripts/compare_backends.sh .devdata/docs /tmp/cmp-docs --invert
set -euo pipefail
input=$1
out=$2
shift 2
rm -rf "$out"
python3 -m ccl_cli label "$input" --out "$out/cpu" --device cpu --quiet "$@"
python3 -m ccl_cli label "$input" --out "$out/cuda" --device cuda --quiet "$@"
diff -r -x summary.csv -x .gccl -x gccl-run.json "$out/cpu" "$out/cuda"
diff <(cut -d, -f1-8 "$out/cpu/summary.csv") <(cut -d, -f1-8 "$out/cuda/summary.csv")
files=$(find "$out/cpu" -type f ! -name '.*' | wc -l)
echo "identical: $files files from $input with options: $*"
