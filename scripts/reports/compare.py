"""The 3-epoch comparison grid: accuracy, resolution sweeps, multi-resolution training, relbias scale, bias statistics."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Callable

from reports.records import SEED, SEEDS, markdown, mean_std, per_seed, resolution_table, site_of, sweep


# ------------------------------------------------------------------------------------------- the 3-epoch grid

def compare_records(root: Path, multires: bool) -> list[dict]:
    return [r for r in sweep(root / "results/compare/resolution.json") if r["run"].startswith("multires") == multires]


def compare_accuracy(root: Path) -> str:
    """The 3-epoch grid at its training size (32 px), per seed."""
    accs: dict[str, dict[int, float]] = defaultdict(dict)
    for r in compare_records(root, multires=False):
        if r["resolution"] == 32 and r["pe_resize"] == "interpolate":
            accs[r["pe"]][int(SEED.search(r["run"]).group(1))] = 100 * r["accuracy"]
    order = sorted(accs, key=lambda pe: -statistics.fmean(accs[pe].values()))
    return markdown(["`model.pe`", "site", "acc. at 32 px (%), seeds 0 / 1 / 2", "mean ± std"],
                    [[f"`{pe}`", site_of(pe), per_seed(accs[pe], SEEDS, 1), mean_std(list(accs[pe].values()))]
                     for pe in order])


def compare_resolution(root: Path) -> str:
    return resolution_table(compare_records(root, multires=False))


def compare_multires(root: Path) -> str:
    """Trained at 24-48 px (one size per batch) against 32 px only, for the two PEs given multi-resolution runs."""
    records = [r for r in sweep(root / "results/compare/resolution.json")
               if r["pe"] in ("rope_mixed", "separable") and r["pe_resize"] == "interpolate"]
    for r in records:
        r["pe"] = f"{r['pe']}, {'24–48' if r['run'].startswith('multires') else '32'} px"
    return resolution_table(records)


def relbias_scale16(root: Path) -> str:
    """Swin's table with ``scale: 16`` against the default and CPB, 3 epochs, interpolated, three seeds."""
    records = [r for r in sweep(root / "results/compare/resolution.json") if r["pe"] in ("relbias", "cpb")]
    scaled = sweep(root / "results/compare/relbias_scale16/resolution.json")
    records += [{**r, "pe": "relbias, scale 16"} for r in scaled]
    return resolution_table([r for r in records if r["pe_resize"] == "interpolate"])


#: This study's tables: name -> function of the repository root -> markdown (scripts/report.py).
TABLES: dict[str, Callable[[Path], str]] = {
    "compare-accuracy": compare_accuracy,
    "compare-resolution": compare_resolution,
    "compare-multires": compare_multires,
    "relbias-scale16": relbias_scale16,
}
