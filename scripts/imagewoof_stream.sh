#!/usr/bin/env bash
# Streaming against in memory on Imagewoof2-320 (RESULTS.md, "Streaming against in memory: Imagewoof2-320"):
#   memory/cpb_s<seed>   configs/imagenette_grid.yaml with data.dataset=imagewoof (centred squares decoded at 160 px)
#   stream/cpb_s<seed>   configs/imagewoof_stream.yaml (the stream loader: photographs decoded by one worker)
# one thread per training, JOBS (default 2) at a time: each seed's two runs side by side. Each finished run's records
# go to RECORDS (default results/imagewoof) as it finishes; the same command resumes what was stopped. EXTRA adds
# key=value overrides to every run (the tests shrink the model with it).
#   VITPE_DATA=/path/to/data [SEEDS="0 1 2"] [JOBS=2] scripts/imagewoof_stream.sh [RUNS_DIR]
set -euo pipefail
export PYTHON=${PYTHON:-python}  # the interpreter to run (tests pass their own)
cd "$(dirname "$0")/.."
runs=${1:-runs/imagewoof}
export RUNS=$runs RECORDS=${RECORDS-results/imagewoof}
seeds=(${SEEDS:-0 1 2})
jobs=${JOBS:-2}
extra=${EXTRA:-}
source scripts/check_inputs.sh
source scripts/keep_records.sh
source scripts/lanes.sh
require_jobs JOBS "$jobs"
require_seeds SEEDS "${seeds[@]}"
export OMP_NUM_THREADS=1
mkdir -p "$runs/memory" "$runs/stream"
train_all < <(for seed in "${seeds[@]}"; do
  echo "$runs/memory/cpb_s$seed configs/imagenette_grid.yaml data.dataset=imagewoof train.threads=1 train.seed=$seed $extra"
  echo "$runs/stream/cpb_s$seed configs/imagewoof_stream.yaml train.threads=1 train.seed=$seed $extra"
done)
echo "done: $runs (records in ${RECORDS:-nowhere})"
