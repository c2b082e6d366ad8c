"""What the reports read: committed run folders (``config.yaml`` or a baseline's ``config.json``,
``metrics.jsonl``) and sweeps, and how they print: signs, mean ± std, per-seed cells, markdown tables."""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Iterable

import yaml

import vitpe.pe
from vitpe.resolution.report import SEED_SUFFIX, accuracy_grid, summarise

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
    def interval(self) -> tuple[datetime, datetime] | None:
        """When the run trained: from its last record's ``finished_at`` back by its ``elapsed_s`` (a resumed run's
        pause is not in it); None for records written before train.py recorded the time."""
        if "finished_at" not in self.last:
            return None
        end = datetime.fromisoformat(self.last["finished_at"])
        return end - timedelta(seconds=self.last["elapsed_s"]), end

    @property
    def pe(self) -> str:
        """The run's ``model.pe`` (a vitpe run; a timm loop has none)."""
        return self.config["model"]["pe"]

    @property
    def seed(self) -> int | None:
        match = SEED.search(self.name)
        return int(match.group(1)) if match else None


#: libyaml's safe loader where PyYAML has it: a report reads a few hundred run configs, ten times faster so.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> dict:
    """A run's config file, read safely (no tags that build objects)."""
    return yaml.load(path.read_text(), Loader=SAFE_LOADER)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def read_run(folder: Path) -> Run:
    """A run folder: ``config.yaml`` (vitpe) or ``config.json`` (scripts/timm_baseline.py) and ``metrics.jsonl``."""
    if (folder / "config.yaml").is_file():
        config = read_yaml(folder / "config.yaml")
    else:
        config = json.loads((folder / "config.json").read_text())
    machine = folder / "machine.json"
    recorded = frozenset([json.loads(machine.read_text())["machine"]]) if machine.is_file() else frozenset()
    return Run(folder.name, config, read_jsonl(folder / "metrics.jsonl"), recorded)


def finished_by_seed(folder: Path, name: str, seeds: Iterable[int] = (0, 1, 2)) -> dict[int, Run]:
    """The finished runs ``folder/<name>_s<seed>``, by seed (a seed not trained or not finished left out)."""
    runs = {}
    for seed in seeds:
        run_folder = folder / f"{name}_s{seed}"
        if (run_folder / "metrics.jsonl").is_file() and (run := read_run(run_folder)).finished:
            runs[seed] = run
    return runs


def read_flat_run(folder: Path, name: str) -> Run:
    """A run stored as ``config_NAME.yaml`` and ``metrics_NAME.jsonl`` side by side (older records)."""
    config_path = folder / f"config_{name}.yaml"
    config = read_yaml(config_path) if config_path.is_file() else {}
    return Run(name, config, read_jsonl(folder / f"metrics_{name}.jsonl"))


def sweep(path: Path) -> list[dict]:
    """A sweep's records, each with the ``group`` its run belongs to (its name without the seed)."""
    return [{**r, "group": SEED_SUFFIX.sub("", r["run"])} for r in json.loads(path.read_text())]


def named_by_option(records: list[dict]) -> list[dict]:
    """``records`` with each run tested with a PE option changed (eval.py's ``RUN@NAME=VALUE``, a row of its own)
    named by its option in the ``pe`` its table shows: "lookhere, large_grid_slope=0.6"."""
    return [{**r, "pe": f"{r['pe']}, {r['run'].partition('@')[2]}"} if "@" in r["run"] else r for r in records]


# ---------------------------------------------------------------------------------------------------- formatting
def with_sign(value: float, digits: int = 1, minus: str = "−") -> str:
    """A change: the value with its sign, written with ``minus`` (a minus sign rather than a hyphen, unless the table
    beside it writes hyphens)."""
    return f"{value:+.{digits}f}".replace("-", minus)


def mean_std(values: list[float], digits: int = 1, signed: bool = False, minus: str = "−") -> str:
    """Mean ± std (std only over more than one value); ``signed`` for a change (:func:`with_sign`)."""
    if not values:
        return MISSING
    mean = statistics.fmean(values)
    text = with_sign(mean, digits, minus) if signed else f"{mean:.{digits}f}"
    return text + (f" ± {statistics.stdev(values):.{digits}f}" if len(values) > 1 else "")


def span(low: str, high: str) -> str:
    """"low–high", or one figure where the two read the same."""
    return low if low == high else f"{low}–{high}"


def figure_or_range(numbers: Iterable[float], spec: str) -> str:
    """The numbers' lowest and highest, each formatted by ``spec`` (".1f", ",.0f"): one figure where they read the
    same, else "low–high"."""
    numbers = list(numbers)
    return span(format(min(numbers), spec), format(max(numbers), spec))


def per_seed(values: dict[int, float], seeds: Iterable[int], digits: int = 2) -> str:
    return " / ".join(f"{values[s]:.{digits}f}" if s in values else MISSING for s in seeds)


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(str, row)) + " |" for row in rows]) + "\n"


def site_of(pe: str) -> str:
    return SITE_NAMES[vitpe.pe.get(pe).site]


SEEDS = (0, 1, 2)
def resolution_table(records: list[dict], x_key: str = "resolution") -> str:
    """Mean ± std over seeds per (PE, mode) and size; n/a where a PE cannot resize so."""
    grid = accuracy_grid(summarise(records, x_key), x_key, show_runs=False, label=lambda pe: f"`{pe}`")
    return "\n".join(grid) + "\n"



def side_by_side(runs: list[Run], anchors: list[Run]) -> bool:
    """Whether every run of ``runs`` trained at the same time as one of ``anchors`` on the same machine (their
    intervals overlapping by at least half the shorter): the only case a page may call a wall-time ratio "side by
    side". False where a record does not say when it ran."""
    def beside(a: Run, b: Run) -> bool:
        if a.interval is None or b.interval is None or a.machines != b.machines:
            return False
        (a0, a1), (b0, b1) = a.interval, b.interval
        shared = (min(a1, b1) - max(a0, b0)).total_seconds()
        return shared >= 0.5 * min((a1 - a0).total_seconds(), (b1 - b0).total_seconds())

    return bool(runs) and all(any(beside(run, anchor) for anchor in anchors) for run in runs)
