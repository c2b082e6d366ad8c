"""The CPU recipe's studies: the PE grid against the plain timm loop, its ablation and levers, the current recipe's
anchors, the GPU data points and the resolution sweep of the grid."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from vitpe.machine import as_one_process
from reports.compare import compare_records
from reports.machines import machine_letters, named_machine
from reports.records import (MISSING, SEEDS, Run, figure_or_range, markdown, mean_std, per_seed, read_run,
                             resolution_table, side_by_side, site_of, sweep)



# --------------------------------------------------------------------------------------- the recipe's PE grid
#: The PEs of the recipe grid: every 2D PE of the comparison (rope_dinov3 came later).
GRID_PES = ("none", "learnable", "separable", "sincos", "rope_axial", "rope_mixed", "relbias", "cpb", "alibi", "peg")


def missing_pes(done: Iterable[str], what: str) -> str:
    """``"… not <what> yet: `pe`, ..."`` for the PEs of the grid not in ``done``; empty when none is missing."""
    waiting = [f"`{pe}`" for pe in GRID_PES if pe not in set(done)]
    return f"{MISSING} not {what} yet: {', '.join(waiting)}" if waiting else ""


@dataclass
class RecipeRow:
    label: str
    site: str
    seeds: dict[int, Run]
    machines: str  # the machine letter of each seed, "A / B / …"
    ratio: str  # wall time against the loop's on the same machine; "—" where no loop ran there
    loop: bool


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


def _ranks(means: dict[str, float]) -> dict[str, int]:
    return {pe: rank for rank, pe in enumerate(sorted(means, key=lambda p: -means[p]), start=1)}


def pe_order(root: Path) -> str:
    """The PEs ranked at three budgets: the 3-epoch grid (how fast each learns), the recipe's 17 epochs, and
    s-chh's 200 epochs (its five PEs ranked among themselves); sorted by the recipe's order."""
    rows, _ = recipe_grid(root)
    recipe = {r.label.strip("`"): [run.accuracy for run in r.seeds.values()] for r in rows if not r.loop}
    short: dict[str, list[float]] = defaultdict(list)
    for r in compare_records(root, multires=False):
        if r["resolution"] == 32 and r["pe_resize"] == "interpolate":
            short[r["pe"]].append(100 * r["accuracy"])
    means_17 = {pe: statistics.fmean(v) for pe, v in recipe.items()}
    means_3 = {pe: statistics.fmean(v) for pe, v in short.items()}
    rank_17, rank_3, rank_200 = _ranks(means_17), _ranks(means_3), _ranks(S_CHH_200_EPOCHS)
    table = [[f"`{pe}`", f"{rank_17[pe]}: {mean_std(recipe[pe])} ({len(recipe[pe])})",
              f"{rank_3[pe]}: {mean_std(short[pe])}" if pe in short else MISSING,
              f"{rank_200[pe]} of {len(rank_200)}: {S_CHH_200_EPOCHS[pe]}" if pe in S_CHH_200_EPOCHS else ""]
             for pe in sorted(recipe, key=rank_17.get)]
    agreement = (f"Rank correlation (Spearman) of the recipe's order with the 3-epoch grid's: "
                 f"{spearman(means_17, means_3):.2f}; with s-chh's, "
                 f"over its five PEs: {spearman(means_17, S_CHH_200_EPOCHS):.2f}.")
    waiting = missing_pes(recipe, "finished")
    return markdown(["`model.pe`", "17 epochs, the recipe: rank: acc. (%) (seeds)", "3 epochs: rank: acc. (%)",
                     "s-chh, 200 epochs: rank: acc. (%)"], table) + f"\n{agreement}\n" + (
        f"\n{waiting}.\n" if waiting else "")


def spearman(a: dict[str, float], b: dict[str, float]) -> float:
    """Spearman's rank correlation of two scorings over the keys they share (no ties expected: mean accuracies)."""
    shared = [k for k in a if k in b]
    rank_a, rank_b = _ranks({k: a[k] for k in shared}), _ranks({k: b[k] for k in shared})
    n = len(shared)
    return 1 - 6 * sum((rank_a[k] - rank_b[k]) ** 2 for k in shared) / (n * (n * n - 1))


def recipe_ablation(root: Path) -> str:
    """The recipe's levers, one per row, three seeds each."""
    base = root / "results/recipe"
    rows_spec = [
        ("plain timm loop", "—", "10 at 32 px", [base / f"grid/timm_s{s}" for s in SEEDS]),
        ("vitpe at the loop's settings", "mean pooling, lr 1e-3, batch 128; zero-padded crops, LayerNorm before "
         "pooling", "10 at 32 px", [base / n for n in ("V_timmlike", "V_timmlike_s1", "V_timmlike_s2")]),
        ("+ the loop's crop and head, batch 64", "reflect-padded crops, LayerNorm after pooling, batch 64",
         "10 at 32 px", [base / n for n in ("D_learnable_b64", "D_learnable_b64_s1", "D_learnable_b64_s2")]),
        ("+ progressive resizing (`learnable`)", "16 / 20 / 24 / 28 / 32 px for 5 / 4 / 3 / 3 / 2 epochs",
         "17", [base / f"grid/learnable_s{s}" for s in SEEDS]),
        ("+ `rope_mixed`", "the PE", "17", [base / f"grid/rope_mixed_s{s}" for s in SEEDS]),
        ("`cpb` instead (configs/cifar10_17ep.yaml)", "the PE", "17", [base / f"grid/cpb_s{s}" for s in SEEDS]),
    ]
    loop_minutes = loop_minutes_by_machine(root)
    rows = []
    for label, change, epochs, folders in rows_spec:
        runs = [read_run(f) for f in folders]
        rows.append([label, change, epochs, " / ".join(f"{r.accuracy:.2f}" for r in runs),
                     mean_std([r.accuracy for r in runs]), " / ".join(f"{r.minutes:.1f}" for r in runs),
                     against_loop(runs, loop_minutes)])
    return markdown(["row", "what changed", "epochs", "test acc. (%), seeds 0 / 1 / 2", "mean ± std",
                     "wall (min), seeds 0 / 1 / 2", "wall / the loop's"], rows)


#: The levers tried toward 80%, each a folder of results/recipe/ holding its runs (``<pe>_s<seed>``), with the
#: configuration it adds to configs/cifar10_17ep.yaml (the PE grid's recipe, folder "grid"); the last is
#: configs/cifar10.yaml, the current recipe.
LEVERS = (
    ("the recipe of the PE grid", "configs/cifar10_17ep.yaml", "grid"),
    ("+ convolutional stem, depth 5", "`model.stem=conv model.depth=5`: two 3 × 3 stride-2 convolutions make the "
     "patches; one block fewer pays for them", "convstem"),
    ("+ bf16 on the CPU, 24 epochs", "and `train.precision=bf16 train.epochs=24`: bf16 autocast makes a step about "
     "a third cheaper, spent on 7 more epochs (16 → 32 px as 7, 6, 4, 4, 3): configs/cifar10.yaml", "bf16_24ep"),
)
#: What the improved recipe must reach, mean of three seeds, in no more wall time than the plain loop.
LEVER_GOALS = {"cpb": 80.0, "learnable": 75.0}


def recipe_levers(root: Path) -> str:
    """Each lever toward 80%, one row, for the recipe's PE and ``learnable`` side by side: accuracy per seed (… where
    a seed is still to run; a lever without a finished run is left out), mean ± std, wall time against the loop on the
    same machine; then a goal line: the levers whose every PE meets its goal over three seeds within the loop's time."""
    loop_minutes = loop_minutes_by_machine(root)
    rows, met_by, partial = [], [], []
    for label, change, folder in LEVERS:
        runs = {pe: {s: run for s in SEEDS if (f := root / "results/recipe" / folder / f"{pe}_s{s}").is_dir()
                     and (run := read_run(f)).finished} for pe in LEVER_GOALS}
        if not any(runs.values()):
            continue
        row, met, partial_pes = [label, change], [], []
        for pe, goal in LEVER_GOALS.items():
            accuracy = {s: r.accuracy for s, r in runs[pe].items()}
            ratios = loop_ratios(list(runs[pe].values()), loop_minutes)
            ratio = against_loop(list(runs[pe].values()), loop_minutes)
            if ratio.endswith(PARTIAL):
                partial_pes.append(f"`{pe}`")
            row += [per_seed(accuracy, SEEDS), mean_std(list(accuracy.values())), ratio]
            met.append(len(accuracy) == len(SEEDS) and statistics.fmean(accuracy.values()) >= goal
                       and bool(ratios) and round(statistics.fmean(ratios), 2) <= 1.0)  # as the table shows it
        rows.append(row)
        if partial_pes:
            partial.append(f"{label}: {' and '.join(partial_pes)}")
        if all(met):
            met_by.append(label)
    goals = " and ".join(f"`{pe}` ≥ {goal:.1f}%" for pe, goal in LEVER_GOALS.items())
    line = (f"Goal: {goals}, mean of three seeds, in no more wall time than the loop (one thread each; each run's "
            f"time over the loop's mean on the same CPU, the loop's runs made at other times). "
            + (f"Met by: {'; '.join(met_by)}." if met_by else "Not met."))
    header = ["change", "what it adds"]
    for pe in LEVER_GOALS:
        header += [f"`{pe}`: test acc. (%), seeds 0 / 1 / 2", "mean ± std", "wall / the loop's"]
    return markdown(header, rows) + "\n" + " ".join(filter(None, [line, partial_note(partial)])) + "\n"


#: The current recipe's folder (the last lever), and the folders of its runs alone on both cores: the suffix, how, and
#: the folder whose loop run (one run at a time, the same day on the same machine) is their time anchor. Both cores'
#: wall times drift between days more than one thread's (two runs of the same loop on two threads: 29.8 and 36.0 min),
#: so each is set against the loop run made beside it, not against a mean over days.
CURRENT = LEVERS[-1][2]
BOTH_CORES = {"threads2": ("with 2 threads", "threads2"), "torchrun2": ("as 2 torchrun processes", "threads2"),
              "threads2_compile": ("with 2 threads and `train.compile=true`", "threads2_compile")}


def finished_recipe_runs(folder: Path, pattern: str = "*_s[0-9]*") -> list[Run]:
    """The finished vitpe runs (not the loop's) among ``folder``'s run folders matching ``pattern``, by name."""
    runs = (read_run(f) for f in sorted(folder.glob(pattern)) if f.is_dir())
    return [r for r in runs if r.finished and "baseline" not in r.config]


def both_cores_loops(root: Path, suffix: str) -> dict[frozenset[str], list[Run]]:
    """The loop's finished runs per machine in the anchor folder of the both-cores folder ``suffix``
    (:data:`BOTH_CORES`)."""
    return by_machine(finished_loops(root / "results/recipe" / f"{CURRENT}_{BOTH_CORES[suffix][1]}"))


def recipe_anchors(root: Path) -> str:
    """The current recipe against the plain loop: side by side (one thread each) against the float32 and the bf16
    loops on each machine they ran on, then each way of running it alone on both cores (:data:`BOTH_CORES`) against
    its own loop run; one row per loop and per PE, each with its wall time over the loop's mean."""
    recipe = root / "results/recipe"
    fp32, bf16 = loop_runs_by_machine(root), loop_runs_by_machine(root, "bf16")
    groups = []  # (machine, the loops by kind, whether they show, [(label, runs)])
    side: dict[frozenset[str], dict[str, list[Run]]] = defaultdict(lambda: defaultdict(list))
    for run in finished_recipe_runs(recipe / CURRENT):
        side[run.machines][run.pe].append(run)
    for machine in sorted(side, key=sorted):
        loops = {"float32": fp32.get(machine, []), "bf16": bf16.get(machine, [])}
        groups.append((machine, loops, True, [(f"the recipe, `{pe}`", side[machine][pe]) for pe in LEVER_GOALS
                                              if side[machine][pe]]))
    for suffix, (how, anchor) in BOTH_CORES.items():
        by_pe = {pe: runs for pe in LEVER_GOALS
                 if (runs := finished_recipe_runs(recipe / f"{CURRENT}_{suffix}", f"{pe}_s[0-9]*"))}
        machines = {run.machines for runs in by_pe.values() for run in runs}
        anchor_loops = both_cores_loops(root, suffix)
        for machine in sorted(machines, key=sorted):
            loops = anchor_loops[anchor_machine(machine)]
            groups.append((machine, {"float32": loops, "bf16": []}, anchor == suffix,
                           [(f"the recipe, `{pe}`, {how}", [r for r in runs if r.machines == machine])
                            for pe, runs in by_pe.items()]))
    rows = []
    for machine, loops, loops_shown, recipe_rows in groups:
        loop_means = {kind: statistics.fmean(r.minutes for r in runs) for kind, runs in loops.items() if runs}
        named = [(f"plain timm loop, {kind}", loops[kind]) for kind in loop_means if loops_shown] + recipe_rows
        for label, runs in named:
            minutes = statistics.fmean(r.minutes for r in runs)
            ratios = [f"{minutes / loop_means[kind]:.2f}" if kind in loop_means else "—" for kind in loops]
            rows.append(["; ".join(sorted(machine)), label, ", ".join(str(r.seed) for r in runs),
                         mean_std([r.accuracy for r in runs]), f"{minutes:.1f}", *ratios])
    return markdown(["machine", "run", "seeds", "test acc. (%), mean ± std", "wall (min), mean",
                     "wall / the float32 loop's", "wall / the bf16 loop's"], rows)


def against_each_loop(runs: list[Run], loops: dict[frozenset[str], list[Run]]) -> str:
    """The runs' mean wall time over each loop run on their machine (:func:`anchor_machine`) in turn: one ratio, or the
    range "a–b" when the loop's runs differ; "—" where no loop ran there."""
    minutes = statistics.fmean(r.minutes for r in runs)
    anchors = {anchor_machine(r.machines) for r in runs}
    ratios = [minutes / loop.minutes for machine in anchors for loop in loops.get(machine, [])]
    return figure_or_range(ratios, ".2f") if ratios else "—"


def recipe_current_short(root: Path) -> str:
    """The README's line on the current recipe: each goal PE's accuracy over its seeds and wall time against the
    float32 loop side by side, and, where it ran so, one run at a time on both cores (:data:`BOTH_CORES`, each
    against its own loop run)."""
    loop_minutes = loop_minutes_by_machine(root)
    loops = [run for runs in loop_runs_by_machine(root).values() for run in runs]
    recipe = root / "results/recipe"
    parts, ratios, beside = [], [], []
    for pe in LEVER_GOALS:
        runs = finished_recipe_runs(recipe / CURRENT, f"{pe}_s[0-9]*")
        seeds = f"{len(runs)} seed{'s' if len(runs) != 1 else ''}"
        parts.append(f"`{pe}` {mean_std([r.accuracy for r in runs])}% ({seeds})")  # CIFAR-10's test split
        ratios.append(against_loop(runs, loop_minutes))
        beside.append(side_by_side(runs, loops))
    two_thread_loops = by_machine([loop for anchor in sorted({a for _, a in BOTH_CORES.values()})
                                   for loop in finished_loops(recipe / f"{CURRENT}_{anchor}")])
    alone = []
    for suffix, (how, _) in BOTH_CORES.items():
        pes = [f"`{pe}` {against_each_loop(runs, two_thread_loops)}" for pe in LEVER_GOALS
               if (runs := finished_recipe_runs(recipe / f"{CURRENT}_{suffix}", f"{pe}_s[0-9]*"))]
        alone += [f"{how}, {', '.join(pes)}"] if pes else []
    count = sum(map(len, two_thread_loops.values()))
    both = (f"; alone on both cores, against each of the loop's {count} two-thread runs on the same CPU: "
            f"{'; '.join(alone)}") if alone else ""
    when = ("side by side on one thread each" if all(beside) else
            "one thread each, the loop's runs made at another time on the same CPU (not side by side)")
    return (f"`configs/cifar10.yaml` (conv stem, bf16, 24 epochs): {', '.join(parts)}, in {' / '.join(ratios)} of the "
            f"plain loop's wall time, {when}{both}.\n")


def recipe_diagnostic(root: Path) -> str:
    """Two epochs on 12,800 images: which of the loop's choices closes the gap."""
    folder = root / "results/recipe/diagnostic"
    labels = [("timm", "plain timm loop"), ("v", "vitpe (zero-padded crops, LayerNorm before pooling)"),
              ("v_reflect", "+ reflect padding"), ("v_fc", "+ LayerNorm after pooling"), ("v_both", "+ both")]
    return markdown(["run", "test acc. (%), 2,000 images"],
                    [[label, f"{read_run(folder / name).accuracy:.1f}"] for name, label in labels])


def recipe_gpu(root: Path) -> str:
    """The one GPU recipe run: accuracy against wall time, every few epochs."""
    run = read_run(root / "results/recipe/gpu_h200/rope_mixed_s0")
    shown = [r for r in run.records if r["epoch"] in (1, 5, 10, 15, 20) or r is run.records[-1]]
    return markdown(["epoch", *(str(r["epoch"]) for r in shown)],
                    [["test acc. (%)", *(f"{100 * r['test_acc']:.1f}" for r in shown)],
                     ["wall (s)", *(f"{r['elapsed_s']:.0f}" for r in shown)]])


def _test_acc_by(run: Run, seconds: float) -> str:
    """The test accuracy of the last epoch that ended within ``seconds`` of wall time."""
    done = [r for r in run.records if r["elapsed_s"] <= seconds]
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


def recipe_resolution(root: Path) -> str:
    """The recipe's models across test sizes, both modes (pending until the sweep is committed)."""
    path = root / "results/recipe/resolution.json"
    if not path.is_file():
        return (f"{MISSING} The sweep of the recipe's 30 models is not committed yet "
                "(`results/recipe/resolution.json`).\n")
    records = sweep(path)
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
    "recipe-ablation": recipe_ablation,
    "recipe-levers": recipe_levers,
    "recipe-anchors": recipe_anchors,
    "recipe-current-short": recipe_current_short,
    "pe-order": pe_order,
    "recipe-diagnostic": recipe_diagnostic,
    "recipe-gpu": recipe_gpu,
    "recipe-gpu-four": recipe_gpu_four,
    "recipe-resolution": recipe_resolution,
}
