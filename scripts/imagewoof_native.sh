#!/usr/bin/env bash
# Native aspect and mixed resolution against square training on Imagewoof2-320, and transfer up to 5x (RESULTS.md,
# "Native aspect on Imagewoof2-320"):
#   square_<pe>_s<seed>   configs/imagenette_grid.yaml data.dataset=imagewoof: centred squares, 40 -> 64 px
#   native_<pe>_s<seed>   configs/imagewoof_native.yaml: every photograph at its aspect, 16-144 patches an image, the
#                         same training tokens
#   naflex_<pos>_s<seed>  the anchor: timm's NaFlexViT (ANCHORS: learned table, RoPE-Mixed) trained by timm's own
#                         NaFlex loader at the same budget (scripts/naflex_baseline.py), swept at the same short sides
# for the PEs of PES and the seeds of SEEDS, JOBS (default 2) trainings at a time with one thread each; then every run
# evaluated at native aspect with the short side at each of RESOLUTIONS px (48 ... 320: 5x the training's 64), in the
# interpolate and extrapolate modes and NTK (a mode without meaning for a PE is recorded with its reason), on the
# first EVAL_LIMIT validation photographs (0: all 3,929). Each finished run's records go to RECORDS (default
# results/imagewoof_native) as it finishes; the same command resumes what was stopped. STAGES="train" trains only.
#   VITPE_DATA=/path/to/data [SEEDS="0 1 2"] [PES="..."] [JOBS=2] [EVAL_LIMIT=1000] scripts/imagewoof_native.sh [RUNS]
set -euo pipefail
export PYTHON=${PYTHON:-python}
cd "$(dirname "$0")/.."
runs=${1:-runs/imagewoof_native}
export RUNS=$runs RECORDS=${RECORDS-results/imagewoof_native}
seeds=(${SEEDS:-0 1 2})
pes=(${PES:-learnable rope_mixed cpb lookhere fire})
jobs=${JOBS:-2}
stages=" ${STAGES:-train anchor evaluate} "
extra=${EXTRA:-}
source scripts/check_inputs.sh
source scripts/keep_records.sh
source scripts/lanes.sh
require_jobs JOBS "$jobs"
require_seeds SEEDS "${seeds[@]}"
export OMP_NUM_THREADS=1
mkdir -p "$runs"
if [[ $stages == *" train "* ]]; then
  train_all < <(for seed in "${seeds[@]}"; do for pe in "${pes[@]}"; do
    echo "$runs/square_${pe}_s$seed configs/imagenette_grid.yaml data.dataset=imagewoof model.pe=$pe train.threads=1 train.seed=$seed $extra"
    echo "$runs/native_${pe}_s$seed configs/imagewoof_native.yaml model.pe=$pe train.threads=1 train.seed=$seed $extra"
  done; done)
fi
anchors=()
for seed in "${seeds[@]}"; do for pos in ${ANCHORS:-learned rope_mixed}; do anchors+=("$runs/naflex_${pos}_s$seed"); done; done
if [[ $stages == *" anchor "* ]]; then
  export ANCHOR_OPTIONS=${ANCHOR_OPTIONS:-}
  in_lanes -L 1 sh -c 'run=$0 pos=$1 seed=$2
    if [ -f "$run/checkpoint.pt" ]; then set -- --resume; else set -- --pos-embed "$pos" --seed "$seed"; fi
    "$PYTHON" scripts/naflex_baseline.py --out "$run" "$@" --epochs "${ANCHOR_EPOCHS:-35}" --threads 1 \
      $ANCHOR_OPTIONS >> "$run.log" 2>&1 || { echo "failed: $run (see $run.log)" >&2; exit 255; }' \
    < <(for run in "${anchors[@]}"; do
          run_finished "$run" || { pos=${run##*/naflex_}; echo "$run ${pos%_s*} ${run##*_s}"; }; done)
  for run in "${anchors[@]}"; do
    if run_finished "$run"; then keep_records "$run"; fi
  done
fi
if [[ $stages == *" evaluate "* ]]; then
  for run in "${anchors[@]}"; do
    if run_finished "$run" && [ ! -f "$run/resolution.json" ]; then
      "$PYTHON" scripts/naflex_baseline.py --evaluate "$run" --sizes "${RESOLUTIONS:-48,64,96,128,160,192,256,320}" \
        --limit "${EVAL_LIMIT:-1000}" > "$run.eval.log" 2>&1 || { echo "failed: $run (see $run.eval.log)" >&2; exit 1; }
      keep_records "$run"
    fi
  done
  existing=()
  for seed in "${seeds[@]}"; do for pe in "${pes[@]}"; do for mode in square native; do
    run_finished "$runs/${mode}_${pe}_s$seed" && existing+=("$runs/${mode}_${pe}_s$seed")
  done; done; done
  evaluate=("$PYTHON" eval.py --aspect native --resolutions "${RESOLUTIONS:-48,64,96,128,160,192,256,320}"
            --pe-resize interpolate,extrapolate,ntk --out "$runs/resolution" --limit "${EVAL_LIMIT:-1000}"
            --batch-size "${EVAL_BATCH:-100}")
  reuse_kept_sweep "$runs/resolution"
  evaluate_each "${evaluate[@]}" < <(printf '%s\n' "${existing[@]}")
  "${evaluate[@]}" "${existing[@]}"
  keep_sweep "$runs/resolution"
fi
echo "done: $runs (records in ${RECORDS:-nowhere})"
