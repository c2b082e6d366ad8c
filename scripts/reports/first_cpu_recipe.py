"""The first CPU recipe (results/cpu_recipe/): accuracy and resolution sweep."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Callable

from reports.records import markdown, read_flat_run, resolution_table, sweep


# -------------------------------------------------------------------------------------- the first CPU recipe
CPU_RECIPE_PES = ("learnable", "rope_mixed", "sincos", "rope_axial", "relbias", "cpb")


def cpu_recipe_accuracy(root: Path) -> str:
    folder = root / "results/cpu_recipe"
    rows = []
    for pe in CPU_RECIPE_PES:
        run = read_flat_run(folder, pe)
        rate = statistics.median(r["img_per_s"] for r in run.records)
        rows.append([f"`{pe}`", f"{run.accuracy:.1f}", f"{run.minutes:.0f}", f"{rate:.0f}"])
    return markdown(["`model.pe`", "test acc. (%), epoch 8", "wall (min), train + eval", "train img/s (median)"], rows)


def cpu_recipe_resolution(root: Path) -> str:
    return resolution_table(sweep(root / "results/cpu_recipe/resolution.json"))


#: This study's tables: name -> function of the repository root -> markdown (scripts/report.py).
TABLES: dict[str, Callable[[Path], str]] = {
    "cpu-recipe-accuracy": cpu_recipe_accuracy,
    "cpu-recipe-resolution": cpu_recipe_resolution,
}
