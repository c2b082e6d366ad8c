"""The text studies: the synthetic tasks' length sweeps and SST-2."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Callable

from reports.records import (SEEDS, figure_or_range, markdown, mean_std, read_flat_run, read_jsonl, read_yaml,
                             resolution_table, sweep)


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
    published = _flat(read_yaml(folder / "config.yaml"))
    ignored = {"out_dir", "data.root", "train.threads", "train.seed", "model.pe"}
    trials = [(folder / "earlier", "lr5e-4_minfreq1", folder / "earlier/lr5e-4/metrics_learnable.jsonl")]
    trials += [(folder / "trials", p.stem[len("config_"):], p.with_name(p.name.replace("config_", "metrics_")
                                                                         .replace(".yaml", ".jsonl")))
               for p in sorted((folder / "trials").glob("config_*.yaml"))]
    groups: dict[str, list[float]] = defaultdict(list)
    for where, name, metrics in trials:
        config = _flat(read_yaml(where / f"config_{name}.yaml"))
        changed = [f"`{k}={config.get(k)}`" for k in sorted(set(config) | set(published))
                   if k not in ignored and config.get(k) != published.get(k) and config.get(k) is not None]
        groups[", ".join(changed) or "the published config"].append(100 * read_jsonl(metrics)[-1]["test_acc"])
    published_runs = [read_flat_run(folder, f"learnable_s{s}").accuracy for s in SEEDS]
    rows = [[change, " / ".join(f"{a:.1f}" for a in accs)] for change, accs in groups.items()]
    rows.append(["the published config (`configs/sst2.yaml`), seeds 0 / 1 / 2",
                 " / ".join(f"{a:.1f}" for a in published_runs)])
    return markdown(["what differs from the published config (`learnable`, 3 epochs)", "dev acc. (%), by seed"], rows)


def sst2_runs(root: Path) -> list[list[dict]]:
    """The metrics lines of every published SST-2 run (each PE of the table, each seed)."""
    folder = root / "results/text/sst2"
    return [read_jsonl(folder / f"metrics_{pe}_s{s}.jsonl") for pe in SST2_PES for s in SEEDS]


def sst2_train_accuracy(root: Path) -> str:
    """The range of the published SST-2 runs' training accuracy after their last epoch (%, whole)."""
    return figure_or_range((100 * run[-1]["train_acc"] for run in sst2_runs(root)), ".0f")


def sst2_minutes(root: Path) -> str:
    """The range of the published SST-2 runs' wall times (minutes, whole)."""
    return figure_or_range((run[-1]["elapsed_s"] / 60 for run in sst2_runs(root)), ".0f")


def sst2_lengths(root: Path, split: str, statistic: str) -> str:
    """A statistic of SST-2's lengths in words (``train`` or ``dev``; ``mean``, ``median``, ``p95``, ``max``, ``n``),
    as the text study recorded them (results/text/sst2/data_stats.json)."""
    stats = json.loads((root / "results/text/sst2/data_stats.json").read_text())
    if split not in stats or statistic not in stats[split]:
        raise ValueError(f"sst2-lengths takes train|dev and one of {', '.join(stats['train'])}")
    value = stats[split][statistic]
    return f"{value:,}" if statistic == "n" else f"{value:.1f}".removesuffix(".0")


#: Numbers inside sentences (scripts/report.py's ``<!-- value: NAME ARG ... -->``).
VALUES: dict[str, Callable[..., str]] = {
    "sst2-train-accuracy": sst2_train_accuracy,
    "sst2-minutes": sst2_minutes,
    "sst2-lengths": sst2_lengths,
}

#: This study's tables: name -> function of the repository root -> markdown (scripts/report.py).
TABLES: dict[str, Callable[[Path], str]] = {
    "text-order": text_length("order"),
    "text-adjacent": text_length("adjacent"),
    "sst2": sst2,
    "sst2-trials": sst2_trials,
}
