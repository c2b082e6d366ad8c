#!/usr/bin/env bash
# Variants of one config trained at the same time, then one table: how a recipe is searched, one lever per row.
# VARIANTS is a file of lines "NAME key=value ...": each line a run RUNS_DIR/NAME of CONFIG with those overrides (and
# EXTRA's, added to every line); blank lines and lines starting with # are skipped. JOBS trainings at a time with
# THREADS threads each; finished runs are skipped and interrupted ones resumed (scripts/train_or_resume.sh), so
# rerunning the command continues. Then scripts/summarise.py's table of every run (RUNS_DIR/accuracy.md).
#
#   VITPE_DATA=/path/to/data [PYTHON=python] [JOBS=2] [THREADS=1] [EXTRA="key=value ..."] [RECORDS=DIR] \
#     scripts/variants.sh CONFIG VARIANTS [RUNS_DIR]
set -euo pipefail
export PYTHON=${PYTHON:-python}  # the interpreter to run (tests pass their own)
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/variants.sh CONFIG VARIANTS [RUNS_DIR]" >&2; exit 2; }
config=$1 variants=$2 runs=${3:-runs/variants}
export RUNS=$runs  # RECORDS=DIR keeps every finished run's records (scripts/keep_records.sh)
jobs=${JOBS:-2}
source scripts/check_inputs.sh
source scripts/lanes.sh
require_jobs JOBS "$jobs"
require_jobs THREADS "${THREADS:-1}" "threads per training"
export OMP_NUM_THREADS=${THREADS:-1}
[ -f "$config" ] || { echo "CONFIG $config does not exist" >&2; exit 2; }
[ -f "$variants" ] || { echo "VARIANTS $variants does not exist: give a file of lines 'NAME key=value ...'" >&2; exit 2; }
names=$(grep -v '^[[:space:]]*\(#\|$\)' "$variants" | awk '{print $1}')
bad=$(grep -v '^[A-Za-z0-9._-]*$' <<< "$names" || true)
[ -z "$bad" ] || { echo "VARIANTS: run names may hold letters, digits, '.', '_' and '-' only: $bad" >&2; exit 2; }
repeated=$(sort <<< "$names" | uniq -d)
[ -z "$repeated" ] || { echo "VARIANTS: each run name once; repeated: $repeated" >&2; exit 2; }
mkdir -p "$runs"

run_one() {  # run_one NAME key=value ...: one training, logged to RUNS_DIR/NAME.log
  local name=$1
  shift
  scripts/train_or_resume.sh "$RUNS/$name" "$CONFIG" "$@" $EXTRA >> "$RUNS/$name.log" 2>&1 ||
    { echo "failed: $RUNS/$name (see $RUNS/$name.log)" >&2; exit 255; }
}
export -f run_one
export CONFIG=$config EXTRA=${EXTRA:-}
in_lanes -L 1 bash -c 'run_one "$@"' run_one < <(grep -v '^[[:space:]]*\(#\|$\)' "$variants")
"$PYTHON" scripts/summarise.py "$runs"/*/ --label out_dir | tee "$runs/accuracy.md"
