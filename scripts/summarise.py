"""Final accuracy of finished runs as a markdown table: one row per config (runs differing only in seed are grouped:
mean ± std, the number of seeds), with training wall time. Usage: python scripts/summarise.py RUN_DIR [...] [--by KEY]
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
    args = parser.parse_args(argv)
    groups: dict[str, list] = defaultdict(list)
    for run in args.runs:
        if not (run / "metrics.jsonl").is_file() or not (run / "metrics.jsonl").read_text().strip():
            print(f"skipping {run}: no finished epoch yet", file=sys.stderr)
            continue
        config, last = load(run)
        groups[group_key(config)].append((run, config, last))
    print(f"| {args.label} | seeds | epochs | accuracy (%) | train wall (min) |")
    print("|---|---|---|---|---|")
    for members in groups.values():
        node = members[0][1]
        for part in args.label.split("."):
            node = node[part]
        accs = [100 * m[2]["test_acc"] for m in members]
        spread = f" ± {statistics.stdev(accs):.1f}" if len(accs) > 1 else ""
        minutes = statistics.fmean(m[2]["elapsed_s"] for m in members) / 60
        print(f"| {node} | {len(members)} | {members[0][2]['epoch']} | {statistics.fmean(accs):.1f}{spread} | "
              f"{minutes:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
