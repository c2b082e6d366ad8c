"""Combine the records of resolution sweeps run at different times (e.g. seeds 0-1 published earlier and seed 2 added
later, whose checkpoints no longer sit side by side) into one report: resolution.json / .csv / .md / .png.

    python scripts/merge_sweeps.py results/compare/resolution.json runs/compare_s2/resolution/resolution.json \\
        --out results/compare [--title "..."]
    python scripts/merge_sweeps.py runs/transfer/resolution/runs/*.json --into results/transfer/resolution

With ``--into DIR`` the sweep already kept in DIR is updated rather than replaced: its resolution.json is the base,
a run in the inputs replaces the base's records of the same name (it was evaluated again) and any other joins, and
the tables are rewritten under the title of DIR's resolution.md. scripts/keep_records.sh keeps every sweep this way,
so an experiment rerun for a few of its runs adds them to the kept tables instead of leaving only those few.

An input is a sweep's resolution.json or one run's record file (eval.py's DIR/runs/<run>.json, which
scripts/keep_records.sh keeps under RECORDS), so a sweep whose runs were evaluated on several machines joins too.

Runs are grouped by name with the seed suffix removed (``rope_mixed_s2`` joins ``rope_mixed_s0``; a name without a
suffix counts as seed 0), so each input must follow compare.sh's ``<name>_s<seed>`` naming and hold one config per
name. The same run name in two inputs is an error (it would count one seed twice); so are differing sample sizes
(``n``) in one cell, which would average evaluations on different test images.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from vitpe.resolution import write_reports
from vitpe.resolution.report import SEED_SUFFIX


def read_records(path: Path) -> list[dict]:
    """The records of a sweep's resolution.json or of one run's record file (eval.py's DIR/runs/<run>.json)."""
    try:
        loaded = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a readable resolution.json ({err})") from None
    return loaded["records"] if isinstance(loaded, dict) and "records" in loaded else loaded


def merge(paths: list[Path], base: list[dict] | None = None) -> list[dict]:
    """The records of every file, each with a ``group``: its run name without the seed suffix. ``base``'s records
    (a kept sweep) join them, but for the runs the files hold again."""
    records, owner = [], {}
    for path in paths:
        for record in read_records(path):
            if owner.setdefault(record["run"], path) != path:
                raise ValueError(f"run {record['run']!r} is in both {owner[record['run']]} and {path}; "
                                 f"a seed must be counted once")
            records.append(record)
    records += [record for record in base or [] if record["run"] not in owner]
    records = [{**record, "group": SEED_SUFFIX.sub("", record["run"])} for record in records]
    sizes = defaultdict(set)
    for r in records:
        if r["accuracy"] is not None:
            sizes[(r["group"], r["pe_resize"], str(r["resolution"]))].add(r["n"])
    mixed = [key for key, ns in sizes.items() if len(ns) > 1]
    if mixed:
        raise ValueError(f"cell {mixed[0]} averages evaluations of different sizes {sorted(sizes[mixed[0]])}; "
                         f"evaluate every run with the same --limit")
    return records


def kept_sweep(folder: Path) -> tuple[list[dict], str | None]:
    """The records of the report in ``folder`` and its heading; none (and no heading) where it holds none yet."""
    if not (folder / "resolution.json").exists():
        return [], None
    try:
        records = read_records(folder / "resolution.json")
        table = folder / "resolution.md"
        heading = table.read_text().partition("\n")[0] if table.exists() else ""
    except (ValueError, OSError) as err:
        raise ValueError(f"{err}; restore it (git checkout) or use --out") from None
    return records, heading[2:] if heading.startswith("# ") else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", nargs="+", type=Path, help="resolution.json files or eval.py's per-run records")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--out", type=Path, help="write a new report of the inputs here")
    target.add_argument("--into", type=Path, help="update the report kept here with the inputs")
    parser.add_argument("--title", help="the report's heading (default: --into's own, else a generic one)")
    args = parser.parse_args(argv)
    try:
        base, title = kept_sweep(args.into) if args.into else ([], None)
        records = merge(args.records, base)
    except (ValueError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    title = args.title or title or "Accuracy against test resolution"
    for path in write_reports(records, args.into or args.out, "resolution", title):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
