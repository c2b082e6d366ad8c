#!/usr/bin/env bash
# Reproduce the README's CPU-recipe figures: train configs/cifar10.yaml with each PE given (default: rope_mixed and
# learnable), then evaluate the runs across resolutions. Runs that already finished are skipped; an interrupted one
# is resumed. Usage: VITPE_DATA=/path/to/data scripts/cpu_recipe.sh [RUNS_DIR] [PE ...]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-runs}
shift || true
pes=("$@")
[ ${#pes[@]} -gt 0 ] || pes=(rope_mixed learnable)
for pe in "${pes[@]}"; do
  dir="$runs/c10_$pe"
  if [ -f "$dir/checkpoint.pt" ]; then
    done_epochs=$(wc -l < "$dir/metrics.jsonl")
    if [ "$done_epochs" -lt "$(python -c "import yaml; print(yaml.safe_load(open('$dir/config.yaml'))['train']['epochs'])")" ]; then
      python train.py --resume "$dir" --no-progress
    fi
  else
    python train.py --config configs/cifar10.yaml model.pe="$pe" out_dir="$dir" --no-progress
  fi
done
python eval.py "${pes[@]/#/$runs/c10_}" --resolutions 16,24,32,40,48,64 --pe-resize interpolate,extrapolate \
  --out "$runs/resolution" --plot-pe
