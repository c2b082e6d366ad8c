#!/usr/bin/env bash
# Train a run into OUT_DIR unless it already finished; resume it when it stopped part-way.
# Usage: [RECORDS=DIR RUNS=DIR] scripts/train_or_resume.sh OUT_DIR CONFIG [key=value ...]
# With RECORDS, the finished run's records are copied there (scripts/keep_records.sh).
set -euo pipefail
export PYTHON=${PYTHON:-python}  # the interpreter to run (tests pass their own)
source "$(dirname "$0")/keep_records.sh"
out=$1 config=$2
shift 2
if ! run_finished "$out"; then
  if [ -f "$out/checkpoint.pt" ]; then
    "$PYTHON" train.py --resume "$out" --no-progress
  else
    "$PYTHON" train.py --config "$config" out_dir="$out" --no-progress "$@"
  fi
fi
keep_records "$out"
