# What of a run is worth committing, kept where it survives the machine (sourced by the experiment scripts).
#   RECORDS=DIR    each finished run's config, metrics and init record (not its checkpoints) are copied to
#                  DIR/<the run's path below RUNS> as soon as it finishes, and a sweep's records when it is written;
#                  RUNS is the experiment's runs folder (the scripts export it); a sweep first takes back the
#                  evaluations kept there (reuse_kept_sweep). Unset: nothing is copied.
# A run folder lives on one machine's disk; with RECORDS=results/<experiment>, a long experiment spread over machines
# leaves every finished run in the repository, ready to commit, however it ends.

run_finished() {  # run_finished RUN_DIR: true when the run has a checkpoint and a metrics line for every epoch (its
  # config.yaml's train.epochs, or a baseline script's config.json's epochs)
  [ -f "$1/checkpoint.pt" ] && [ -f "$1/metrics.jsonl" ] || return 1
  local epochs
  epochs=$("${PYTHON:-python}" -c "import json, sys, yaml, pathlib
run = pathlib.Path(sys.argv[1])
print(yaml.safe_load(open(run / 'config.yaml'))['train']['epochs'] if (run / 'config.yaml').is_file()
      else json.load(open(run / 'config.json'))['epochs'])" "$1")
  [ "$(wc -l < "$1/metrics.jsonl")" -ge "$epochs" ]
}

kept_path() {  # kept_path PATH: where PATH's records go (its path below RUNS, or its name when outside RUNS)
  local runs=${RUNS%/}
  if [[ $1 == "$runs"/* ]]; then echo "$RECORDS/${1#"$runs"/}"; else echo "$RECORDS/$(basename "$1")"; fi
}

keep_records() {  # keep_records RUN_DIR: a finished training's records (and a baseline's own sweep)
  [ -n "${RECORDS:-}" ] || return 0
  local dest file
  dest=$(kept_path "$1")
  mkdir -p "$dest"
  for file in config.yaml config.json metrics.jsonl init.json resolution.json; do
    if [ -f "$1/$file" ]; then cp "$1/$file" "$dest/"; fi
  done
}

reuse_kept_sweep() {  # reuse_kept_sweep OUT_DIR: the kept per-run records of a sweep put back in OUT_DIR/runs/
  # (entries already there win), where eval.py looks for finished evaluations. eval.py reuses an entry only for the
  # same weights, config and settings, so on a fresh machine a run retrained to its committed weights (same config
  # and seed on a CPU) is not evaluated again, and anything else is.
  [ -n "${RECORDS:-}" ] || return 0
  local kept file
  kept=$(kept_path "$1")/runs
  [ -d "$kept" ] || return 0
  mkdir -p "$1/runs"
  for file in "$kept"/*.json; do
    if [ -f "$file" ] && [ ! -e "$1/runs/${file##*/}" ]; then cp "$file" "$1/runs/"; fi
  done
}

sweep_runs() {  # sweep_runs OUT_DIR: the names of the record files (in OUT_DIR/runs/) of the runs in OUT_DIR's sweep
  local sweep
  for sweep in "$1/resolution.json" "$1/length.json"; do
    if [ -f "$sweep" ]; then
      "${PYTHON:-python}" -c 'import json, sys
from vitpe.resolution.sweep import record_file
print("\n".join(sorted({record_file("", r["run"]).name for r in json.load(open(sys.argv[1]))})))' "$sweep"
    fi
  done
}

keep_sweep() {  # keep_sweep OUT_DIR: an eval.py sweep's per-run records (OUT_DIR/runs/<run>.json) and tables
  [ -n "${RECORDS:-}" ] || return 0
  local dest file name
  dest=$(kept_path "$1")
  mkdir -p "$dest/runs"
  for file in "$1"/length.*; do  # a pattern that matched nothing stays as written
    if [ -f "$file" ]; then cp "$file" "$dest/${file#"$1"/}"; fi
  done
  # the records of the runs this sweep holds, not every entry of OUT_DIR/runs/: an entry left there by an earlier
  # sweep (a run retrained since, say) does not replace the one kept for it
  while IFS= read -r name; do
    if [ -f "$1/runs/$name" ]; then cp "$1/runs/$name" "$dest/runs/"; fi
  done < <(sweep_runs "$1")
  # a resolution sweep joins the one kept before (a run evaluated again replaces its records), so that rerunning an
  # experiment for a few runs leaves every run in the kept tables, not only those few
  if [ -f "$1/resolution.json" ]; then
    "${PYTHON:-python}" scripts/merge_sweeps.py "$1/resolution.json" --into "$dest" > /dev/null
  fi
}
