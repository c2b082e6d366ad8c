#!/usr/bin/env bash
# Resolution transfer on real photographs (RESULTS.md, "Resolution transfer on real photographs"): scripts/transfer.sh
# with Imagenette's settings --
#   trained/<pe>_s<seed>                 configs/imagenette.yaml (64 px, patch 8) with every 2D PE of PES
#   augmented/<pe>_rescale2_s<seed>      the same with DINOv3's coordinate rescale (rescale=2), the PEs of AUG_PES
#   finetuned/<pe>_s<seed>_128_<mode>    one epoch at 128 px (configs/imagenette_finetune.yaml), interpolated and
#                                        extrapolated
# then every run evaluated on the whole validation set at 48-160 px in the interpolate, extrapolate, ntk and yarn modes.
# Each finished run's records go to RECORDS (default results/imagenette) as it finishes; rerun to continue. Any of
# transfer.sh's settings can be given to change these defaults (STAGES="train" to train only, SEEDS, JOBS, ...).
#
#   VITPE_DATA=/path/to/data [JOBS=2] [SEEDS="0 1 2"] [PES="..."] [STAGES="train augment finetune evaluate"] \
#     scripts/imagenette.sh [RUNS_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
export CONFIG=${CONFIG:-configs/imagenette.yaml} FINETUNE_CONFIG=${FINETUNE_CONFIG:-configs/imagenette_finetune.yaml}
export PES=${PES-none learnable separable sincos rope_axial rope_mixed relbias cpb alibi peg}
export AUG_PES=${AUG_PES-rope_mixed cpb} AUGS=${AUGS-rescale2=rescale=2}
export FINETUNE_SIZES=${FINETUNE_SIZES:-128} RESOLUTIONS=${RESOLUTIONS:-48,64,80,96,112,128,144,160}
export EVAL_LIMIT=${EVAL_LIMIT:-0} RECORDS=${RECORDS-results/imagenette}
exec scripts/transfer.sh "${1:-runs/imagenette}"
