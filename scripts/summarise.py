"""Final accuracy of finished runs as a markdown table: one row per config (runs differing only in seed are grouped:
mean ± std, the number of seeds), with training wall time.
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

from vitpe.config import group_key


def load(run: Path) -> tuple[dict, dict]:
    config = yaml.safe_load((run / "config.yaml").read_text())
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    return config, last


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--label", default="model.pe", help="dotted config key naming a row (default model.pe)")
    parser.add_argument("--best", type=int, default=0, help="print the labels of the N best groups only")
    args = parser.parse_args(argv)
    groups: dict[str, list] = defaultdict(list)
    for run in args.runs:
        if not (run / "metrics.jsonl").is_file() or not (run / "metrics.jsonl").read_text().strip():
            print(f"skipping {run}: no finished epoch yet", file=sys.stderr)
            continue
        config, last = load(run)
        groups[group_key(config)].append((run, config, last))
    rows = []
    for members in groups.values():
        node = members[0][1]
        for part in args.label.split("."):
            node = node[part]
        accs = [100 * m[2]["test_acc"] for m in members]
        rows.append({"label": node, "seeds": len(members), "epochs": members[0][2]["epoch"],
                     "mean": statistics.fmean(accs), "std": statistics.stdev(accs) if len(accs) > 1 else None,
                     "minutes": statistics.fmean(m[2]["elapsed_s"] for m in members) / 60})
    if args.best:
        for row in sorted(rows, key=lambda r: -r["mean"])[:args.best]:
            print(row["label"])
        return 0
    print(f"| {args.label} | seeds | epochs | accuracy (%) | train wall (min) |")
    print("|---|---|---|---|---|")
    for r in rows:
        spread = f" ± {r['std']:.1f}" if r["std"] is not None else ""
        print(f"| {r['label']} | {r['seeds']} | {r['epochs']} | {r['mean']:.1f}{spread} | {r['minutes']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
