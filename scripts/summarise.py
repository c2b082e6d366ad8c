"""Final accuracy of finished runs as a markdown table: one row per config (runs differing only in seed are grouped:
mean ± std, the number of seeds), with wall time (training + per-epoch evaluation). Runs short of their planned epochs
are left out, with a note on stderr. Folders written by scripts/timm_baseline.py form a row of their own, and every
row's wall time is then also given relative to theirs.
Usage: python scripts/summarise.py RUN_DIR [...] [--label KEY] [--best N]. With ``--best N`` it prints only the labels
of the N best groups (highest mean accuracy), one per line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import yaml

from vitpe.cli.arg_types import non_negative_int
from vitpe.config import group_key

BASELINE = "timm plain loop"


def load(run: Path) -> tuple[dict, dict, int | None]:
    """(config, last metrics record, planned epochs or None) of a run folder; a timm baseline's config is
    ``{"baseline": ...}``."""
    if (run / "config.yaml").is_file():
        config = yaml.safe_load((run / "config.yaml").read_text())
        planned = (config.get("train") or {}).get("epochs")
    else:
        baseline = json.loads((run / "config.json").read_text())
        config, planned = {"baseline": baseline["baseline"]}, baseline.get("epochs")
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    return config, last, planned


def label_of(config: dict, dotted: str) -> str:
    if "baseline" in config:
        return config["baseline"]
    node = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(f"--label {dotted}: a run's config has no {part!r} there (keys such as model.pe, "
                           f"train.seed)")
        node = node[part]
    return node


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--label", default="model.pe", help="dotted config key naming a row (default model.pe)")
    parser.add_argument("--best", type=non_negative_int, default=0, help="print the labels of the N best groups only")
    args = parser.parse_args(argv)
    groups: dict[str, list] = defaultdict(list)
    for run in args.runs:
        if not run.is_dir():
            print(f"skipping {run}: no such run folder", file=sys.stderr)
            continue
        if not (run / "metrics.jsonl").is_file() or not (run / "metrics.jsonl").read_text().strip():
            print(f"skipping {run}: no finished epoch yet", file=sys.stderr)
            continue
        config, last, planned = load(run)
        if planned is not None and last["epoch"] < planned:  # still training, or cut off: not a result yet
            print(f"skipping {run}: unfinished (epoch {last['epoch']} of {planned})", file=sys.stderr)
            continue
        groups[config["baseline"] if "baseline" in config else group_key(config)].append((run, config, last))
    rows = []
    try:
        labels = [label_of(members[0][1], args.label) for members in groups.values()]
    except KeyError as err:
        print(f"error: {err.args[0]}", file=sys.stderr)
        return 2
    for label, members in zip(labels, groups.values()):
        accs = [100 * m[2]["test_acc"] for m in members]
        minutes = [m[2]["elapsed_s"] / 60 for m in members]
        rows.append({"label": label, "seeds": len(members),
                     "epochs": members[0][2]["epoch"], "mean": statistics.fmean(accs),
                     "std": statistics.stdev(accs) if len(accs) > 1 else None, "minutes": statistics.fmean(minutes),
                     "minutes_std": statistics.stdev(minutes) if len(minutes) > 1 else None})
    if args.best:
        for row in sorted(rows, key=lambda r: -r["mean"])[:args.best]:
            print(row["label"])
        return 0
    base = next((r for r in rows if r["label"] == BASELINE), None)
    print(f"| {args.label} | seeds | epochs | accuracy (%) | wall (min) |" + (" wall / timm |" if base else ""))
    print("|---|---|---|---|---|" + ("---|" if base else ""))
    for r in rows:
        spread = f" ± {r['std']:.1f}" if r["std"] is not None else ""
        wall = f"{r['minutes']:.1f}" + (f" ± {r['minutes_std']:.1f}" if r["minutes_std"] is not None else "")
        ratio = f" {r['minutes'] / base['minutes']:.2f} |" if base else ""
        print(f"| {r['label']} | {r['seeds']} | {r['epochs']} | {r['mean']:.1f}{spread} | {wall} |{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
