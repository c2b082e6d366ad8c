"""The CPU recipe's data points on a GPU: one run's accuracy against wall time, and four runs at once on one GPU."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Callable

from reports.records import MISSING, Run, markdown, read_run


def recipe_gpu(root: Path) -> str:
    """The one GPU recipe run: accuracy against wall time, every few epochs."""
    run = read_run(root / "results/recipe/gpu_h200/rope_mixed_s0")
    shown = [r for r in run.records if r["epoch"] in (1, 5, 10, 15, 20) or r is run.records[-1]]
    return markdown(["epoch", *(str(r["epoch"]) for r in shown)],
                    [["test acc. (%)", *(f"{100 * r['test_acc']:.1f}" for r in shown)],
                     ["wall (s)", *(f"{r['elapsed_s']:.0f}" for r in shown)]])


def _test_acc_by(run: Run, seconds: float) -> str:
    """The test accuracy of the last evaluated epoch that ended within ``seconds`` of wall time."""
    done = [r for r in run.records if r["elapsed_s"] <= seconds and "test_acc" in r]
    return f"{100 * done[-1]['test_acc']:.1f}" if done else MISSING


def recipe_gpu_four(root: Path) -> str:
    """The GPU recipe with and without mixup/cutmix, two PEs, four runs at once on one GPU."""
    rows = []
    for folder in sorted((root / "results/recipe/gpu_h200_four_at_once").iterdir()):
        run = read_run(folder)
        data = run.config["data"]
        rows.append([f"`{run.pe}`", f"{data['mixup']} / {data['cutmix']}", str(run.last["epoch"]),
                     f"{run.last['elapsed_s']:.0f}", f"{statistics.median(r['img_per_s'] for r in run.records):,.0f}",
                     *(_test_acc_by(run, t) for t in (60, 120, 180)), f"{run.accuracy:.1f}"])
    return markdown(["PE", "mixup / cutmix", "epochs", "wall (s)", "train img/s (median epoch)",
                     "test acc. (%) by 60 s", "by 120 s", "by 180 s", "at the end"], rows)


#: This study's tables: name -> function of the repository root -> markdown (scripts/report.py).
TABLES: dict[str, Callable[[Path], str]] = {
    "recipe-gpu": recipe_gpu,
    "recipe-gpu-four": recipe_gpu_four,
}
