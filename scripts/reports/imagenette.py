"""The tables of the Imagenette study (RESULTS.md, "Resolution transfer on real photographs"), from its committed
records (``scripts/imagenette.sh``): the recipe, ``configs/imagenette.yaml``, under ``results/imagenette/`` (runs in
``trained/``, the sweep in ``resolution/resolution.json``), and the ten-PE grid at its budget,
``configs/imagenette_grid.yaml``, under ``results/imagenette/grid/`` in the same layout."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Callable

from reports.machines import cpu_legend, machine_letters, thread_counts
from reports.records import MISSING, SEEDS, markdown, mean_std, per_seed, read_run, resolution_table, sweep
from reports.transfer import TRANSFER_STAGES, remedies_table, transfer_records, transfer_remedy
from vitpe.resolution.report import gains_table, paired_gains

RECIPE = ("results/imagenette", "configs/imagenette.yaml")
GRID = ("results/imagenette/grid", "configs/imagenette_grid.yaml")
TRAINING_SIZE = 64
#: The sizes of the grid's ranking and remedies: one step above the training size (1.25x, where FixRes's gain shows),
#: 1.5-2x, 2x (where the remedies are read) and 2.5x.
STEP, NEAR, FAR = 80, (96, 112, 128), 160
TWICE = 2 * TRAINING_SIZE


def finished_runs(root: Path, study: str = RECIPE[0]):
    folder = root / study / "trained"
    runs = [read_run(f) for f in sorted(folder.iterdir()) if (f / "metrics.jsonl").is_file()] if folder.is_dir() else []
    return [r for r in runs if r.finished]


def runs_table(root: Path, study: str, config: str) -> str:
    """Each PE trained with ``config``: validation accuracy at its 64 px per seed, mean ± std, wall time and training
    throughput, the machine."""
    runs = finished_runs(root, study)
    if not runs:
        return f"{MISSING} No run of `{config}` has finished yet (`{study}/trained/`).\n"
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
                     " / ".join(f"{letter[r.machines]} ({thread_counts(r.machines, unit=False)})" for r in group)])
    return markdown(["PE", "val. acc. (%) at 64 px, seeds 0 / 1 / 2", "mean ± std", "seeds", "wall (min)",
                     "train img/s (epochs' mean)", "machine (threads)"], rows) + f"\nMachines: {cpu_legend(letter)}.\n"


def as_trained(record: dict) -> bool:
    """Whether a sweep record is of a run as trained (``<pe>_s<seed>``, scripts/transfer.sh's names as
    :func:`reports.transfer.transfer_remedy` reads them): a fine-tuned run, an augmented one or one tested with a PE
    option changed is not."""
    return transfer_remedy(record["run"], record["pe"])[0] == "trained" and "@" not in record["run"]


def trained_records(root: Path, study: str) -> list[dict] | None:
    """The sweep's records of the runs as trained (no fine-tune, no augmented run), without the (PE, mode) pairs that
    cannot be evaluated at all (CPB has no frequencies to scale); None where no sweep is committed."""
    path = root / study / "resolution/resolution.json"
    if not path.is_file():
        return None
    records = [r for r in sweep(path) if as_trained(r)]
    possible = {(r["pe"], r["pe_resize"]) for r in records if r["accuracy"] is not None}
    return [r for r in records if (r["pe"], r["pe_resize"]) in possible]


def resolution_tables(root: Path, study: str) -> str:
    """The models on the whole validation set at 48-160 px in every mode, mean ± std over seeds, then each run's
    change against its own 64 px accuracy (the FixRes gain where it is positive)."""
    records = trained_records(root, study)
    if records is None:
        return f"{MISSING} No sweep committed yet (`{study}/resolution/resolution.json`).\n"
    runs_per_pe: dict[str, set] = defaultdict(set)
    for record in records:
        runs_per_pe[record["pe"]].add(record["run"])
    note = "Seeds per row: " + ", ".join(f"`{pe}` {len(runs)}" for pe, runs in sorted(runs_per_pe.items())) + "."
    gains = gains_table(paired_gains(records, "resolution"), "resolution")
    return resolution_table(records) + f"\n{note}\n\n" + gains


def accuracy_by_run(records: list[dict], mode: str) -> dict[str, dict[int, float]]:
    """Each run's accuracy (points) at every size it was evaluated at in ``mode``."""
    by_run: dict[str, dict[int, float]] = defaultdict(dict)
    for r in records:
        if r["pe_resize"] == mode and r["accuracy"] is not None:
            by_run[r["run"]][int(r["resolution"])] = 100 * r["accuracy"]
    return by_run


def grid_ranking(root: Path) -> str:
    """The ten PEs ranked by what testing above the training size gives them without fine-tuning: each run's change
    at 1.25x (80 px), its best change at 1.5-2x (96-128 px), its change at 2x (128 px) and at 2.5x (160 px),
    interpolated, against its own accuracy at 64 px, mean ± std over seeds; and what extrapolating instead costs at
    2.5x (extrapolated against interpolated, each run against itself)."""
    study = GRID[0]
    records = trained_records(root, study)
    if not records:
        return f"{MISSING} No sweep of the grid committed yet (`{study}/resolution/resolution.json`).\n"
    pe_of = {r["run"]: r["pe"] for r in records}
    interpolated, extrapolated = accuracy_by_run(records, "interpolate"), accuracy_by_run(records, "extrapolate")

    def change(run: str, size: int) -> float:  # interpolated, against the run's own accuracy at the training size
        return interpolated[run][size] - interpolated[run][TRAINING_SIZE]

    needed = (TRAINING_SIZE, STEP, FAR, *NEAR)
    rows = []
    for pe in sorted(set(pe_of.values())):
        runs = sorted(run for run, sizes in interpolated.items()
                      if pe_of[run] == pe and all(size in sizes for size in needed))
        if not runs:
            continue
        best_sizes = [max(NEAR, key=interpolated[run].__getitem__) for run in runs]
        near = [change(run, size) for run, size in zip(runs, best_sizes)]
        cost = [extrapolated[run][FAR] - interpolated[run][FAR] for run in runs if FAR in extrapolated.get(run, {})]
        rows.append((statistics.fmean(near), [
            f"`{pe}`", len(runs), mean_std([interpolated[run][TRAINING_SIZE] for run in runs]),
            changes([change(run, STEP) for run in runs]), changes(near), " / ".join(str(s) for s in best_sizes),
            changes([change(run, TWICE) for run in runs]), changes([change(run, FAR) for run in runs]),
            changes(cost) if cost else "n/a (cannot extrapolate)"]))
    rows.sort(key=lambda row: -row[0])
    return markdown(["PE", "seeds", "acc. at 64 px (%)", f"change at {STEP} px, interpolated",
                     f"best change at {NEAR[0]}–{NEAR[-1]} px, interpolated", "best size, by seed",
                     f"change at {TWICE} px, interpolated",
                     f"change at {FAR} px, interpolated", f"extrapolated − interpolated at {FAR} px"],
                    [row for _, row in rows])


def changes(values: list[float]) -> str:
    """Changes in points, mean ± std, signed with hyphens as the gains table above them is."""
    return mean_std(values, signed=True, minus="-")


def imagenette_recipe(root: Path) -> str:
    """The recipe's runs (:func:`runs_table`)."""
    return runs_table(root, *RECIPE)


def imagenette_resolution(root: Path) -> str:
    """The recipe's models across sizes (:func:`resolution_tables`)."""
    return resolution_tables(root, RECIPE[0])


def imagenette_short(root: Path) -> str:
    """The README's line: each swept PE's validation accuracy at its 64 px, at its best size and at 160 px (2.5x),
    interpolated, mean ± std over the seeds it stands on."""
    records = [r for r in trained_records(root, RECIPE[0]) or []
               if r["pe_resize"] == "interpolate" and r["accuracy"] is not None]
    if not records:
        return f"{MISSING} not swept yet.\n"
    by_pe: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        by_pe[r["pe"]][int(r["resolution"])].append(100 * r["accuracy"])
    parts = []
    for pe, sizes in sorted(by_pe.items()):
        means = {size: statistics.fmean(values) for size, values in sizes.items()}
        best, largest = max(means, key=means.get), max(means)
        seeds = len(sizes[TRAINING_SIZE])
        parts.append(f"`{pe}` {mean_std(sizes[TRAINING_SIZE])}% at {TRAINING_SIZE} px, {mean_std(sizes[best])}% at "
                     f"{best} px, {mean_std(sizes[largest])}% at {largest} px ({seeds} seed{'s' if seeds > 1 else ''})")
    return (f"Imagenette (`{RECIPE[1]}`, trained at {TRAINING_SIZE} px, positions interpolated): " + "; ".join(parts)
            + ".\n")


def grid_remedies(root: Path) -> str:
    """The grid's remedies at 2 × the training size (128 px), for the PEs that have one: each as trained, trained with
    coordinate augmentation, and fine-tuned one epoch at 128 px (interpolated / extrapolated), each test mode's
    accuracy and its change from the run's own 64 px (:func:`reports.transfer.remedies_table`)."""
    study = GRID[0]
    swept = (root / study / "resolution/resolution.json").is_file()
    accuracy, trainings = transfer_records(root, study, TRAINING_SIZE) if swept else ({}, {})
    remedied = {pe for pe, stage, _ in accuracy if TRANSFER_STAGES[stage] != "trained"}
    if not remedied:
        return f"{MISSING} No fine-tuned or augmented run of the grid committed yet (`{study}/resolution/`).\n"
    return remedies_table(({key: cells for key, cells in accuracy.items() if key[0] in remedied},
                           {key: runs for key, runs in trainings.items() if key[0] in remedied}),
                          TRAINING_SIZE, TWICE)


TABLES: dict[str, Callable[[Path], str]] = {
    "imagenette-recipe": imagenette_recipe,
    "imagenette-resolution": imagenette_resolution,
    "imagenette-short": imagenette_short,
    "imagenette-grid": lambda root: runs_table(root, *GRID),
    "imagenette-grid-resolution": lambda root: resolution_tables(root, GRID[0]),
    "imagenette-grid-ranking": grid_ranking,
    "imagenette-grid-remedies": grid_remedies,
}
