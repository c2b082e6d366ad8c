"""How large the trained attention biases of logits-site PEs are, next to how far AdamW could have moved them.

Usage: python scripts/bias_stats.py RUN_DIR [...] [--json FILE]

For each run (its ``checkpoint.pt``): per layer, the bias at the training grid, ``model.pe.bias(grid)`` of shape
(depth, nH, N, N), summarised as its spread over keys (std over the key axis, averaged over queries and heads) and its
range (max - min). Then the step bound: AdamW moves a parameter by about ``lr`` per step, so a learned table entry can
move by at most the sum of the learning rates of the run's schedule (rebuilt from its config, with the steps per
epoch read from its ``metrics.jsonl``), and two entries can drift apart by twice that. ``--json FILE`` also writes the
figures as a record (docs/results/bias_growth.md's table is generated from results/compare/bias_stats.json).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from vitpe.atomic_files import write_text_atomic
from vitpe.config import config_from_dict
from vitpe.engine.optimizer import build_scheduler
from vitpe.loading.checkpoint import CheckpointError, build_from_checkpoint, load_checkpoint


def summed_learning_rate(config_dict: dict, steps_per_epoch: int) -> float:
    """Sum of the learning rates of every optimiser step of the run's schedule."""
    config = config_from_dict(config_dict)
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=config.train.lr)
    scheduler = build_scheduler(config, optimizer, steps_per_epoch)
    total = 0.0
    for step in range(config.train.epochs * steps_per_epoch):
        scheduler.step_update(step)  # the lr the training loop's step ``step`` runs with
        total += optimizer.param_groups[0]["lr"]
    return total


def bias_stats(run: Path) -> dict:
    ckpt = load_checkpoint(run)
    model = build_from_checkpoint(ckpt)
    if model.pe.site != "logits":
        raise ValueError(f"{run}: PE {model.pe.name!r} has no attention bias (site {model.pe.site!r})")
    with torch.no_grad():
        bias = model.pe.bias(model.pe.grid)
    bias = bias if bias.dim() == 4 else bias[None]  # (depth or 1 when shared, nH, N, N)
    first_epoch = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    return {"run": run.name, "pe": model.pe.name,
            "std_over_keys": bias.std(-1).mean((-1, -2)).tolist(),
            "range": (bias.flatten(1).amax(1) - bias.flatten(1).amin(1)).tolist(),
            "summed_lr": summed_learning_rate(ckpt["config"], first_epoch["step"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, help="also write the figures to this file (a list of records)")
    args = parser.parse_args(argv)
    try:
        stats = [bias_stats(run) for run in args.runs]
    except (CheckpointError, ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("| run | PE | bias spread over keys (std) per layer | max - min per layer | summed lr (range bound 2x) |")
    print("|---|---|---|---|---|")
    for s in stats:
        spread = ", ".join(f"{v:.2f}" for v in s["std_over_keys"])
        ranges = ", ".join(f"{v:.1f}" for v in s["range"])
        print(f"| {s['run']} | {s['pe']} | {spread} | {ranges} | {s['summed_lr']:.2f} ({2 * s['summed_lr']:.1f}) |")
    if args.json:
        write_text_atomic(json.dumps(stats, indent=1) + "\n", args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
