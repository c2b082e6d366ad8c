"""Imagewoof2-320: the stream loader against the in-memory path at the Imagenette grid's budget (``cpb``, three
seeds), from the runs in ``results/imagewoof/{memory,stream}/``."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Callable

from reports.records import finished_by_seed, markdown, mean_std, per_seed, with_sign

SEEDS = (0, 1, 2)
LOADERS = {"memory": ("in memory (`configs/imagenette_grid.yaml data.dataset=imagewoof`): the centred squares "
                      "decoded once at 160 px"),
           "stream": ("streamed (`configs/imagewoof_stream.yaml`): each photograph decoded at its native aspect by a "
                      "worker, cropped from the whole")}


def finished_runs(root: Path, loader: str) -> dict[int, object]:
    """The finished ``cpb_s<seed>`` runs of one loader, by seed."""
    return finished_by_seed(root / "results/imagewoof" / loader, "cpb", SEEDS)


def imagewoof_stream(root: Path) -> str:
    """Test accuracy at 64 px per seed and its mean ± std, of each loader (no wall times: these runs shared the
    machine with benchmarks that paused them)."""
    rows = []
    for loader, what in LOADERS.items():
        runs = finished_runs(root, loader)
        accuracies = {seed: run.accuracy for seed, run in runs.items()}
        rows.append([what, per_seed(accuracies, SEEDS), mean_std(list(accuracies.values()))])
    return markdown(["`cpb`, 30 epochs 40 → 64 px", "test acc. at 64 px, seeds 0 / 1 / 2 (%)", "mean ± std"], rows)


def imagewoof_verdict(root: Path) -> str:
    """The sentence's answer: the streamed mean against the in-memory mean, their gap, and whether the gap is within
    the larger of the two seeds' standard deviations; what is still training while any seed is."""
    runs = {loader: finished_runs(root, loader) for loader in LOADERS}
    missing = sum(len(SEEDS) - len(r) for r in runs.values())
    if missing:
        return f"not answered yet: {missing} of {2 * len(SEEDS)} runs are still training"
    acc = {loader: [run.accuracy for run in r.values()] for loader, r in runs.items()}
    gap = statistics.fmean(acc["stream"]) - statistics.fmean(acc["memory"])
    spread = max(statistics.stdev(acc["stream"]), statistics.stdev(acc["memory"]))
    if abs(gap) <= spread:
        verdict = "within the seeds' spread: the stream loader reaches the in-memory accuracy"
    elif gap > 0:
        verdict = "above the seeds' spread: the stream loader reaches the in-memory accuracy and passes it"
    else:
        verdict = "below the seeds' spread: the stream loader does not reach the in-memory accuracy"
    return (f"streamed {mean_std(acc['stream'])}% against {mean_std(acc['memory'])}% in memory: a gap of "
            f"{with_sign(gap)} points, {verdict} (the spread: the larger standard deviation, {spread:.1f})")


#: This study's tables: name -> function of the repository root -> markdown (scripts/report.py).
TABLES: dict[str, Callable[[Path], str]] = {"imagewoof-stream": imagewoof_stream}

#: This study's numbers inside sentences (scripts/report.py's ``<!-- value: NAME -->``).
VALUES: dict[str, Callable[[Path], str]] = {"imagewoof-verdict": imagewoof_verdict}
