"""The CPU recipe's PE grid: every 2D PE with configs/cifar10_17ep.yaml against the plain timm loop, its order beside
the 3-epoch grid's and s-chh's, and the resolution sweep of its models."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from reports.compare import compare_records
from reports.loop_anchor import PARTIAL, against_loop, loop_minutes_by_machine, partial_note
from reports.machines import machine_letters, named_machine
from reports.ranks import ranks, spearman
from reports.records import (MISSING, SEEDS, Run, markdown, mean_std, named_by_option, per_seed, read_run,
                             resolution_table, site_of, sweep)


#: The ten PEs of the recipe grid's comparison at three budgets (the 3-epoch grid and s-chh ran these; rope_dinov3
#: came later).
GRID_PES = ("none", "learnable", "separable", "sincos", "rope_axial", "rope_mixed", "relbias", "cpb", "alibi", "peg")
#: The PEs built to extrapolate that joined the grid after the ten: LookHere, FIRE, PaPE and LieRE (the learned
#: rotation that kept most on the detail protocol).
EXTRAPOLATING_PES = ("lookhere", "fire", "pape", "liere")


def missing_pes(done: Iterable[str], what: str, planned: Iterable[str] = GRID_PES + EXTRAPOLATING_PES) -> str:
    """``"… not <what> yet: `pe`, ..."`` for the ``planned`` PEs not in ``done``; empty when none is missing."""
    waiting = [f"`{pe}`" for pe in planned if pe not in set(done)]
    return f"{MISSING} not {what} yet: {', '.join(waiting)}" if waiting else ""


@dataclass
class RecipeRow:
    label: str
    site: str
    seeds: dict[int, Run]
    machines: str  # the machine letter of each seed, "A / B / …"
    ratio: str  # wall time against the loop's on the same machine; "—" where no loop ran there
    loop: bool


def recipe_grid(root: Path) -> tuple[list[RecipeRow], dict[str, str]]:
    """The recipe grid (configs/cifar10_17ep.yaml with every 2D PE, three seeds, and the plain timm loop): loop rows
    first (one per machine it ran on), then the PEs, best first; and the notes under the table (``machines``,
    ``partial``, ``waiting``). Wall times compare only within a machine: each run's against the mean of the loop's
    runs on the same machine (machines are lettered; the grid's first runs did not record theirs)."""
    runs = [read_run(f) for f in sorted((root / "results/recipe/grid").iterdir()) if f.is_dir()]
    loops: dict[frozenset[str], dict[int, Run]] = defaultdict(dict)
    by_pe: dict[str, dict[int, Run]] = defaultdict(dict)
    for run in runs:
        if run.finished:
            (loops[run.machines] if "baseline" in run.config else by_pe[run.pe])[run.seed] = run
    loop_minutes = loop_minutes_by_machine(root)
    letter = machine_letters(r.machines for r in runs if r.finished)
    machines = list(letter)
    partial = []

    def row(label: str, site: str, seeds: dict[int, Run], loop: bool = False) -> RecipeRow:
        ratio = against_loop(list(seeds.values()), loop_minutes)
        if ratio.endswith(PARTIAL):
            partial.append(label)
        where = " / ".join(letter[seeds[s].machines] if s in seeds else MISSING for s in SEEDS)
        return RecipeRow(label, site, seeds, where, ratio, loop)

    rows = [row("plain timm loop (10 epochs at 32 px)", "tokens", loops[m], loop=True) for m in machines if m in loops]
    rows += [row(f"`{pe}`", site_of(pe), by_pe[pe])
             for pe in sorted(by_pe, key=lambda p: -statistics.fmean(r.accuracy for r in by_pe[p].values()))]
    waiting = missing_pes(by_pe, "finished")
    notes = {"machines": "Machines: " + "; ".join(
        named_machine(letter, m, "not recorded (the first runs of the grid)")
        + ("" if m in loops else " (no loop ran there: no ratio)") for m in machines) + ".",
        "partial": partial_note(partial),
        "waiting": f"{waiting} (no finished seed)." if waiting else ""}
    return rows, notes


def recipe_pes(root: Path) -> str:
    """Every 2D PE with the recipe against the plain timm loop (:func:`recipe_grid`), every seed shown."""
    rows, notes = recipe_grid(root)
    table = markdown(["run", "site", "test acc. (%), seeds 0 / 1 / 2", "mean ± std", "machine", "wall (min), mean",
                      "wall / the loop's"],
                     [[r.label, r.site, per_seed({s: run.accuracy for s, run in r.seeds.items()}, SEEDS),
                       mean_std([run.accuracy for run in r.seeds.values()]), r.machines,
                       f"{statistics.fmean(run.minutes for run in r.seeds.values()):.1f}", r.ratio] for r in rows])
    return table + "".join(f"\n{notes[key]}\n" for key in ("machines", "partial", "waiting") if notes[key])


def recipe_pes_short(root: Path) -> str:
    """The README's version of :func:`recipe_pes`: mean ± std, seeds and wall time against the loop's, best first;
    one loop row (every ratio is against the loop on the run's own machine)."""
    rows, notes = recipe_grid(root)
    rows = rows[:1] + [r for r in rows if not r.loop]
    short = [[r.label, mean_std([run.accuracy for run in r.seeds.values()]), str(len(r.seeds)), r.ratio]
             for r in rows]
    shown = ["— ran on a machine where the loop did not run (RESULTS.md says which)."] * any(
        r.ratio == "—" for r in rows) + [notes[key] for key in ("partial", "waiting") if notes[key]]
    return markdown(["run (CIFAR-10)", "test acc. (%)", "seeds", "wall / the loop's"], short) + "".join(
        f"\n{note}\n" for note in shown)


#: s-chh/2D-PE-ViT's CIFAR-10 table (d 128, depth 6, 4 heads, 200 epochs, one seed; ../shared/DESIGN.md §3), by the
#: vitpe PE closest to each of its rows ("relative": a learned relative-position bias, as Swin's table; "RoPE": 2D
#: axial rotary).
S_CHH_200_EPOCHS = {"none": 79.6, "sincos": 86.1, "learnable": 86.5, "rope_axial": 88.5, "relbias": 90.6}


def pe_order(root: Path) -> str:
    """The ten PEs of :data:`GRID_PES` ranked at three budgets: the 3-epoch grid (how fast each learns), the recipe's
    17 epochs, and s-chh's 200 epochs (its five PEs ranked among themselves); sorted by the recipe's order. The PEs
    that joined the recipe grid later ran in neither of the other two, so they are left out of every rank."""
    rows, _ = recipe_grid(root)
    by_label = {r.label.strip("`"): r for r in rows if not r.loop}
    recipe = {pe: [run.accuracy for run in by_label[pe].seeds.values()] for pe in GRID_PES if pe in by_label}
    short: dict[str, list[float]] = defaultdict(list)
    for r in compare_records(root, multires=False):
        if r["resolution"] == 32 and r["pe_resize"] == "interpolate":
            short[r["pe"]].append(100 * r["accuracy"])
    means_17 = {pe: statistics.fmean(v) for pe, v in recipe.items()}
    means_3 = {pe: statistics.fmean(v) for pe, v in short.items()}
    rank_17, rank_3, rank_200 = ranks(means_17), ranks(means_3), ranks(S_CHH_200_EPOCHS)
    table = [[f"`{pe}`", f"{rank_17[pe]}: {mean_std(recipe[pe])} ({len(recipe[pe])})",
              f"{rank_3[pe]}: {mean_std(short[pe])}" if pe in short else MISSING,
              f"{rank_200[pe]} of {len(rank_200)}: {S_CHH_200_EPOCHS[pe]}" if pe in S_CHH_200_EPOCHS else ""]
             for pe in sorted(recipe, key=rank_17.get)]
    agreement = (f"Rank correlation (Spearman) of the recipe's order with the 3-epoch grid's: "
                 f"{spearman(means_17, means_3):.2f}; with s-chh's, "
                 f"over its five PEs: {spearman(means_17, S_CHH_200_EPOCHS):.2f}.")
    waiting = missing_pes(recipe, "finished", GRID_PES)
    return markdown(["`model.pe`", "17 epochs, the recipe: rank: acc. (%) (seeds)", "3 epochs: rank: acc. (%)",
                     "s-chh, 200 epochs: rank: acc. (%)"], table) + f"\n{agreement}\n" + (
        f"\n{waiting}.\n" if waiting else "")


def recipe_resolution(root: Path) -> str:
    """The recipe's models across test sizes, both modes (pending until the sweep is committed)."""
    path = root / "results/recipe/resolution.json"
    if not path.is_file():
        return (f"{MISSING} The sweep of the recipe's models is not committed yet "
                "(`results/recipe/resolution.json`).\n")
    records = named_by_option(sweep(path))
    seeds = defaultdict(set)
    for record in records:
        seeds[record["pe"]].add(record["run"])
    waiting = missing_pes(seeds, "swept")
    note = "\nSeeds per row: " + ", ".join(f"`{pe}` {len(seeds[pe])}" for pe in sorted(seeds)) + "."
    reruns = rerun_note(root, {record["run"] for record in records})
    return resolution_table(records) + note + (f" {waiting}." if waiting else "") + reruns + "\n"


def rerun_note(root: Path, swept: set[str]) -> str:
    """Which swept models are reruns (``results/recipe/rerun/``: the grid's first runs kept no checkpoint, so their
    config and seed were trained again), each with its full-test accuracy beside the grid run's: a rerun on another
    kind of CPU is a close model, not the same one."""
    folder = root / "results/recipe/rerun"
    reruns = [read_run(f) for f in sorted(folder.iterdir()) if f.is_dir()] if folder.is_dir() else []
    reruns = [r for r in reruns if r.finished and r.name in swept]
    if not reruns:
        return ""
    letter = machine_letters(r.machines for r in reruns)
    described = "; ".join(named_machine(letter, m) for m in letter)
    pairs = []
    for rerun in reruns:
        grid = root / "results/recipe/grid" / rerun.name
        was = f" (grid's {read_run(grid).accuracy:.1f}%)" if (grid / "metrics.jsonl").is_file() else ""
        pairs.append(f"`{rerun.pe}` seed {rerun.seed} on {letter[rerun.machines]}: "
                     f"{rerun.accuracy:.1f}%{was}")
    return f" Swept from reruns, their accuracy on the full test split: {'; '.join(pairs)}. Machines: {described}."


#: This study's tables: name -> function of the repository root -> markdown (scripts/report.py).
TABLES: dict[str, Callable[[Path], str]] = {
    "recipe-pes": recipe_pes,
    "recipe-pes-short": recipe_pes_short,
    "pe-order": pe_order,
    "recipe-resolution": recipe_resolution,
}
