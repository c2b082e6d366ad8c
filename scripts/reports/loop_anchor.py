"""The plain timm loop as the time anchor of the CPU recipe's runs: its finished runs by machine, their mean wall
times, and each recipe run's wall time against the loop's on the same CPU."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from vitpe.machine import as_one_process
from reports.records import Run, figure_or_range, read_run


def finished_loops(folder: Path, pattern: str = "timm_*", precision: str = "fp32") -> list[Run]:
    """The plain loop's finished runs in ``precision`` among ``folder``'s run folders matching ``pattern``, by name."""
    runs = (read_run(f) for f in sorted(folder.glob(pattern)) if f.is_dir())
    return [r for r in runs if r.finished and "baseline" in r.config
            and r.config.get("precision", "fp32") == precision]


def by_machine(runs: list[Run]) -> dict[frozenset[str], list[Run]]:
    """``runs`` grouped by the machine they ran on."""
    grouped: dict[frozenset[str], list[Run]] = defaultdict(list)
    for run in runs:
        grouped[run.machines].append(run)
    return grouped


def mean_minutes(runs_by_machine: dict[frozenset[str], list[Run]]) -> dict[frozenset[str], float]:
    """The mean wall time (minutes) of each machine's runs."""
    return {machine: statistics.fmean(r.minutes for r in runs) for machine, runs in runs_by_machine.items()}


def loop_runs_by_machine(root: Path, precision: str = "fp32") -> dict[frozenset[str], list[Run]]:
    """The plain loop's finished runs in ``precision`` on each machine they ran on, from the grid and every lever's
    records (``results/recipe/*/timm_*``; a lever's ``LOOP_SEEDS`` run is its time anchor)."""
    return by_machine(finished_loops(root / "results/recipe", "*/timm_*", precision))


def loop_minutes_by_machine(root: Path) -> dict[frozenset[str], float]:
    """The float32 loop's mean wall time (minutes) on each machine it ran on (:func:`loop_runs_by_machine`): the
    anchor every recipe run's wall time is divided by; the bf16 loop is a row of its own, never the anchor."""
    return mean_minutes(loop_runs_by_machine(root))


def anchor_machine(machines: frozenset[str]) -> frozenset[str]:
    """Where a run's time anchor ran: its own machine, except that a run of N one-thread processes (torchrun) is
    anchored on the loop with N threads on the same CPU, as both use N cores (:func:`vitpe.machine.as_one_process`)."""
    return frozenset(map(as_one_process, machines))


def loop_ratios(runs: list[Run], loop_minutes: dict[frozenset[str], float]) -> list[float]:
    """Each run's wall time over the loop's mean on the run's own machine (:func:`anchor_machine`), for the runs
    whose machine ran the loop."""
    return [r.minutes / loop_minutes[anchor] for r in runs if (anchor := anchor_machine(r.machines)) in loop_minutes]


PARTIAL = "¹"  # :func:`against_loop`'s mark on a mean over only some of the runs


def against_loop(runs: list[Run], loop_minutes: dict[frozenset[str], float]) -> str:
    """The runs' mean wall time against the loop's on each run's own machine; "—" where the loop never ran there,
    and ¹ when only some of the runs have a loop on their machine."""
    ratios = loop_ratios(runs, loop_minutes)
    return f"{statistics.fmean(ratios):.2f}{PARTIAL if len(ratios) < len(runs) else ''}" if ratios else "—"


def partial_note(labels: list[str]) -> str:
    """The note under a table whose rows ``labels`` carry :data:`PARTIAL` ("" where none does)."""
    return f"{PARTIAL} over the seeds that ran on a machine where the loop ran too ({', '.join(labels)})." \
        if labels else ""


def finished_recipe_runs(folder: Path, pattern: str = "*_s[0-9]*") -> list[Run]:
    """The finished vitpe runs (not the loop's) among ``folder``'s run folders matching ``pattern``, by name."""
    runs = (read_run(f) for f in sorted(folder.glob(pattern)) if f.is_dir())
    return [r for r in runs if r.finished and "baseline" not in r.config]


def against_each_loop(runs: list[Run], loops: dict[frozenset[str], list[Run]]) -> str:
    """The runs' mean wall time over each loop run on their machine (:func:`anchor_machine`) in turn: one ratio, or the
    range "a–b" when the loop's runs differ; "—" where no loop ran there."""
    minutes = statistics.fmean(r.minutes for r in runs)
    anchors = {anchor_machine(r.machines) for r in runs}
    ratios = [minutes / loop.minutes for machine in anchors for loop in loops.get(machine, [])]
    return figure_or_range(ratios, ".2f") if ratios else "—"
