#!/usr/bin/env bash
# Reproduce the README's text results: SST-2 dev accuracy per PE, and length extrapolation on the synthetic tasks
# (train on 8-16 tokens, test at 16, 32, 64, 128). Finished runs are skipped, interrupted ones resumed, finished
# evaluations reused. Usage: VITPE_DATA=/path/to/data scripts/text_experiments.sh [RUNS_DIR]
set -euo pipefail
export PYTHON=${PYTHON:-python}  # the interpreter to run (tests pass their own)
cd "$(dirname "$0")/.."
runs=${1:-runs/text}
sst2_pes=(${SST2_PES:-none learnable sincos rope_axial})
length_pes=(${LENGTH_PES:-none learnable sincos rope_axial relbias alibi})
for task in order adjacent; do
  for pe in "${length_pes[@]}"; do
    scripts/train_or_resume.sh "$runs/${task}_$pe" "configs/$task.yaml" model.pe="$pe"
  done
  "$PYTHON" eval.py "${length_pes[@]/#/$runs/${task}_}" --lengths 16,32,64,128 --pe-resize interpolate,extrapolate \
    --out "$runs/length_$task"
done
sst2_runs=()
for seed in ${SST2_SEEDS:-0 1}; do
  for pe in "${sst2_pes[@]}"; do
    scripts/train_or_resume.sh "$runs/sst2_${pe}_s$seed" configs/sst2.yaml model.pe="$pe" train.seed="$seed"
    sst2_runs+=("$runs/sst2_${pe}_s$seed")
  done
done
"$PYTHON" scripts/summarise.py "${sst2_runs[@]}" > "$runs/sst2.md"
cat "$runs/length_order/length.md" "$runs/length_adjacent/length.md" "$runs/sst2.md"
