#!/usr/bin/env bash
# Reproduce the resolution table of the first CPU recipe (RESULTS.md): train configs/cifar10_8ep.yaml with each PE
# given (default: the six of the table), then evaluate the runs across resolutions. Runs that already finished are
# skipped; an interrupted one is resumed. Usage: VITPE_DATA=/path/to/data scripts/cpu_recipe.sh [RUNS_DIR] [PE ...]
set -euo pipefail
export PYTHON=${PYTHON:-python}  # the interpreter to run (tests pass their own)
cd "$(dirname "$0")/.."
runs=${1:-runs}
shift || true
pes=("$@")
[ ${#pes[@]} -gt 0 ] || pes=(learnable sincos rope_axial rope_mixed relbias cpb)
source scripts/check_inputs.sh
require_pes "a PE argument" 2 "${pes[@]}"
for pe in "${pes[@]}"; do
  scripts/train_or_resume.sh "$runs/c10_$pe" configs/cifar10_8ep.yaml model.pe="$pe"
done
"$PYTHON" eval.py "${pes[@]/#/$runs/c10_}" --resolutions 16,24,32,40,48,64 --pe-resize interpolate,extrapolate \
  --out "$runs/resolution" --plot-pe
