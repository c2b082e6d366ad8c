"""The published tables (:data:`TABLES`: name -> function of the repository root -> markdown), each computed from
committed records only: run folders (``config.yaml`` or a baseline's ``config.json``, ``metrics.jsonl``), the
sweeps' ``resolution.json`` / ``length.json`` and the benchmark's ``bench.json``. scripts/report.py puts them into
the pages."""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import yaml

import vitpe.pe
from vitpe.bench.targets import check_targets, summary, targets_grid
from vitpe.machine import as_one_process, cpu_of
from vitpe.resolution.report import SEED_SUFFIX, accuracy_grid, gains_table, paired_gains, summarise

SEED = re.compile(r"_s(\d+)$")
SITE_NAMES = {"tokens": "tokens", "qk": "q, k", "logits": "logits", "none": "—"}
MISSING = "…"  # a seed whose run is not finished (or not committed) yet


# ------------------------------------------------------------------------------------------------------- records
@dataclass
class Run:
    name: str
    config: dict
    records: list[dict]
    recorded_machine: frozenset[str] = frozenset()  # the folder's machine.json, for records that do not say

    @property
    def planned(self) -> int | None:
        return (self.config.get("train") or {}).get("epochs") or self.config.get("epochs")

    @property
    def finished(self) -> bool:
        return bool(self.records) and (self.planned is None or self.records[-1]["epoch"] >= self.planned)

    @property
    def last(self) -> dict:
        return self.records[-1]

    @property
    def accuracy(self) -> float:
        return 100 * self.last["test_acc"]

    @property
    def minutes(self) -> float:
        return self.last["elapsed_s"] / 60

    @property
    def machines(self) -> frozenset[str]:
        """What ran the run's epochs (each record's ``machine``, or the folder's ``machine.json`` for records written
        before train.py recorded it); empty where nothing says."""
        return frozenset(r["machine"] for r in self.records if "machine" in r) or self.recorded_machine

    @property
    def pe(self) -> str:
        """The run's ``model.pe`` (a vitpe run; a timm loop has none)."""
        return self.config["model"]["pe"]

    @property
    def seed(self) -> int | None:
        match = SEED.search(self.name)
        return int(match.group(1)) if match else None


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def read_run(folder: Path) -> Run:
    """A run folder: ``config.yaml`` (vitpe) or ``config.json`` (scripts/timm_baseline.py) and ``metrics.jsonl``."""
    if (folder / "config.yaml").is_file():
        config = yaml.safe_load((folder / "config.yaml").read_text())
    else:
        config = json.loads((folder / "config.json").read_text())
    machine = folder / "machine.json"
    recorded = frozenset([json.loads(machine.read_text())["machine"]]) if machine.is_file() else frozenset()
    return Run(folder.name, config, read_jsonl(folder / "metrics.jsonl"), recorded)


def read_flat_run(folder: Path, name: str) -> Run:
    """A run stored as ``config_NAME.yaml`` and ``metrics_NAME.jsonl`` side by side (older records)."""
    config_path = folder / f"config_{name}.yaml"
    config = yaml.safe_load(config_path.read_text()) if config_path.is_file() else {}
    return Run(name, config, read_jsonl(folder / f"metrics_{name}.jsonl"))


def sweep(path: Path) -> list[dict]:
    """A sweep's records, each with the ``group`` its run belongs to (its name without the seed)."""
    return [{**r, "group": SEED_SUFFIX.sub("", r["run"])} for r in json.loads(path.read_text())]


# ---------------------------------------------------------------------------------------------------- formatting
def with_sign(value: float, digits: int = 1) -> str:
    """A change: the value with its sign, a minus sign rather than a hyphen."""
    return f"{value:+.{digits}f}".replace("-", "−")


def mean_std(values: list[float], digits: int = 1, signed: bool = False) -> str:
    """Mean ± std (std only over more than one value); ``signed`` for a change (:func:`with_sign`)."""
    if not values:
        return MISSING
    mean = statistics.fmean(values)
    text = with_sign(mean, digits) if signed else f"{mean:.{digits}f}"
    return text + (f" ± {statistics.stdev(values):.{digits}f}" if len(values) > 1 else "")


def per_seed(values: dict[int, float], seeds: Iterable[int], digits: int = 2) -> str:
    return " / ".join(f"{values[s]:.{digits}f}" if s in values else MISSING for s in seeds)


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(str, row)) + " |" for row in rows]) + "\n"


def site_of(pe: str) -> str:
    return SITE_NAMES[vitpe.pe.get(pe).site]


# --------------------------------------------------------------------------------------- the recipe's PE grid
SEEDS = (0, 1, 2)
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


#: The CPUs the pages name by letter, from A: the first grid runs' machine (which did not record itself), then B. A CPU
#: not listed takes a letter after them, in the order of its description, so a machine has one letter on every page.
NAMED_MACHINES = ("", "AMD EPYC (L2 1024K, L3 32768K)")


def machine_cpu(machines: frozenset[str]) -> str:
    """The CPU (or CPUs, joined) of a run's machine descriptions, without the thread counts; "" where unrecorded."""
    return " + ".join(sorted(set(map(cpu_of, machines))))  # one CPU at several thread counts is one CPU


def named_machine(letter: dict[frozenset[str], str], machine: frozenset[str], unrecorded: str = "not recorded") -> str:
    """``"<letter>: <what ran it>"`` for a machine of :func:`machine_letters`, the legend under a table."""
    return f"{letter[machine]}: {'; '.join(sorted(machine)) or unrecorded}"


def machine_letters(machines: Iterable[frozenset[str]]) -> dict[frozenset[str], str]:
    """Each machine's letter (:data:`NAMED_MACHINES`), in the order of the letters."""
    machines = set(machines)
    cpus = [*NAMED_MACHINES, *sorted({machine_cpu(m) for m in machines} - set(NAMED_MACHINES))]
    ordered = sorted(machines, key=lambda m: (cpus.index(machine_cpu(m)), sorted(m)))
    return {m: chr(ord("A") + cpus.index(machine_cpu(m))) for m in ordered}


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
    line = (f"Goal: {goals}, mean of three seeds, in no more wall time than the loop (one thread each, side by "
            f"side). " + (f"Met by: {'; '.join(met_by)}." if met_by else "Not met yet."))
    header = ["lever", "what changed"]
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


def recipe_current_short(root: Path) -> str:
    """The README's line on the current recipe: each goal PE's accuracy over its seeds and wall time against the
    float32 loop side by side, and, where it ran so, one run at a time on both cores (:data:`BOTH_CORES`, each
    against its own loop run)."""
    loop_minutes = loop_minutes_by_machine(root)
    recipe = root / "results/recipe"
    parts, ratios = [], []
    for pe in LEVER_GOALS:
        runs = finished_recipe_runs(recipe / CURRENT, f"{pe}_s[0-9]*")
        seeds = f"{len(runs)} seed{'s' if len(runs) != 1 else ''}"
        parts.append(f"`{pe}` {mean_std([r.accuracy for r in runs])}% ({seeds})")  # CIFAR-10's test split
        ratios.append(against_loop(runs, loop_minutes))
    alone = []
    for suffix, (how, _) in BOTH_CORES.items():
        pes = [f"`{pe}` {against_loop(runs, mean_minutes(both_cores_loops(root, suffix)))}" for pe in LEVER_GOALS
               if (runs := finished_recipe_runs(recipe / f"{CURRENT}_{suffix}", f"{pe}_s[0-9]*"))]
        alone += [f"{how}, {', '.join(pes)}"] if pes else []
    both = f"; alone on both cores: {'; '.join(alone)}" if alone else ""
    return (f"`configs/cifar10.yaml` (conv stem, bf16, 24 epochs): {', '.join(parts)}, in {' / '.join(ratios)} of the "
            f"plain loop's wall time, side by side on one thread each{both}.\n")


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


# ------------------------------------------------------------------------------------------- the 3-epoch grid
def resolution_table(records: list[dict], x_key: str = "resolution") -> str:
    """Mean ± std over seeds per (PE, mode) and size; n/a where a PE cannot resize so."""
    grid = accuracy_grid(summarise(records, x_key), x_key, show_runs=False, label=lambda pe: f"`{pe}`")
    return "\n".join(grid) + "\n"


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


def bias_stats(root: Path) -> str:
    """How far the trained biases spread, against AdamW's step bound (scripts/bias_stats.py --json)."""
    path = root / "results/compare/bias_stats.json"
    if not path.is_file():
        return (f"{MISSING} Not committed yet (`results/compare/bias_stats.json`, from "
                "`scripts/bias_stats.py --json`).\n")
    rows = []
    for s in json.loads(path.read_text()):
        rows.append([s["run"], f"`{s['pe']}`", ", ".join(f"{v:.2f}" for v in s["std_over_keys"]),
                     ", ".join(f"{v:.1f}" for v in s["range"]), f"{s['summed_lr']:.2f} ({2 * s['summed_lr']:.1f})"])
    return markdown(["run (3 epochs)", "PE", "bias spread over keys (std), per layer", "max − min, per layer",
                     "summed lr (bound on max − min)"], rows)


# ---------------------------------------------------------------------------------------- the detail protocol
def detail_records(root: Path) -> list[dict]:
    """The detail protocol's sweep, the multi-resolution runs named by their training sizes."""
    records = sweep(root / "results/detail/resolution.json")
    for r in records:
        if r["run"].startswith("multires_"):
            r["pe"] = f"{r['pe']}, 12–20 px"
    return records


def detail_gains(root: Path) -> str:
    """Trained at 16 px, tested at 16-48 px: each run against its own 16 px accuracy."""
    return gains_table(paired_gains(detail_records(root), "resolution"), "resolution").split("\n\n", 2)[-1]



# ------------------------------------------------------------------------------ resolution transfer: the remedies
TRANSFER_MODES = ("interpolate", "extrapolate", "ntk", "yarn")
TRANSFER_STAGES = ("trained", "augmented", "finetuned")  # scripts/transfer.sh's folders, in the order of the table
#: What follows ``<pe>_`` in a transfer run's name: ``s0`` (as trained), ``<aug>_s0`` (trained with an augmentation
#: setting), ``s0_<px>_<mode>`` (fine-tuned one epoch at px with positions resized by mode); scripts/transfer.sh.
TRANSFER_RUN = re.compile(r"^(?:(?P<aug>[a-z0-9_]+?)_)?s(?P<seed>\d+)(?:_(?P<px>\d+)_(?P<mode>[a-z]+))?$")


def transfer_remedy(run: str, pe: str) -> tuple[str, str, int]:
    """(stage folder, remedy label, seed) of a transfer run, from its name."""
    parts = TRANSFER_RUN.match(run[len(pe) + 1:])
    if parts is None:
        raise ValueError(f"{run}: not a scripts/transfer.sh run name (<pe>_s<seed>, <pe>_<aug>_s<seed>, "
                         f"<pe>_s<seed>_<px>_<mode>)")
    seed = int(parts["seed"])
    if parts["px"]:
        return "finetuned", f"fine-tuned at {parts['px']} px, {parts['mode']}d", seed
    if parts["aug"]:
        return "augmented", f"trained with `{parts['aug']}`", seed
    return "trained", "as trained", seed


TransferCells = dict[tuple[str, int, str], dict[tuple[str, int], dict[int, float]]]
#: The experiment's goal: a model trained at 16 px at least this many points more accurate at 32 px than at 16 px,
#: without fine-tuning, mean over three seeds.
TRANSFER_GOAL = 3.0


def transfer_records(root: Path) -> tuple[TransferCells, dict[tuple[str, int, str], list[Run]]]:
    """Accuracy (%) per (pe, stage index, remedy) -> (mode, size) -> seed, and each group's training runs."""
    base = root / "results/transfer"
    accuracy: TransferCells = defaultdict(lambda: defaultdict(dict))
    trainings: dict[tuple[str, int, str], list[Run]] = defaultdict(list)
    for r in sweep(base / "resolution/resolution.json"):
        stage, remedy, seed = transfer_remedy(r["run"], r["pe"])
        key = (r["pe"], TRANSFER_STAGES.index(stage), remedy)
        if r["accuracy"] is not None:
            accuracy[key][(r["pe_resize"], r["resolution"])][seed] = 100 * r["accuracy"]
        if r["resolution"] == 16 and r["pe_resize"] == "interpolate":
            trainings[key].append(read_run(base / stage / r["run"]))
    return accuracy, trainings


def gains_at_32(cells: dict[tuple[str, int], dict[int, float]], mode: str) -> tuple[list[float], list[float]]:
    """Each seed's change from its own 16 px accuracy (interpolate) to 32 px in ``mode``, and its 32 px accuracy."""
    at_16, at_32 = cells[("interpolate", 16)], cells.get((mode, 32), {})
    seeds = [s for s in at_32 if s in at_16]
    return [at_32[s] - at_16[s] for s in seeds], [at_32[s] for s in seeds]


def transfer_remedies(root: Path) -> str:
    """Each PE and remedy of the transfer experiment: accuracy at 16 px (the training size), and at 32 px in each
    test mode with its change from 16 px (each run against itself, mean ± std over seeds), and the training's cost
    (minutes on each machine, lettered under the table when the runs ran on several); then whether a remedy without
    fine-tuning reaches the goal."""
    accuracy, trainings = transfer_records(root)
    letter = machine_letters(run.machines for runs in trainings.values() for run in runs)
    rows = []
    for key in sorted(accuracy):  # by PE, then as trained / augmented / fine-tuned
        pe, _, remedy = key
        cells = accuracy[key]
        at_16 = cells[("interpolate", 16)]
        row = [f"`{pe}`", remedy, str(len(at_16)), mean_std(list(at_16.values()))]
        for mode in TRANSFER_MODES:
            gains, at_32 = gains_at_32(cells, mode)
            row.append(f"{statistics.fmean(at_32):.1f} ({mean_std(gains, signed=True)})" if gains else "n/a")
        minutes = mean_minutes(by_machine(trainings[key]))
        row.append(" / ".join(f"{minutes[m]:.1f}" + (f" ({letter[m]})" if len(letter) > 1 else "")
                              for m in sorted(minutes, key=letter.get)))
        rows.append(row)
    described = "; ".join(named_machine(letter, m) for m in letter)
    machine_note = f"\nTraining minutes by machine: {described}.\n" if len(letter) > 1 else ""
    return markdown(["PE", "remedy", "seeds", "16 px (%)", *(f"32 px, {m} (− 16 px)" for m in TRANSFER_MODES),
                     "training (min)"], rows) + machine_note + "\n" + transfer_goal(accuracy) + "\n"


def transfer_goal(accuracy: TransferCells) -> str:
    """One line: which remedies without fine-tuning gain at least TRANSFER_GOAL points at 32 px over three seeds,
    or, while none does, the three largest mean gains so far (each PE and remedy in its best test mode)."""
    found = []  # per PE and remedy, its best test mode: (mean gain, seeds, mean accuracy at 32 px, label)
    for (pe, stage, remedy), cells in accuracy.items():
        if TRANSFER_STAGES[stage] == "finetuned":
            continue
        modes = []
        for mode in TRANSFER_MODES:
            gains, at_32 = gains_at_32(cells, mode)
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
    return goal + "Not met yet" + (f"; the largest mean gains so far: {listed(best)}." if best else ".")


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


# ------------------------------------------------------------------------------------------------------ text
def text_length(task: str) -> Callable[[Path], str]:
    def table(root: Path) -> str:
        return resolution_table(sweep(root / f"results/text/length_{task}/length.json"), x_key="length")

    return table


SST2_PES = ("none", "learnable", "sincos", "rope_axial")


def sst2(root: Path) -> str:
    """SST-2 dev accuracy after epoch 3, per seed and PE."""
    folder = root / "results/text/sst2"
    accs = {pe: {s: read_flat_run(folder, f"{pe}_s{s}").accuracy for s in SEEDS} for pe in SST2_PES}
    rows = [[f"seed {s}", *(f"{accs[pe][s]:.1f}" for pe in SST2_PES)] for s in SEEDS]
    rows.append(["mean ± std", *(mean_std(list(accs[pe].values())) for pe in SST2_PES)])
    return markdown(["SST-2 dev accuracy (%)", *(f"`{pe}`" for pe in SST2_PES)], rows)


def _flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict) and key != "pe_options":
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def sst2_trials(root: Path) -> str:
    """Every recorded SST-2 trial (``learnable``), by what its config changed against the published one."""
    folder = root / "results/text/sst2"
    published = _flat(yaml.safe_load((folder / "config.yaml").read_text()))
    ignored = {"out_dir", "data.root", "train.threads", "train.seed", "model.pe"}
    trials = [(folder / "earlier", "lr5e-4_minfreq1", folder / "earlier/lr5e-4/metrics_learnable.jsonl")]
    trials += [(folder / "trials", p.stem[len("config_"):], p.with_name(p.name.replace("config_", "metrics_")
                                                                         .replace(".yaml", ".jsonl")))
               for p in sorted((folder / "trials").glob("config_*.yaml"))]
    groups: dict[str, list[float]] = defaultdict(list)
    for where, name, metrics in trials:
        config = _flat(yaml.safe_load((where / f"config_{name}.yaml").read_text()))
        changed = [f"`{k}={config.get(k)}`" for k in sorted(set(config) | set(published))
                   if k not in ignored and config.get(k) != published.get(k) and config.get(k) is not None]
        groups[", ".join(changed) or "the published config"].append(100 * read_jsonl(metrics)[-1]["test_acc"])
    published_runs = [read_flat_run(folder, f"learnable_s{s}").accuracy for s in SEEDS]
    rows = [[change, " / ".join(f"{a:.1f}" for a in accs)] for change, accs in groups.items()]
    rows.append(["the published config (`configs/sst2.yaml`), seeds 0 / 1 / 2",
                 " / ".join(f"{a:.1f}" for a in published_runs)])
    return markdown(["what differs from the published config (`learnable`, 3 epochs)", "dev acc. (%), by seed"], rows)


# ------------------------------------------------------------------------------------------------ benchmarks
CPU_RUNS = {"eager": ("default_cpu_fp32", "recipe_cpu_fp32"),
            "compiled": ("default_cpu_fp32_compiled", "recipe_cpu_fp32_compiled")}
GPU_RUNS = ("default_h200_bf16", "recipe_h200_bf16")


def _bench(root: Path, name: str) -> dict:
    return json.loads((root / "results/bench" / name / "bench.json").read_text())


def _preset(result: dict) -> str:
    return "recipe" if result["config"].get("pool") == "mean" else "default"


def bench_targets(mode: str) -> Callable[[Path], str]:
    """Every speed target over the current CPU runs of ``mode`` (both presets, both sizes), with its interval."""
    def table(root: Path) -> str:
        checks = []
        for name in CPU_RUNS[mode]:
            result = _bench(root, name)
            checks += [{"run": _preset(result), **c} for c in check_targets(result)]
        return "\n".join([*targets_grid(checks), "", summary(checks)]) + "\n"

    return table


def bench_throughput(root: Path) -> str:
    """Training and inference throughput of timm's ViT and of vitpe's without a PE, per current run and size."""
    rows = []
    for name in (*CPU_RUNS["eager"], *CPU_RUNS["compiled"], *GPU_RUNS):
        result = _bench(root, name)
        machine, cfg = result["machine"], result["config"]
        device = machine.get("gpu") or machine.get("cpu_model") or machine["processor"]
        for size in cfg["img_sizes"]:
            by_pe = {r["pe"]: r for r in result["rows"] if r["img_size"] == size}
            rows.append([f"`{name}`", device, _preset(result), "compiled" if cfg.get("compile") else "eager", size,
                         f"{by_pe['timm']['train_img_s']:.0f}", f"{by_pe['none']['train_img_s']:.0f}",
                         f"{by_pe['learnable']['train_vs_timm']:.3f}" if "learnable" in by_pe else MISSING,
                         f"{by_pe['timm']['infer_img_s']:.0f}", f"{by_pe['none']['infer_img_s']:.0f}"])
    return markdown(["run (`results/bench/`)", "device", "preset", "mode", "px", "timm train img/s",
                     "vitpe `none` train img/s", "`learnable` / timm, train", "timm infer img/s",
                     "vitpe `none` infer img/s"], rows)


def bench_gpu(root: Path) -> str:
    """The GPU runs: each PE's step time over no PE, and the kernels it adds to a training step (runs that count)."""
    rows = []
    for name in GPU_RUNS:
        result = _bench(root, name)
        kernels = {(r["pe"], r["img_size"]): r.get("train_kernels") for r in result["rows"]}
        for r in result["rows"]:
            if r["pe"] not in ("timm", "none (again)"):
                added = kernels[r["pe"], r["img_size"]], kernels["none", r["img_size"]]
                rows.append([f"`{name}`", r["img_size"], f"`{r['pe']}`", f"{1 / r['train_vs_none'] - 1:+.1%}",
                             f"{1 / r['infer_vs_none'] - 1:+.1%}",
                             MISSING if None in added else f"{added[0] - added[1]:+d}"])
    return markdown(["run (`results/bench/`)", "px", "PE", "training step over `none`", "inference over `none`",
                     "kernels per training step over `none`"], rows)


AB_DIMS = re.compile(r"^== (\w+) dims")
AB_OVER_NONE = re.compile(r"^(train|infer) (\d+)px (\w+)/(old|new) +[\d.]+ ms +over none ([+-][\d.]+)%")
AB_RATIO = re.compile(r"^(train|infer) (\d+)px (\w+) new/old ([\d.]+) \[([\d.]+), ([\d.]+)\]")


def bench_gpu_ab(root: Path) -> str:
    """The GPU A/Bs of ``benchmarks/changes.py`` (their logs in ``results/bench/ab_h200/``): old and new over
    ``none``, and new/old with its 90% interval."""
    rows = []
    for log in sorted((root / "results/bench/ab_h200").glob("*.log")):
        dims, over = None, {}
        for line in log.read_text().splitlines():
            if match := AB_DIMS.match(line):
                dims = match.group(1)
            elif match := AB_OVER_NONE.match(line):
                kind, px, pe, side, value = match.groups()
                over[kind, px, pe, side] = f"{float(value):+.1f}%"
            elif match := AB_RATIO.match(line):
                kind, px, pe, ratio, low, high = match.groups()
                rows.append([f"`{log.stem}`", dims, px, "training" if kind == "train" else "inference", f"`{pe}`",
                             over[kind, px, pe, "old"], over[kind, px, pe, "new"], f"{ratio} ({low}…{high})"])
    return markdown(["change (`benchmarks/changes.py`)", "dims", "px", "step", "PE", "old over `none`",
                     "new over `none`", "new/old (90% interval)"], rows)


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
    "compare-accuracy": compare_accuracy,
    "compare-resolution": compare_resolution,
    "compare-multires": compare_multires,
    "relbias-scale16": relbias_scale16,
    "bias-stats": bias_stats,
    "detail-gains": detail_gains,
    "transfer-remedies": transfer_remedies,
    "cpu-recipe-accuracy": cpu_recipe_accuracy,
    "cpu-recipe-resolution": cpu_recipe_resolution,
    "text-order": text_length("order"),
    "text-adjacent": text_length("adjacent"),
    "sst2": sst2,
    "sst2-trials": sst2_trials,
    "bench-targets-eager": bench_targets("eager"),
    "bench-targets-compiled": bench_targets("compiled"),
    "bench-throughput": bench_throughput,
    "bench-gpu": bench_gpu,
    "bench-gpu-ab": bench_gpu_ab,
}
