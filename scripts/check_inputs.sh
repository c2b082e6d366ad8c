# Checks of the experiment scripts' settings, sourced by them: a bad JOBS, SEEDS or PE name stops the script before
# its first training, in one line naming the setting, instead of an hour later in one run's log (or never: xargs
# reads JOBS=0 as "all at once").
#   require_jobs NAME VALUE [WHAT]   a whole number >= 1 (of WHAT: trainings at a time unless given)
#   require_seeds NAME SEED ...      whole numbers
#   require_pes NAME DIMS PE ...     registered PEs that work on DIMS-D grids (2: images, 1: sequences)

require_jobs() {
  [[ $2 =~ ^[1-9][0-9]*$ ]] || {
    echo "$1 must be a whole number >= 1 (${3:-trainings at a time}), not '$2'" >&2; exit 2; }
}

require_seeds() {
  local name=$1 seed
  shift
  for seed in "$@"; do
    [[ $seed =~ ^[0-9]+$ ]] || { echo "$name: '$seed' is not a whole number (e.g. $name=\"0 1 2\")" >&2; exit 2; }
  done
}

require_pes() {
  local name=$1 dims=$2
  shift 2
  [ $# -gt 0 ] || return 0
  "$PYTHON" - "$name" "$dims" "$@" <<'PY' || exit 2
import sys

import vitpe.pe

name, dims, pes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for pe in pes:
    try:
        grid_dims = vitpe.pe.get(pe).grid_dims
    except ValueError as err:
        sys.exit(f"{name}: {err}")
    if dims not in grid_dims:
        sys.exit(f"{name}: {pe} does not work on {dims}D grids (it works on {' and '.join(f'{d}D' for d in grid_dims)})")
PY
}
