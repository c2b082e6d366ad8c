"""How the CPU recipe got from the PE grid's budget to configs/cifar10.yaml: the ablation against the plain loop, the
levers toward 80%, and the current recipe against the loop, one thread each and alone on both cores."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Callable

from reports.loop_anchor import (PARTIAL, against_each_loop, against_loop, anchor_machine, by_machine,
                                 finished_loops, finished_recipe_runs, loop_minutes_by_machine, loop_ratios,
                                 loop_runs_by_machine, mean_minutes, partial_note)
from reports.records import SEEDS, Run, markdown, mean_std, per_seed, read_run, side_by_side


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
    ("+ bf16 on the CPU, 24 epochs", "and `train.precision=bf16 train.epochs=24`: bf16 autocast makes a step "
     "cheaper, spent on 7 more epochs (16 → 32 px as 7, 6, 4, 4, 3): configs/cifar10.yaml", "bf16_24ep"),
)
#: The current recipe's folder (configs/cifar10.yaml, the last lever).
CURRENT = LEVERS[-1][2]
#: Options of the model tried on the current recipe, one seed each, a row each under the levers (neither is in
#: configs/cifar10.yaml): label, what it adds, folder of results/recipe/ (``CONFIG=configs/cifar10.yaml
#: EXTRA="<what it adds>" PES=<pe> SEEDS=0 LOOP_SEEDS="" RECORDS=results/recipe/<folder> scripts/recipe_vs_timm.sh``).
OPTIONS_TRIED = (
    ("the recipe, PE concatenated", "`model.pe_combine=concat`: [x, pe] projected back to the width, instead of "
     "x + pe (a tokens PE only, so `learnable`)", f"{CURRENT}_concat"),
    ("the recipe, dropout after the PE", "`model.pos_drop=0.1`: dropout on the tokens after the PE sum (timm's "
     "`pos_drop`)", f"{CURRENT}_pos_drop"),
)
#: What the improved recipe must reach, mean of three seeds, in no more wall time than the plain loop.
LEVER_GOALS = {"cpb": 80.0, "learnable": 75.0}


def recipe_levers(root: Path) -> str:
    """Each lever toward 80%, one row, for the recipe's PE and ``learnable`` side by side: accuracy per seed (… where
    a seed is still to run; a lever without a finished run is left out), mean ± std, wall time against the loop on the
    same machine; then a goal line: the levers whose every PE meets its goal over three seeds within the loop's time."""
    loop_minutes = loop_minutes_by_machine(root)
    rows, met_by, partial = [], [], []
    for label, change, folder in LEVERS + OPTIONS_TRIED:
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


#: The folders of the current recipe's runs alone on both cores: the suffix, how, and
#: the folder whose loop run (one run at a time, the same day on the same machine) is their time anchor. Both cores'
#: wall times drift between days more than one thread's (two runs of the same loop on two threads: 29.8 and 36.0 min),
#: so each is set against the loop run made beside it, not against a mean over days.
BOTH_CORES = {"threads2": ("with 2 threads", "threads2"), "torchrun2": ("as 2 torchrun processes", "threads2"),
              "threads2_compile": ("with 2 threads and `train.compile=true`", "threads2_compile")}


def both_cores_loops(root: Path, suffix: str) -> dict[frozenset[str], list[Run]]:
    """The loop's finished runs per machine in the anchor folder of the both-cores folder ``suffix``
    (:data:`BOTH_CORES`)."""
    return by_machine(finished_loops(root / "results/recipe" / f"{CURRENT}_{BOTH_CORES[suffix][1]}"))


def goal_pe_runs(root: Path, suffix: str = "") -> dict[str, list[Run]]:
    """The current recipe's finished runs of each goal PE that has any, in its folder (``suffix``: a both-cores
    folder of :data:`BOTH_CORES`)."""
    folder = root / "results/recipe" / (f"{CURRENT}_{suffix}" if suffix else CURRENT)
    return {pe: runs for pe in LEVER_GOALS if (runs := finished_recipe_runs(folder, f"{pe}_s[0-9]*"))}


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
        by_pe = goal_pe_runs(root, suffix)
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
            rows.append(["; ".join(sorted(machine)), label, seed_list(runs),
                         mean_std([r.accuracy for r in runs]), f"{minutes:.1f}", *ratios])
    return markdown(["machine", "run", "seeds", "test acc. (%), mean ± std", "wall (min), mean",
                     "wall / the float32 loop's", "wall / the bf16 loop's"], rows)


def seed_list(runs: list[Run]) -> str:
    """The runs' seeds in order, a seed that ran more than once with its count ("0 (2 runs), 1")."""
    counts = Counter(r.seed for r in runs)
    return ", ".join(f"{seed} ({n} runs)" if n > 1 else str(seed) for seed, n in counts.items())


def beside_pairs(root: Path, pe: str) -> list[tuple[Run, Run]]:
    """The current recipe's runs of ``pe`` made again beside the loop, each with the loop run it trained beside: the
    folder ``results/recipe/bf16_24ep_beside_<pe>`` holds, per seed, a run and the loop's run of that seed started
    together, one thread each on one machine (``CONFIG=configs/cifar10.yaml PES=<pe> SEEDS=<seed> JOBS=2
    RECORDS=results/recipe/bf16_24ep_beside_<pe> scripts/recipe_vs_timm.sh``); a pair counts only where the two
    trained at the same time on the same machine (:func:`side_by_side`)."""
    folder = root / "results/recipe" / f"{CURRENT}_beside_{pe}"
    loops = {loop.seed: loop for loop in finished_loops(folder)}
    return [(run, loops[run.seed]) for run in finished_recipe_runs(folder, f"{pe}_s[0-9]*")
            if run.seed in loops and side_by_side([run], [loops[run.seed]])]


def pair_ratios(pairs: list[tuple[Run, Run]]) -> list[float]:
    """Each pair's wall time over that of the loop run beside it (:func:`beside_pairs`)."""
    return [run.minutes / loop.minutes for run, loop in pairs]


def recipe_beside(root: Path) -> str:
    """The current recipe made again beside the loop (:func:`beside_pairs`): one row per pair with both wall times
    and their ratio, and the run's accuracy against its first run of the same seed and config (``results/recipe/
    bf16_24ep``), which a CPU run reproduces; then per PE the ratio's mean ± std over its pairs."""
    rows, summary, repeated = [], [], []
    for pe in LEVER_GOALS:
        pairs = beside_pairs(root, pe)
        first = {run.seed: run for run in finished_recipe_runs(root / "results/recipe" / CURRENT, f"{pe}_s[0-9]*")}
        ratios = pair_ratios(pairs)
        for (run, loop), ratio in zip(pairs, ratios):
            again = first.get(run.seed)
            repeated += [run.last["test_acc"] == again.last["test_acc"]] if again else []  # the same images right
            rows.append(["; ".join(sorted(run.machines)), f"`{pe}`", str(run.seed), f"{run.accuracy:.2f}",
                         f"{again.accuracy:.2f}" if again else "—", f"{run.minutes:.1f}", f"{loop.accuracy:.2f}",
                         f"{loop.minutes:.1f}", f"{ratio:.2f}"])
        if pairs:
            summary.append(f"`{pe}` {mean_std(ratios, 2)} over {len(pairs)} of {len(SEEDS)} seeds")
    table = markdown(["machine", "PE", "seed", "test acc. (%)", "its first run (%)", "wall (min)",
                      "the loop beside it: test acc. (%)", "the loop's wall (min)", "wall / the loop's"], rows)
    if not summary:
        return table + "\nNo pair made yet.\n"
    return (table + f"\nWall / the loop's, mean ± std: {'; '.join(summary)}. The same test accuracy as the first "
            f"run of its seed in {sum(repeated)} of {len(repeated)} pairs.\n")


def one_thread_ratios(root: Path, current: dict[str, list[Run]]) -> tuple[list[str], str]:
    """Each goal PE's wall time against the loop's, one thread each, and how it was measured: over the pairs made
    beside the loop (:func:`beside_pairs`) once every seed of every goal PE has one, else the ``current`` runs over
    the loop's mean on their machine, "side by side" only where each trained beside a loop run."""
    pairs = {pe: beside_pairs(root, pe) for pe in LEVER_GOALS}
    if all(len(p) >= len(SEEDS) for p in pairs.values()):  # every goal PE made again beside the loop, every seed
        return ([mean_std(pair_ratios(pairs[pe]), 2) for pe in LEVER_GOALS],
                "side by side (each seed beside the loop's run of that seed, one thread each, at once on one "
                "machine; mean ± std)")
    loops_by_machine = loop_runs_by_machine(root)
    loops = [run for runs in loops_by_machine.values() for run in runs]
    runs = [current.get(pe, []) for pe in LEVER_GOALS]
    loop_minutes = mean_minutes(loops_by_machine)
    ratios = [against_loop(pe_runs, loop_minutes) for pe_runs in runs]
    return ratios, ("side by side on one thread each" if all(side_by_side(r, loops) for r in runs) else
                    "one thread each, the loop's runs made at another time on the same CPU (not side by side)")


def recipe_current_short(root: Path) -> str:
    """The README's line on the current recipe: each goal PE's accuracy over its seeds and wall time against the
    float32 loop one thread each (:func:`one_thread_ratios`), and, where it ran so, one run at a time on both cores
    (:data:`BOTH_CORES`, each against its own loop run)."""
    recipe = root / "results/recipe"
    current = goal_pe_runs(root)
    parts = []
    for pe in LEVER_GOALS:
        runs = current.get(pe, [])
        seeds = f"{len(runs)} seed{'s' if len(runs) != 1 else ''}"
        parts.append(f"`{pe}` {mean_std([r.accuracy for r in runs])}% ({seeds})")  # CIFAR-10's test split
    ratios, when = one_thread_ratios(root, current)
    two_thread_loops = by_machine([loop for anchor in sorted({a for _, a in BOTH_CORES.values()})
                                   for loop in finished_loops(recipe / f"{CURRENT}_{anchor}")])
    alone = []
    for suffix, (how, _) in BOTH_CORES.items():
        pes = [f"`{pe}` {against_each_loop(runs, two_thread_loops)}" for pe, runs in goal_pe_runs(root, suffix).items()]
        alone += [f"{how}, {', '.join(pes)}"] if pes else []
    count = sum(map(len, two_thread_loops.values()))
    both = (f"; alone on both cores, against each of the loop's {count} two-thread runs on the same CPU: "
            f"{'; '.join(alone)}") if alone else ""
    return (f"`configs/cifar10.yaml` (conv stem, bf16, 24 epochs): {', '.join(parts)}, in {' / '.join(ratios)} of the "
            f"plain loop's wall time, {when}{both}.\n")


def recipe_diagnostic(root: Path) -> str:
    """Two epochs on 12,800 images: which of the loop's choices closes the gap."""
    folder = root / "results/recipe/diagnostic"
    labels = [("timm", "plain timm loop"), ("v", "vitpe (zero-padded crops, LayerNorm before pooling)"),
              ("v_reflect", "+ reflect padding"), ("v_fc", "+ LayerNorm after pooling"), ("v_both", "+ both")]
    return markdown(["run", "test acc. (%), 2,000 images"],
                    [[label, f"{read_run(folder / name).accuracy:.1f}"] for name, label in labels])


#: This study's tables: name -> function of the repository root -> markdown (scripts/report.py).
TABLES: dict[str, Callable[[Path], str]] = {
    "recipe-ablation": recipe_ablation,
    "recipe-levers": recipe_levers,
    "recipe-anchors": recipe_anchors,
    "recipe-beside": recipe_beside,
    "recipe-current-short": recipe_current_short,
    "recipe-diagnostic": recipe_diagnostic,
}
