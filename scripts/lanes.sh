# Trainings and evaluations in JOBS parallel lanes, sourced by the experiment scripts (needs $jobs and $PYTHON).
#   train_all          reads lines "RUN_DIR CONFIG key=value ..." on stdin; trains (or resumes) JOBS of them at a time,
#                      each logging to RUN_DIR.log; a failed run stops the lane with one line naming its log
#   evaluate_each ...  reads run folders on stdin; runs "... RUN --plot-pe" for each, JOBS at a time, logging to
#                      RUN.eval.log (each run's records are cached, so one later call only gathers them)

train_all() {
  # trailing blanks are cut: xargs -L would join such a line with the next one
  sed 's/[[:space:]]*$//' | xargs -r -P "$jobs" -L 1 sh -c 'scripts/train_or_resume.sh "$0" "$@" >> "$0.log" 2>&1 || { echo "failed: $0 (see $0.log)" >&2; exit 255; }'
}

evaluate_each() {
  xargs -r -P "$jobs" -I RUN sh -c 'run=$1; shift
    "$@" "$run" --plot-pe > "$run.eval.log" 2>&1 || { echo "failed: $run (see $run.eval.log)" >&2; exit 255; }' \
  sh RUN "$@"
}
