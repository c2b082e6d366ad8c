#!/usr/bin/env bash
# Train a run into OUT_DIR unless it already finished; resume it when it stopped part-way.
# Usage: scripts/train_or_resume.sh OUT_DIR CONFIG [key=value ...]
set -euo pipefail
out=$1 config=$2
shift 2
if [ -f "$out/checkpoint.pt" ]; then
  epochs=$(python -c "import yaml, sys; print(yaml.safe_load(open(sys.argv[1]))['train']['epochs'])" "$out/config.yaml")
  if [ "$(wc -l < "$out/metrics.jsonl")" -lt "$epochs" ]; then
    python train.py --resume "$out" --no-progress
  fi
else
  python train.py --config "$config" out_dir="$out" --no-progress "$@"
fi
