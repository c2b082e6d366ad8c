#!/usr/bin/env bash
# The CIFAR-10 recipe against the plain timm loop, side by side: for every seed, scripts/timm_baseline.py and
# configs/cifar10.yaml (CONFIG=configs/cifar10_17ep.yaml: the recipe of RESULTS.md's PE grid) with each PE, two
# trainings at a time with one thread each on the same machine (a baseline and a recipe run share the machine, so
# their wall times compare), then one table (scripts/summarise.py: accuracy and wall time, mean ± std over seeds,
# wall time relative to the baseline's).
#
#   VITPE_DATA=/path/to/data [PYTHON=python] [JOBS=2] [SEEDS="0 1 2"] [PES="learnable sincos rope_mixed cpb"] \
#     [CONFIG=configs/cifar10.yaml] [EXTRA="key=value ..."] [TIMM_EPOCHS=10] [TIMM_ARGS="--train-limit N ..."] \
#     [LOOP_SEEDS="0 1 2"] [THREADS=1] [RECORDS=results/recipe/grid] scripts/recipe_vs_timm.sh [RUNS_DIR]
#
# LOOP_SEEDS (default: SEEDS, each of them one of SEEDS) are the seeds the loop runs for: a time anchor needs one
# loop run on the machine, so an ablation of the recipe can run LOOP_SEEDS=0 (RESULTS.md's recipe grid divides each
# run's time by the mean of the loop's runs on the same machine).
#
# Finished runs are skipped and interrupted ones resumed (a baseline from its last finished epoch). JOBS=1 runs one
# training at a time, for a lane beside another one-thread training (each run still shares the machine with one
# training, so wall times stay comparable); give each such lane its own SEEDS. THREADS=2 JOBS=1 is the other way a
# user runs it: one training at a time with both cores (each record's machine names its threads, so the tables
# divide by the loop run with as many).
set -euo pipefail
export PYTHON=${PYTHON:-python}  # the interpreter to run (tests pass their own)
cd "$(dirname "$0")/.."
runs=${1:-runs/recipe_vs_timm}
export RUNS=$runs  # RECORDS=DIR keeps every finished run's records (scripts/keep_records.sh)
config=${CONFIG:-configs/cifar10.yaml}
seeds=(${SEEDS:-0 1 2})
loop_seeds=(${LOOP_SEEDS-${seeds[*]}})
pes=(${PES:-learnable sincos rope_mixed cpb})
extra=${EXTRA:-}
export TIMM_EPOCHS=${TIMM_EPOCHS:-10} TIMM_ARGS=${TIMM_ARGS:-}
jobs=${JOBS:-2}
source scripts/check_inputs.sh
source scripts/keep_records.sh
source scripts/lanes.sh
require_jobs JOBS "$jobs"
require_jobs THREADS "${THREADS:-1}" "threads per training"
export OMP_NUM_THREADS=${THREADS:-1}
require_seeds SEEDS "${seeds[@]}"
require_seeds LOOP_SEEDS "${loop_seeds[@]}"
for seed in "${loop_seeds[@]}"; do
  [[ " ${seeds[*]} " == *" $seed "* ]] || { echo "LOOP_SEEDS: $seed is not one of SEEDS (${seeds[*]})" >&2; exit 2; }
done
require_pes PES 2 "${pes[@]}"
mkdir -p "$runs"

run_one() {  # run_one timm OUT SEED | run_one vitpe OUT CONFIG key=value ...: one training, logged to OUT.log
  # (appended to: a run resumed after a stop keeps the log of its part before, preemption message included)
  local kind=$1 out=$2
  shift 2
  if [ "$kind" = timm ]; then
    if [ -f "$out/metrics.jsonl" ] && [ "$(wc -l < "$out/metrics.jsonl")" -ge "$TIMM_EPOCHS" ]; then keep_records "$out"; return; fi
    local resume=--resume
    [ -f "$out/checkpoint.pt" ] || { rm -rf "$out"; resume=; }
    "$PYTHON" scripts/timm_baseline.py --out "$out" --seed "$1" --epochs "$TIMM_EPOCHS" $TIMM_ARGS $resume &&
      keep_records "$out"
  else
    scripts/train_or_resume.sh "$out" "$@"
  fi >> "$out.log" 2>&1 || { echo "failed: $out (see $out.log)" >&2; exit 255; }
}
export -f run_one kept_path keep_records

in_lanes -L 1 bash -c 'run_one "$@"' run_one < <(
  for seed in "${seeds[@]}"; do  # a baseline and a recipe run start together, then the other PEs
    [[ " ${loop_seeds[*]} " == *" $seed "* ]] && echo "timm $runs/timm_s$seed $seed"
    for pe in "${pes[@]}"; do echo "vitpe $runs/${pe}_s$seed $config model.pe=$pe train.seed=$seed $extra"; done
  done)
"$PYTHON" scripts/summarise.py "$runs"/*_s[0-9]*/ | tee "$runs/accuracy.md"
