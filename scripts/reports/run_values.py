"""Numbers inside sentences, read from committed run folders (``results/<study>/<run>/metrics.jsonl``, one line per
epoch): a run's final accuracy, its wall time, how two runs' times compare, an epoch's seconds, its throughput. A
page writes, e.g.,

    the loop took <!-- value: run-minutes recipe/grid/timm_s0 -->56.0<!-- /value --> minutes

Each argument names run folders under results/, shell patterns allowed (``transfer/finetuned/rope_mixed_s?_32_*``), or
a flat record's metrics file (``compare/relbias_scale16/metrics_relbias_scale16_s0.jsonl``);
where a value takes two groups, they are separated by ``vs``."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Callable

from reports.records import figure_or_range, read_yaml


def epochs_of(root: Path, pattern: str) -> list[list[dict]]:
    """The metrics lines of every run folder under results/ that ``pattern`` names, one list per run."""
    paths = sorted((root / "results").glob(pattern if pattern.endswith(".jsonl") else f"{pattern}/metrics.jsonl"))
    if not paths:
        raise ValueError(f"results/{pattern} holds no metrics.jsonl")
    return [[json.loads(line) for line in path.read_text().splitlines() if line.strip()] for path in paths]


def runs_of(root: Path, patterns: tuple[str, ...], value: str) -> list[list[dict]]:
    """Every run the ``patterns`` name, each as its metrics lines."""
    if not patterns:
        raise ValueError(f"{value} takes one or more run folders under results/")
    return [run for pattern in patterns for run in epochs_of(root, pattern)]


def two_groups(args: tuple[str, ...], value: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``A ... vs B ...`` split at ``vs``."""
    if "vs" not in args or args.index("vs") in (0, len(args) - 1):
        raise ValueError(f"{value} takes run folders, then vs, then the run folders to compare them with")
    at = args.index("vs")
    return args[:at], args[at + 1:]


def epoch_seconds(run: list[dict]) -> list[tuple[int, float]]:
    """Each epoch's training size and seconds (training plus its evaluation), from the elapsed times."""
    previous, out = 0.0, []
    for line in run:
        out.append((line.get("img_size", 0), line["elapsed_s"] - previous))
        previous = line["elapsed_s"]
    return out


def run_minutes(root: Path, *patterns: str) -> str:
    """The wall time (minutes, one decimal) of the runs: one figure, or the range "a–b" over several."""
    return figure_or_range((run[-1]["elapsed_s"] / 60 for run in runs_of(root, patterns, "run-minutes")), ".1f")


def run_minutes_total(root: Path, *patterns: str) -> str:
    """The runs' wall times added up (minutes, whole): what running them one after the other took."""
    return f"{sum(run[-1]['elapsed_s'] for run in runs_of(root, patterns, 'run-minutes-total')) / 60:.0f}"


def run_accuracy(root: Path, *patterns: str) -> str:
    """The final test accuracy (%, two decimals, as the run tables print it): one figure, or the range over several."""
    return figure_or_range((100 * run[-1]["test_acc"] for run in runs_of(root, patterns, "run-accuracy")), ".2f")


def run_time_ratio(root: Path, *args: str) -> str:
    """The mean wall time of the first group of runs over the second's (two decimals): ``A ... vs B ...``."""
    first, second = (statistics.fmean(run[-1]["elapsed_s"] for run in runs_of(root, group, "run-time-ratio"))
                     for group in two_groups(args, "run-time-ratio"))
    return f"{first / second:.2f}"


def epoch_time_ratio(root: Path, *args: str) -> str:
    """How long the first group's epochs took against the second's, size by size: at each training size both
    trained at, the mean epoch time of each run of the first group over the mean of the second group's epochs at that
    size; the range over runs and sizes (two decimals). The first epoch at a size is left out where a size has more
    (it carries one-off costs: a compilation, a cache warming)."""
    first, second = two_groups(args, "epoch-time-ratio")

    def by_size(run: list[dict]) -> dict[int, list[float]]:
        sizes: dict[int, list[float]] = {}
        for size, seconds in epoch_seconds(run):
            sizes.setdefault(size, []).append(seconds)
        return {size: times[1:] if len(times) > 1 else times for size, times in sizes.items()}

    reference: dict[int, list[float]] = {}
    for run in runs_of(root, second, "epoch-time-ratio"):
        for size, times in by_size(run).items():
            reference.setdefault(size, []).extend(times)
    ratios = [statistics.fmean(times) / statistics.fmean(reference[size])
              for run in runs_of(root, first, "epoch-time-ratio")
              for size, times in by_size(run).items() if size in reference]
    if not ratios:
        raise ValueError(f"{' '.join(first)} and {' '.join(second)} share no training size")
    return figure_or_range(ratios, ".2f")


def epoch_time(root: Path, which: str, *patterns: str) -> str:
    """An epoch's seconds (whole) in the runs: ``first`` (each run's first epoch), ``fastest`` or ``mean`` (over every
    epoch of every run); one figure, or the range over runs for ``first``."""
    runs = runs_of(root, patterns, "epoch-time")
    seconds = [[s for _, s in epoch_seconds(run)] for run in runs]
    if which == "first":
        return figure_or_range((run[0] for run in seconds), ".0f")
    if which in ("fastest", "mean"):
        every = [s for run in seconds for s in run]
        return f"{(min(every) if which == 'fastest' else statistics.fmean(every)):.0f}"
    raise ValueError(f"epoch-time takes first, fastest or mean, not {which!r}")


def run_throughput(root: Path, *patterns: str) -> str:
    """Training images per second of the runs' median epoch, to the nearest hundred ("4,700"); the range over
    several runs."""
    return figure_or_range((round(statistics.median(line["img_per_s"] for line in run), -2)
                            for run in runs_of(root, patterns, "run-throughput")), ",.0f")


def run_steps(root: Path, *patterns: str) -> str:
    """The optimiser steps the runs took ("13,294"): one figure, or the range over several."""
    return figure_or_range((run[-1]["step"] for run in runs_of(root, patterns, "run-steps")), ",")


def summed_lr(root: Path, config: str, metrics: str) -> str:
    """The sum of the learning rates of every optimiser step of a run's schedule (two decimals), rebuilt from its
    resolved config with the steps per epoch of its metrics (two files under results/, the layout of a run folder or
    of a flat record): how far AdamW can move one parameter over the run (docs/results/bias_growth.md)."""
    from bias_stats import summed_learning_rate  # scripts/bias_stats.py, beside this package

    paths = [root / "results" / name for name in (config, metrics)]
    for path in paths:
        if not path.is_file():
            raise ValueError(f"{path.relative_to(root)} is not a file")
    last = json.loads(paths[1].read_text().splitlines()[-1])
    return f"{summed_learning_rate(read_yaml(paths[0]), last['step'] // last['epoch']):.2f}"


#: Numbers inside sentences (scripts/report.py's ``<!-- value: NAME ARG ... -->``), each named as its function with
#: dashes: ``run-minutes`` is :func:`run_minutes`.
VALUES: dict[str, Callable[..., str]] = {
    value.__name__.replace("_", "-"): value
    for value in (run_minutes, run_minutes_total, run_accuracy, run_time_ratio, epoch_time_ratio, epoch_time,
                  run_throughput, run_steps, summed_lr)
}
