#!/usr/bin/env bash
# The PE comparison of RESULTS.md: train CONFIG for every PE and seed, then multi-resolution models (MULTI_SIZES, one
# size per batch) of the two best PEs for every seed, then evaluate every run at RESOLUTIONS in both resize modes.
# Finished runs are skipped, interrupted ones resumed, finished evaluations reused: rerun the same command to continue.
#
#   VITPE_DATA=/path/to/data [PYTHON=python] [JOBS=2] [SEEDS="0 1"] [PES="..."] [CONFIG=...] [EXTRA="key=value ..."] \
#     [MULTI_PES="pe pe"] [MULTI_SIZES=24,32,40,48] [RESOLUTIONS=16,24,...] [EVAL_LIMIT=N] [RECORDS=DIR] \
#     scripts/compare.sh [RUNS_DIR]
#
# JOBS trainings run at once, each with (CPU cores / JOBS) threads unless OMP_NUM_THREADS is set. EXTRA overrides
# are added to every training (whitespace-separated, so no spaces inside a value). MULTI_PES picks the PEs of the
# multi-resolution runs (default: the two with the best mean test accuracy); PES="" with MULTI_PES trains only those
# (e.g. to add seeds to them). EVAL_LIMIT evaluates the resolution sweep on the first N test images only (default: all
# 10,000). scripts/compare_gpu.sh calls this with the GPU recipe.
set -euo pipefail
export PYTHON=${PYTHON:-python}  # the interpreter to run (tests pass their own)
cd "$(dirname "$0")/.."
runs=${1:-runs/compare}
export RUNS=$runs  # RECORDS=DIR keeps every finished run's records (scripts/keep_records.sh)
config=${CONFIG:-configs/cifar10_compare.yaml}
pes=(${PES-none learnable separable sincos rope_axial rope_mixed relbias cpb alibi peg})  # PES="": multi-res only
seeds=(${SEEDS:-0 1})
jobs=${JOBS:-1}
extra=${EXTRA:-}
multi_sizes=${MULTI_SIZES:-24,32,40,48}  # the multi-resolution runs' training sizes, one drawn per batch
source scripts/check_inputs.sh
source scripts/lanes.sh
source scripts/keep_records.sh
require_jobs JOBS "$jobs"
require_seeds SEEDS "${seeds[@]}"
require_pes PES 2 "${pes[@]}"
require_pes MULTI_PES 2 ${MULTI_PES:-}
cores=$(nproc)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( cores / jobs > 0 ? cores / jobs : 1 ))}
mkdir -p "$runs"

single=()
for seed in "${seeds[@]}"; do for pe in "${pes[@]}"; do single+=("$runs/${pe}_s$seed"); done; done
train_all < <(for seed in "${seeds[@]}"; do
  for pe in "${pes[@]}"; do echo "$runs/${pe}_s$seed $config model.pe=$pe train.seed=$seed $extra"; done
done)
if [ ${#single[@]} -gt 0 ]; then
  "$PYTHON" scripts/summarise.py "${single[@]}" > "$runs/accuracy.md"
elif [ -z "${MULTI_PES:-}" ]; then
  echo "PES is empty: give MULTI_PES, the PEs of the multi-resolution runs" >&2
  exit 2
else  # adding multi-resolution seeds: keep the folder's single-PE table, replace only its multi-resolution section
  kept=$(awk '/^Multi-resolution training \(/ {exit} {print}' "$runs/accuracy.md" 2>/dev/null || true)
  if [ -n "$kept" ]; then printf '%s\n' "$kept" > "$runs/accuracy.md"; else : > "$runs/accuracy.md"; fi
fi

best=(${MULTI_PES:-$("$PYTHON" scripts/summarise.py "${single[@]}" --best 2)})
multi=()
for seed in "${seeds[@]}"; do for pe in "${best[@]}"; do multi+=("$runs/multires_${pe}_s$seed"); done; done
train_all < <(for seed in "${seeds[@]}"; do
  for pe in "${best[@]}"; do
    echo "$runs/multires_${pe}_s$seed $config model.pe=$pe train.seed=$seed train.img_sizes=[$multi_sizes] $extra"
  done
done)
{ printf '\nMulti-resolution training (%s px, one size per batch), tested at the model size:\n\n' "$multi_sizes"
  "$PYTHON" scripts/summarise.py "${multi[@]}"; } >> "$runs/accuracy.md"

evaluate=("$PYTHON" eval.py --resolutions "${RESOLUTIONS:-16,24,32,40,48,64}" --pe-resize interpolate,extrapolate
          --out "$runs/resolution" ${EVAL_LIMIT:+--limit "$EVAL_LIMIT"})
# One run per lane first (each run's records are cached in resolution/runs/), then one call that only gathers them
# into the combined table and plots.
reuse_kept_sweep "$runs/resolution"
evaluate_each "${evaluate[@]}" < <(printf '%s\n' "${single[@]}" "${multi[@]}")
"${evaluate[@]}" "${single[@]}" "${multi[@]}"
keep_sweep "$runs/resolution"
cat "$runs/accuracy.md" "$runs/resolution/resolution.md"
