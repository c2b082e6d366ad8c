# Trainings and evaluations in JOBS parallel lanes, sourced by the experiment scripts (needs $jobs and $PYTHON).
#   in_lanes XARGS_ARGS ...  runs "xargs -r -P JOBS XARGS_ARGS" on the lines of stdin, the lanes in a process group
#                      of their own: when a lane fails (its command exits 255, which stops xargs) or the script gets
#                      SIGINT / SIGTERM, every lane still running is sent SIGTERM (a training writes its checkpoint
#                      first) and the script waits for them, so no training goes on unseen after the script ends; the
#                      same command resumes them. Call it in the script's own shell, `in_lanes ... < <(PRODUCER)`:
#                      at the end of a pipeline it would run in a subshell that a SIGTERM sent to the script misses.
#   train_all          reads lines "RUN_DIR CONFIG key=value ..." on stdin; trains (or resumes) JOBS of them at a time,
#                      each logging to RUN_DIR.log; a failed run stops the lanes with one line naming its log
#   evaluate_each ...  reads run folders on stdin; runs "... RUN --plot-pe" for each, JOBS at a time, logging to
#                      RUN.eval.log (each run's records are cached, so one later call only gathers them)

in_lanes() {
  set -m  # the lanes' own process group: one signal reaches each of them, also after xargs itself has ended
  xargs -r -P "$jobs" "$@" < <(sed 's/[[:space:]]*$//') &  # trailing blanks cut: xargs -L would join the next line
  local lanes=$! status=0
  set +m
  trap "stop_lanes $lanes 'stopped (SIGINT)'; exit 130" INT
  trap "stop_lanes $lanes 'stopped (SIGTERM)'; exit 143" TERM
  wait "$lanes" || status=$?
  trap - INT TERM
  if [ "$status" -ne 0 ] && kill -0 -- "-$lanes" 2>/dev/null; then stop_lanes "$lanes" "a lane failed"; fi
  return "$status"
}

stop_lanes() {  # stop_lanes PGID WHY: SIGTERM to every process of the lanes' group, then wait until none is left
  echo "$2: stopping the lanes still running (a training writes its checkpoint first); the same command" \
       "resumes them" >&2
  kill -TERM -- "-$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true  # xargs, if it was still running (a zombie would count as a member below)
  while kill -0 -- "-$1" 2>/dev/null; do sleep 1; done
}

train_all() {
  in_lanes -L 1 sh -c 'scripts/train_or_resume.sh "$0" "$@" >> "$0.log" 2>&1 || { echo "failed: $0 (see $0.log)" >&2; exit 255; }'
}

evaluate_each() {
  in_lanes -I RUN sh -c 'run=$1; shift
    "$@" "$run" --plot-pe > "$run.eval.log" 2>&1 || { echo "failed: $run (see $run.eval.log)" >&2; exit 255; }' \
  sh RUN "$@"
}
