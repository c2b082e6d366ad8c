"""The tables of the Imagenette study (RESULTS.md, "Resolution transfer on real photographs"), from its committed
records: the runs of ``configs/imagenette.yaml`` under ``results/imagenette/trained/`` and the sweep
``results/imagenette/resolution/resolution.json`` (``scripts/imagenette.sh``)."""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Callable

from reports.machines import machine_cpu, machine_letters
from reports.records import MISSING, markdown, mean_std, per_seed, read_run, resolution_table, sweep
from vitpe.resolution.report import gains_table, paired_gains

TRAINED = "results/imagenette/trained"
SWEEP = "results/imagenette/resolution/resolution.json"
SEEDS = (0, 1, 2)
THREADS = re.compile(r"(\d+) threads?$")


def finished_runs(root: Path):
    folder = root / TRAINED
    runs = [read_run(f) for f in sorted(folder.iterdir()) if (f / "metrics.jsonl").is_file()] if folder.is_dir() else []
    return [r for r in runs if r.finished]


def threads_of(run) -> str:
    """The thread counts the run's epochs ran with, from each record's machine line (e.g. "1, 2")."""
    counts = sorted({match.group(1) for m in run.machines if (match := THREADS.search(m))}, key=int)
    return ", ".join(counts) or "not recorded"


def imagenette_recipe(root: Path) -> str:
    """Each PE with the Imagenette recipe: validation accuracy at its 64 px per seed, mean ± std, wall time and
    training throughput, the machine."""
    runs = finished_runs(root)
    if not runs:
        return f"{MISSING} No run of `configs/imagenette.yaml` has finished yet (`{TRAINED}/`).\n"
    letter = machine_letters(r.machines for r in runs)
    by_pe: dict[str, list] = defaultdict(list)
    for run in runs:
        by_pe[run.pe].append(run)
    rows = []
    for pe, group in sorted(by_pe.items(), key=lambda item: -statistics.fmean(r.accuracy for r in item[1])):
        speeds = [statistics.fmean(e["img_per_s"] for e in r.records) for r in group]
        rows.append([f"`{pe}`", per_seed({r.seed: r.accuracy for r in group}, SEEDS),
                     mean_std([r.accuracy for r in group]), len(group),
                     " / ".join(f"{r.minutes:.0f}" for r in group), " / ".join(f"{s:.0f}" for s in speeds),
                     " / ".join(f"{letter[r.machines]} ({threads_of(r)})" for r in group)])
    cpus = {letter[m]: machine_cpu(m) or "not recorded" for m in letter}  # threads are in the column
    legend = "; ".join(f"{key}: {cpu}" for key, cpu in sorted(cpus.items()))
    return markdown(["PE", "val. acc. (%) at 64 px, seeds 0 / 1 / 2", "mean ± std", "seeds", "wall (min)",
                     "train img/s (epochs' mean)", "machine (threads)"], rows) + f"\nMachines: {legend}.\n"


def imagenette_resolution(root: Path) -> str:
    """The recipe's models on the whole validation set at 48-160 px in every mode, mean ± std over seeds, then each
    run's change against its own 64 px accuracy (the FixRes gain where it is positive)."""
    path = root / SWEEP
    if not path.is_file():
        return f"{MISSING} No sweep committed yet (`{SWEEP}`).\n"
    records = [r for r in sweep(path) if "_s" in r["run"] and "_128_" not in r["run"] and "rescale" not in r["run"]]
    possible = {(r["pe"], r["pe_resize"]) for r in records if r["accuracy"] is not None}
    records = [r for r in records if (r["pe"], r["pe_resize"]) in possible]  # no rows of n/a (cpb has no ntk)
    runs_per_pe: dict[str, set] = defaultdict(set)
    for record in records:
        runs_per_pe[record["pe"]].add(record["run"])
    note = "Seeds per row: " + ", ".join(f"`{pe}` {len(runs)}" for pe, runs in sorted(runs_per_pe.items())) + "."
    gains = gains_table(paired_gains(records, "resolution"), "resolution")
    return resolution_table(records) + f"\n{note}\n\n" + gains


def imagenette_short(root: Path) -> str:
    """The README's line: each swept PE's validation accuracy at its 64 px, at its best size and at 160 px (2.5x),
    interpolated, with the seeds it stands on."""
    path = root / SWEEP
    records = [r for r in sweep(path) if r["pe_resize"] == "interpolate" and r["accuracy"] is not None and
               "_128_" not in r["run"] and "rescale" not in r["run"]] if path.is_file() else []
    if not records:
        return f"{MISSING} not swept yet.\n"
    by_pe: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        by_pe[r["pe"]][int(r["resolution"])].append(100 * r["accuracy"])
    parts = []
    for pe, sizes in sorted(by_pe.items()):
        means = {size: statistics.fmean(values) for size, values in sizes.items()}
        best = max(means, key=means.get)
        seeds = len(sizes[64])
        parts.append(f"`{pe}` {means[64]:.1f}% at 64 px, {means[best]:.1f}% at {best} px, {means[max(means)]:.1f}% at "
                     f"{max(means)} px ({seeds} seed{'s' if seeds > 1 else ''})")
    return "Imagenette (`configs/imagenette.yaml`, trained at 64 px, positions interpolated): " + "; ".join(parts) + \
        ".\n"


TABLES: dict[str, Callable[[Path], str]] = {
    "imagenette-recipe": imagenette_recipe,
    "imagenette-resolution": imagenette_resolution,
    "imagenette-short": imagenette_short,
}
