#!/usr/bin/env bash
# Reproduce RESULTS.md's text results: SST-2 dev accuracy per PE, and length extrapolation on the synthetic tasks
# (train on 8-16 tokens, test at 16, 32, 64, 128), every PE with every seed (mean ± std over seeds in the tables).
# Finished runs are skipped, interrupted ones resumed, finished evaluations reused.
#
#   VITPE_DATA=/path/to/data [PYTHON=python] [SEEDS="0 1 2"] [LENGTH_PES="..."] [SST2_PES="..."] \
#     [EXTRA="key=value ..."] [RECORDS=DIR] scripts/text_experiments.sh [RUNS_DIR]
#
# EXTRA overrides are added to every training (whitespace-separated, so no spaces inside a value).
set -euo pipefail
export PYTHON=${PYTHON:-python}  # the interpreter to run (tests pass their own)
cd "$(dirname "$0")/.."
runs=${1:-runs/text}
export RUNS=$runs  # RECORDS=DIR keeps every finished run's records (scripts/keep_records.sh)
seeds=(${SEEDS:-0 1 2})
extra=${EXTRA:-}
sst2_pes=(${SST2_PES-none learnable sincos rope_axial})
length_pes=(${LENGTH_PES-none learnable sincos rope_axial relbias alibi})
source scripts/check_inputs.sh
source scripts/keep_records.sh
require_seeds SEEDS "${seeds[@]}"
require_pes SST2_PES 1 "${sst2_pes[@]}"
require_pes LENGTH_PES 1 "${length_pes[@]}"

# logged LOG CMD...: run CMD with its output appended to LOG (a resumed run keeps its log from before the stop); when
# it fails, say where to look and stop
logged() {
  local log=$1
  shift
  "$@" >> "$log" 2>&1 || { echo "failed: $* (see $log)" >&2; exit 255; }
}

train_seeds() {  # train_seeds NAME CONFIG PE...: every PE with every seed as RUNS/NAME_PE_sSEED; prints the run folders
  local name=$1 config=$2
  shift 2
  for seed in "${seeds[@]}"; do
    for pe in "$@"; do
      local out="$runs/${name}_${pe}_s$seed"
      logged "$out.log" scripts/train_or_resume.sh "$out" "$config" model.pe="$pe" train.seed="$seed" $extra
      echo "$out"
    done
  done
}

mkdir -p "$runs"
reports=()
if [ ${#length_pes[@]} -gt 0 ]; then
  for task in order adjacent; do
    task_runs=($(train_seeds "$task" "configs/$task.yaml" "${length_pes[@]}"))
    reuse_kept_sweep "$runs/length_$task"
    logged "$runs/length_$task.log" "$PYTHON" eval.py "${task_runs[@]}" --lengths 16,32,64,128 \
      --pe-resize interpolate,extrapolate --out "$runs/length_$task"
    keep_sweep "$runs/length_$task"
    reports+=("$runs/length_$task/length.md")
  done
fi
if [ ${#sst2_pes[@]} -gt 0 ]; then
  sst2_runs=($(train_seeds sst2 configs/sst2.yaml "${sst2_pes[@]}"))
  "$PYTHON" scripts/summarise.py "${sst2_runs[@]}" > "$runs/sst2.md"
  reports+=("$runs/sst2.md")
fi
[ ${#reports[@]} -eq 0 ] || cat "${reports[@]}"
