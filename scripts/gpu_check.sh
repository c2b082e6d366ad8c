#!/usr/bin/env bash
# The project's GPU checks, as one script that fits a short GPU booking
# (every step has its own time limit, and a step that fails or runs out of time does not stop the next). Measured on
# an H200 (2026-12-04): tests 33 s, flex_ab 114 s, bench 25 s, one rotation_ab run 19 s (eight here); bench_compiled
# had not finished within 170 s; recipe is TRAIN_SECONDS plus about a minute. Give a call a part with STEPS:
#   1. tests: pytest tests/test_rotary_triton.py, whose CUDA test runs the Triton rotation on the GPU (half a minute)
#   2. python -m vitpe.bench --quick (a smoke run: a broken CUDA path shows in a minute)
#   3. rotation_ab: RoPE's eager rotation as the complex product against the Triton kernels, in the same rounds
#      (benchmarks/changes.py rotary_triton), training and inference, both dims, 32 and 64 px
#   4. profile: where an eager training step's time goes (benchmarks/profile_step.py), no PE, RoPE-Axial and
#      RoPE-Mixed at the recipe's dims, 32 px: the wall time per step against the GPU's busy time, the top operators
#   5. flex_ab: the logits-site PEs' bias as SDPA's float mask against FlexAttention's score_mod, in the same
#      rounds (benchmarks/changes.py flex_bias); recipe dims at 32 px, training and inference; default dims at 64 px,
#      training (answered on an H200: FlexAttention 1.26-1.37x slower; BENCHMARKS.md)
#   6. python -m vitpe.bench eager at 32 and 64 px, then --compile for three PEs at 32 px
#   7. graphed: one run's training throughput at the recipe's settings, eager and with train.compile_mode=
#      reduce-overhead (each training size's step recorded as CUDA graphs), the images on the device in both
#   8. the GPU recipe (configs/cifar10_gpu_10min.yaml) with one PE: a 2-epoch probe times an epoch, then one run with
#      as many epochs as fit in TRAIN_SECONDS (warm-up a twentieth of them); accuracy per epoch against wall time
#      is in its metrics.jsonl
# Then OUT/summary.md: the recipe's accuracy against wall time, the A/B and the benchmarks' tables.
#
#   VITPE_DATA=/path/to/data [OUT=runs/gpu_check] [DEVICE=cuda] [PE=rope_mixed] [TRAIN_SECONDS=420] \
#     [CONFIG=configs/cifar10_gpu_10min.yaml] [EXTRA="key=value ..."] [BENCH_ARGS="..."] \
#     [STEPS="tests bench_quick rotation_ab profile flex_ab bench bench_compiled graphed recipe"] scripts/gpu_check.sh
#
# Within 8 minutes of a GPU: STEPS="tests graphed bench recipe" TRAIN_SECONDS=150.
#
# DEVICE=cpu with tiny EXTRA/BENCH_ARGS runs the same steps on a CPU (how the script is tested).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
out=${OUT:-runs/gpu_check} device=${DEVICE:-cuda} pe=${PE:-rope_mixed} seconds=${TRAIN_SECONDS:-420}
config=${CONFIG:-configs/cifar10_gpu_10min.yaml} extra=${EXTRA:-} bench_args=${BENCH_ARGS:-}
all_steps="tests bench_quick rotation_ab profile flex_ab bench bench_compiled graphed recipe"
steps=" ${STEPS:-$all_steps} "
for s in $steps; do
  case " $all_steps " in *" $s "*) ;;
    *) echo "STEPS: unknown step '$s' (${all_steps// /, })" >&2; exit 2 ;;
  esac
done
[[ $seconds =~ ^[1-9][0-9]*$ ]] ||
  { echo "TRAIN_SECONDS must be a positive whole number of seconds, not '$seconds'" >&2; exit 2; }
[ -f "$config" ] || { echo "CONFIG $config does not exist" >&2; exit 2; }
source scripts/check_inputs.sh
[[ $steps == *" recipe "* ]] && require_pes PE 2 "$pe"
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then
  echo "OUT $out already holds files: give a new folder (each check is a fresh measurement)" >&2; exit 2
fi
mkdir -p "$out"
summary=$out/summary.md
echo "# GPU check, $(date -u +%FT%TZ)" > "$summary"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
  "$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; } > "$out/device.txt" 2>&1

step() {  # step NAME SECONDS command...: run with a time limit, log to OUT/NAME.log, note failures in the summary
  local name=$1 limit=$2
  [[ $steps == *" ${name%%_probe} "* ]] || return 1  # only the chosen STEPS (recipe_probe belongs to recipe)
  shift 2
  echo "$(date -u +%T) $name" >&2
  timeout --signal=TERM --kill-after=20 "$limit" "$@" > "$out/$name.log" 2>&1
  local code=$?
  [ $code -eq 0 ] ||
    echo "- step $name: exit $code$([ $code -eq 124 ] && echo ', out of time') (see $name.log)" >> "$summary"
  return $code
}

step tests 120 "$PYTHON" -m pytest -q -rs tests/test_rotary_triton.py
step bench_quick 150 "$PYTHON" -m vitpe.bench --device "$device" --quick --out "$out/bench_quick" $bench_args
ab_runs() {  # ab_runs CHANGE "DIMS PX train|infer" ...: benchmarks/changes.py's A/B of CHANGE for each run
  local change=$1 run dims px kind
  shift
  for run in "$@"; do
    read -r dims px kind <<< "$run"
    echo "== $dims dims"
    "$PYTHON" benchmarks/changes.py "$change" --dims "$dims" --px "$px" --batch 128 --rounds 9 --kind "$kind" \
      --device "$device" || return $?
  done
}
export -f ab_runs
export PYTHON device
# each A/B prints its overheads over none and new/old; 'train 32px rope_axial new/old 0.8' is the Triton kernels' gain
step rotation_ab 240 bash -c 'ab_runs rotary_triton "$@"' ab_runs "default 32 train" "default 32 infer" \
  "default 64 train" "default 64 infer" "recipe 32 train" "recipe 32 infer" "recipe 64 train" "recipe 64 infer"
step profile 150 bash -c 'for pe in none rope_axial rope_mixed; do
  "$PYTHON" benchmarks/profile_step.py "$pe" --device "$device" --rows 25 || exit; done'
# the same for the biases: 'train 32px relbias new/old 0.7' would be FlexAttention's gain
step flex_ab 180 bash -c 'ab_runs flex_bias "$@"' ab_runs "recipe 32 train" "recipe 32 infer" "default 64 train"

step bench 240 "$PYTHON" -m vitpe.bench --device "$device" --out "$out/bench" --no-text --no-data $bench_args
step bench_compiled 300 "$PYTHON" -m vitpe.bench --device "$device" --compile --sizes 32 \
  --pes learnable,rope_mixed,relbias --out "$out/bench_compiled" --no-text --no-data $bench_args

# one run's throughput, eager and with each size's step as CUDA graphs (train.compile_mode=reduce-overhead), the
# images kept on the device in both (data.on_device, the default on a GPU); two epochs each, the second is steady
export config out pe extra
step graphed 420 bash -c 'for mode in eager graphed; do
  options=(); [ "$mode" = graphed ] && options=(train.compile=true train.compile_mode=reduce-overhead)
  "$PYTHON" train.py --config "$config" out_dir="$out/throughput_$mode" train.device="$device" train.epochs=2 \
    train.warmup_epochs=1 model.pe="$pe" $extra "${options[@]}" --no-progress || exit; done'

# the probe's second epoch is the steady epoch time (the first pays start-up and kernel selection)
if step recipe_probe 240 "$PYTHON" train.py --config "$config" out_dir="$out/recipe_probe" train.device="$device" \
     train.epochs=2 train.warmup_epochs=1 model.pe="$pe" $extra --no-progress; then
  plan=$("$PYTHON" - "$out/recipe_probe/metrics.jsonl" "$seconds" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
epoch_s = records[1]["elapsed_s"] - records[0]["elapsed_s"]
epochs = max(2, int(float(sys.argv[2]) / epoch_s))
print(epochs, max(1, round(epochs / 20)), f"{epoch_s:.2f}")
PY
)
  read -r epochs warmup epoch_s <<< "$plan"
  echo "- probe: ${epoch_s} s per epoch -> $epochs epochs (warm-up $warmup) in ${seconds} s" >> "$summary"
  step recipe $((seconds * 3 / 2 + 60)) "$PYTHON" train.py --config "$config" out_dir="$out/recipe_$pe" \
    train.device="$device" train.epochs="$epochs" train.warmup_epochs="$warmup" model.pe="$pe" $extra --no-progress
fi

{
  if [ -f "$out/recipe_$pe/metrics.jsonl" ]; then
    echo; echo "## Recipe, $pe ($config)"; echo; echo "| epoch | test acc. (%) | wall (s) |"; echo "|---|---|---|"
    "$PYTHON" -c "
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f\"| {r['epoch']} | {100 * r['test_acc']:.2f} | {r['elapsed_s']:.0f} |\")" "$out/recipe_$pe/metrics.jsonl"
  fi
  if [ -f "$out/throughput_eager/metrics.jsonl" ]; then
    echo; echo "## One run's throughput, $pe ($config, two epochs)"; echo
    echo "| step | train img/s, second epoch | test acc. (%) after two epochs |"; echo "|---|---|---|"
    for mode in eager graphed; do
      [ -f "$out/throughput_$mode/metrics.jsonl" ] && "$PYTHON" -c "
import json, sys
r = [json.loads(line) for line in open(sys.argv[1])][-1]
print(f\"| {sys.argv[2]} | {r['img_per_s']:,.0f} | {100 * r['test_acc']:.2f} |\")" "$out/throughput_$mode/metrics.jsonl" "$mode"
    done
  fi
  for ab in "rotation_ab|RoPE's eager rotation: complex product (old) against the Triton kernels (new)" \
            "flex_ab|A bias as SDPA's float mask (old) against FlexAttention's score_mod (new)" \
            "profile|One eager training step: wall time against the GPU's busy time (profile.log has the operators)"; do
    log=$out/${ab%%|*}.log
    [ -f "$log" ] && { echo; echo "## ${ab#*|}"; echo; echo '```'
                       grep -E "^==|new/old|over none|ms per training step|GPU busy" "$log"; echo '```'; }
  done
  for name in bench bench_compiled bench_quick; do
    [ -f "$out/$name/bench.md" ] && { echo; echo "## $name"; echo; cat "$out/$name/bench.md"; }
  done
} >> "$summary"
echo "$(date -u +%T) done: $summary" >&2
