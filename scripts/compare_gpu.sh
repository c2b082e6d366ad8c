#!/usr/bin/env bash
# The PE comparison on one GPU: every PE x 3 seeds with configs/cifar10_gpu_grid.yaml, 16 trainings at a time (one CPU
# thread each, all on the one GPU, so its idle gaps between one run's kernels are filled by the others), then the
# multi-resolution runs and all evaluations. Resumable like scripts/compare.sh, which it calls.
# Usage: VITPE_DATA=/path/to/data [JOBS=16] scripts/compare_gpu.sh [RUNS_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${CONFIG:-configs/cifar10_gpu_grid.yaml} SEEDS=${SEEDS:-"0 1 2"} JOBS=${JOBS:-16} OMP_NUM_THREADS=1 \
  exec scripts/compare.sh "${1:-runs/compare_gpu}"
