#!/usr/bin/env bash
# Resolution transfer that gains (RESULTS.md, "Resolution transfer: the remedies"), on the detail protocol
# (configs/cifar10_detail.yaml: train at 16 px with patch 2, test at 16-48 px, where up to 32 px every size adds
# real detail):
#   trained/<pe>_s<seed>              as trained, every PE of PES
#   augmented/<pe>_<aug>_s<seed>      trained with coordinate augmentation, each setting of AUGS, the PEs of AUG_PES
#   finetuned/<pe>_s<seed>_<px>_<mode> one epoch at FINETUNE_SIZES from trained/, positions interpolated or
#                                     extrapolated (configs/finetune_res.yaml)
# then every run evaluated at RESOLUTIONS in the interpolate, extrapolate, ntk and yarn modes (a PE without
# frequencies skips the last two, with the reason in the records) on the first EVAL_LIMIT test images; each
# EVAL_OPTIONS entry PE:NAME=VALUE also tests that PE's trained runs with a PE option changed (eval.py RUN@NAME=VALUE,
# e.g. lookhere:large_grid_slope=0.6, LookHere's lower slope for larger grids).
# Finished runs are skipped, interrupted ones resumed, finished evaluations reused: rerun the command to continue.
#
#   VITPE_DATA=/path/to/data [PYTHON=python] [JOBS=2] [SEEDS="0 1 2"] [PES="..."] [AUG_PES="..."] [AUGS="..."] \
#     [FINETUNE_SIZES="24 32"] [RESOLUTIONS=16,20,...] [EVAL_LIMIT=2000] [STAGES="train augment finetune evaluate"] \
#     [CONFIG=configs/cifar10_detail.yaml] [FINETUNE_CONFIG=configs/finetune_res.yaml] [EXTRA="key=value ..."] \
#     [EVAL_OPTIONS="pe:name=value ..."] [RECORDS=results/transfer] scripts/transfer.sh [RUNS_DIR]
#
# AUGS: name=key=value,key=value entries, each a setting of the PE options shift, jitter and rescale (DINOv3's
# released configs: rescale=2) and fuzzy (ViTAR's per-position offset, learnable only), or of crop_scale=MIN:MAX, the
# random-resized crop of the images (data.crop_scale, FixRes's remedy; any PE, learnable included). EXTRA overrides
# are added to every training (no spaces inside a value).
set -euo pipefail
export PYTHON=${PYTHON:-python}  # the interpreter to run (tests pass their own)
cd "$(dirname "$0")/.."
runs=${1:-runs/transfer}
export RUNS=$runs  # RECORDS=DIR keeps every finished run's records (scripts/keep_records.sh)
config=${CONFIG:-configs/cifar10_detail.yaml}
pes=(${PES-learnable sincos rope_axial rope_mixed rope_dinov3 cpb})
aug_pes=(${AUG_PES-sincos rope_axial rope_mixed rope_dinov3 cpb})
augs=(${AUGS-rescale2=rescale=2 shift_jitter=shift=0.25,jitter=1.5,rescale=2})
seeds=(${SEEDS:-0 1 2})
sizes=(${FINETUNE_SIZES:-24 32})
finetune_config=${FINETUNE_CONFIG:-configs/finetune_res.yaml}
extra=${EXTRA:-}
stages=" ${STAGES:-train augment finetune evaluate} "
jobs=${JOBS:-2}
source scripts/check_inputs.sh
source scripts/lanes.sh
source scripts/keep_records.sh
require_jobs JOBS "$jobs"
require_seeds SEEDS "${seeds[@]}"
require_pes PES 2 "${pes[@]}"
require_pes AUG_PES 2 "${aug_pes[@]}"
for aug in "${augs[@]}"; do
  [[ $aug =~ ^[a-z0-9_]+=(((shift|jitter|rescale|fuzzy)=[0-9.]+|crop_scale=[0-9.]+:[0-9.]+),?)+$ ]] || {
    echo "AUGS: '$aug' is not name=option=value[,option=value] with options shift, jitter, rescale, fuzzy" \
         "(PE options) or crop_scale=MIN:MAX (the images' random-resized crop)" >&2; exit 2; }
done
cores=$(nproc)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( cores / jobs > 0 ? cores / jobs : 1 ))}
mkdir -p "$runs/trained" "$runs/augmented" "$runs/finetuned"

trained=() augmented=() finetuned=()
for seed in "${seeds[@]}"; do for pe in "${pes[@]}"; do trained+=("$runs/trained/${pe}_s$seed"); done; done
if [[ $stages == *" train "* ]]; then
  train_all < <(for seed in "${seeds[@]}"; do for pe in "${pes[@]}"; do
    echo "$runs/trained/${pe}_s$seed $config model.pe=$pe train.seed=$seed $extra"
  done; done)
fi

for seed in "${seeds[@]}"; do for pe in "${aug_pes[@]}"; do for aug in "${augs[@]}"; do
  augmented+=("$runs/augmented/${pe}_${aug%%=*}_s$seed")
done; done; done
if [[ $stages == *" augment "* ]]; then
  train_all < <(for seed in "${seeds[@]}"; do for pe in "${aug_pes[@]}"; do for aug in "${augs[@]}"; do
    options=$(tr ',' '\n' <<< "${aug#*=}" |
      sed -E 's/^crop_scale=(.*):(.*)$/data.crop_scale=[\1,\2] data.crop_padding=0/; /^data\./!s/^/model.pe_options./' |
      tr '\n' ' ')
    echo "$runs/augmented/${pe}_${aug%%=*}_s$seed $config model.pe=$pe train.seed=$seed $options $extra"
  done; done; done)
fi

for run in "${trained[@]}"; do for px in "${sizes[@]}"; do for mode in interpolate extrapolate; do
  finetuned+=("$runs/finetuned/$(basename "$run")_${px}_$mode")
done; done; done
if [[ $stages == *" finetune "* ]]; then
  train_all < <(for run in "${trained[@]}"; do for px in "${sizes[@]}"; do for mode in interpolate extrapolate; do
    [ "$mode" = extrapolate ] && [[ $(basename "$run") == learnable_* ]] && continue  # a table cannot extrapolate
    seed=${run##*_s}
    echo "$runs/finetuned/$(basename "$run")_${px}_$mode $finetune_config model.init=run:$run" \
         "model.pe_resize=$mode train.img_sizes=[$px] train.seed=$seed $extra"
  done; done; done)
fi

if [[ $stages == *" evaluate "* ]]; then
  existing=()
  for run in "${trained[@]}" "${augmented[@]}" "${finetuned[@]}"; do
    run_finished "$run" && existing+=("$run")  # a run still training is evaluated once it finishes
  done
  for entry in ${EVAL_OPTIONS:-}; do  # PE:NAME=VALUE[,NAME=VALUE]: that PE's trained runs also tested so
    for run in "${trained[@]}"; do
      [[ $(basename "$run") == "${entry%%:*}"_s* ]] && run_finished "$run" && existing+=("$run@${entry#*:}")
    done
  done
  evaluate=("$PYTHON" eval.py --resolutions "${RESOLUTIONS:-16,20,24,28,32,40,48}"
            --pe-resize interpolate,extrapolate,ntk,yarn --out "$runs/resolution" --limit "${EVAL_LIMIT:-2000}")
  reuse_kept_sweep "$runs/resolution"
  evaluate_each "${evaluate[@]}" < <(printf '%s\n' "${existing[@]}")
  "${evaluate[@]}" "${existing[@]}"
  keep_sweep "$runs/resolution"
fi
