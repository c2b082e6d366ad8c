"""Resolution transfer on the detail protocol: the remedies (fine-tuning, coordinate augmentation, NTK / YaRN)."""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Callable

from reports.loop_anchor import by_machine, mean_minutes
from reports.machines import machine_labels
from reports.records import (Run, SEEDS, markdown, mean_std, named_by_option, read_run, resolution_table, sweep,
                             with_sign)


# ------------------------------------------------------------------------------ resolution transfer: the remedies
TRANSFER_MODES = ("interpolate", "extrapolate", "ntk", "yarn")
TRANSFER_STAGES = ("trained", "augmented", "finetuned")  # scripts/transfer.sh's folders, in the order of the table
#: What follows ``<pe>_`` in a transfer run's name: ``s0`` (as trained), ``<aug>_s0`` (trained with an augmentation
#: setting), ``s0_<px>_<mode>`` (fine-tuned one epoch at px with positions resized by mode); scripts/transfer.sh.
TRANSFER_RUN = re.compile(r"^(?:(?P<aug>[a-z0-9_]+?)_)?s(?P<seed>\d+)(?:_(?P<px>\d+)_(?P<mode>[a-z]+))?$")


def transfer_remedy(run: str, pe: str) -> tuple[str, str, int]:
    """(stage folder, remedy label, seed) of a transfer run, from its name; a run evaluated with a PE option changed
    (eval.py --pe-option: ``<run>@NAME=VALUE``) is a remedy of its own."""
    name, _, option = run.partition("@")
    parts = TRANSFER_RUN.match(name[len(pe) + 1:])
    if parts is None:
        raise ValueError(f"{run}: not a scripts/transfer.sh run name (<pe>_s<seed>, <pe>_<aug>_s<seed>, "
                         f"<pe>_s<seed>_<px>_<mode>, each optionally @NAME=VALUE)")
    seed = int(parts["seed"])
    tested = f", tested with `{option}`" if option else ""
    if parts["px"]:
        return "finetuned", f"fine-tuned at {parts['px']} px, {parts['mode']}d{tested}", seed
    if parts["aug"]:
        return "augmented", f"trained with `{parts['aug']}`{tested}", seed
    return "trained", f"as trained{tested}", seed


TransferCells = dict[tuple[str, int, str], dict[tuple[str, int], dict[int, float]]]
#: A study's sweep read once: the accuracy cells and each group's training runs (:func:`transfer_records`).
TransferRecords = tuple[TransferCells, dict[tuple[str, int, str], list[Run]]]
#: The detail protocol: its records folder, its training size and the size its remedies are read at.
DETAIL = ("results/transfer", 16, 32)
#: The experiment's goal: a model trained at 16 px at least this many points more accurate at 32 px than at 16 px,
#: without fine-tuning, mean over three seeds.
TRANSFER_GOAL = 3.0


def transfer_records(root: Path, study: str, trained_px: int) -> TransferRecords:
    """Accuracy (%) per (pe, stage index, remedy) -> (mode, size) -> seed, and each group's training runs, from the
    sweep of a scripts/transfer.sh study (``study``: its records folder; ``trained_px``: its training size)."""
    base = root / study
    accuracy: TransferCells = defaultdict(lambda: defaultdict(dict))
    trainings: dict[tuple[str, int, str], list[Run]] = defaultdict(list)
    for r in sweep(base / "resolution/resolution.json"):
        stage, remedy, seed = transfer_remedy(r["run"], r["pe"])
        key = (r["pe"], TRANSFER_STAGES.index(stage), remedy)
        if r["accuracy"] is not None:
            accuracy[key][(r["pe_resize"], r["resolution"])][seed] = 100 * r["accuracy"]
        if r["resolution"] == trained_px and r["pe_resize"] == "interpolate":
            trainings[key].append(read_run(base / stage / r["run"].partition("@")[0]))
    return accuracy, trainings


def gains_at(cells: dict[tuple[str, int], dict[int, float]], mode: str, trained_px: int,
             tested_px: int) -> tuple[list[float], list[float]]:
    """Each seed's change from its own accuracy at ``trained_px`` (interpolate) to ``tested_px`` in ``mode``, and its
    accuracy at ``tested_px``."""
    at_trained, at_tested = cells[("interpolate", trained_px)], cells.get((mode, tested_px), {})
    seeds = [s for s in at_tested if s in at_trained]
    return [at_tested[s] - at_trained[s] for s in seeds], [at_tested[s] for s in seeds]


def remedies_table(records: TransferRecords, trained_px: int, tested_px: int) -> str:
    """Each PE and remedy of a scripts/transfer.sh study's records: accuracy at ``trained_px`` (the training size),
    and at ``tested_px`` in each test mode with its change from ``trained_px`` (each run against itself, mean ± std
    over seeds), and the training's cost (minutes on each machine, lettered under the table when the runs ran on
    several)."""
    accuracy, trainings = records
    label, legend = machine_labels([run.machines for runs in trainings.values() for run in runs])
    rows = []
    for key in sorted(accuracy):  # by PE, then as trained / augmented / fine-tuned
        pe, _, remedy = key
        cells = accuracy[key]
        at_trained = cells[("interpolate", trained_px)]
        row = [f"`{pe}`", remedy, str(len(at_trained)), mean_std(list(at_trained.values()))]
        for mode in TRANSFER_MODES:
            gains, at_tested = gains_at(cells, mode, trained_px, tested_px)
            row.append(f"{statistics.fmean(at_tested):.1f} ({mean_std(gains, signed=True)})" if gains else "n/a")
        minutes = mean_minutes(by_machine(trainings[key]))
        row.append(" / ".join(f"{minutes[m]:.1f}{label[m]}" for m in sorted(minutes, key=label.get)))
        rows.append(row)
    machine_note = f"\nTraining minutes by machine: {legend}.\n" if legend else ""
    return markdown(["PE", "remedy", "seeds", f"{trained_px} px (%)",
                     *(f"{tested_px} px, {m} (− {trained_px} px)" for m in TRANSFER_MODES), "training (min)"],
                    rows) + machine_note


def transfer_remedies(root: Path) -> str:
    """The detail protocol's remedies (:func:`remedies_table`, trained at 16 px, tested at 32), then whether a remedy
    without fine-tuning reaches the goal."""
    study, trained_px, tested_px = DETAIL
    records = transfer_records(root, study, trained_px)
    return remedies_table(records, trained_px, tested_px) + "\n" + transfer_goal(records[0]) + "\n"


def transfer_goal(accuracy: TransferCells) -> str:
    """One line: which remedies without fine-tuning gain at least TRANSFER_GOAL points at 32 px over three seeds,
    or, while none does, the three largest mean gains (each PE and remedy in its best test mode)."""
    found = []  # per PE and remedy, its best test mode: (mean gain, seeds, mean accuracy at 32 px, label)
    for (pe, stage, remedy), cells in accuracy.items():
        if TRANSFER_STAGES[stage] == "finetuned":
            continue
        modes = []
        for mode in TRANSFER_MODES:
            gains, at_32 = gains_at(cells, mode, *DETAIL[1:])
            if gains:
                modes.append((statistics.fmean(gains), len(gains), statistics.fmean(at_32), f"`{pe}` {remedy}, {mode}"))
        found.append(max(modes))

    def listed(entries: list[tuple[float, int, float, str]]) -> str:
        return "; ".join(f"{label}: {with_sign(gain)} ({seeds} seed{'s' * (seeds > 1)}; {acc:.1f}% at 32 px)"
                         for gain, seeds, acc, label in entries)

    goal = (f"Goal: at least +{TRANSFER_GOAL:.0f} points at 32 px over 16 px without fine-tuning, mean of "
            f"{len(SEEDS)} seeds. ")
    met = sorted((f for f in found if f[1] >= len(SEEDS) and f[0] >= TRANSFER_GOAL), key=lambda f: -f[2])
    if met:
        return goal + "Met by " + listed(met) + "."
    best = sorted(found, reverse=True)[:3]
    return goal + "Not met" + (f"; the largest mean gains: {listed(best)}." if best else ".")


def transfer_sweep(root: Path) -> str:
    """Every PE as trained at 16 px on the detail protocol, tested from 16 to 48 px with positions interpolated and
    extrapolated: mean ± std over seeds (first 2,000 test images)."""
    records = [r for r in sweep(root / DETAIL[0] / "resolution/resolution.json")
               if r["pe_resize"] in ("interpolate", "extrapolate")
               and transfer_remedy(r["run"], r["pe"])[0] == "trained"]
    return resolution_table(named_by_option(records))


#: This study's tables: name -> function of the repository root -> markdown (scripts/report.py).
TABLES: dict[str, Callable[[Path], str]] = {
    "transfer-remedies": transfer_remedies,
    "transfer-sweep": transfer_sweep,
}
