"""Numbers inside sentences, read from a committed resolution sweep: the accuracy of the runs a pattern names at one
size in one resize mode, their mean ± std, each run's change, or the gap between two means (run folders' own figures
are in reports.run_values). A page writes, e.g.,

    RoPE-Mixed reads 32 px at <!-- value: sweep-mean transfer rope_mixed_s? interpolate 32 -->54.3<!-- /value -->%

where ``transfer`` is the study's folder under results/ (its sweep: ``resolution/resolution.json``, or
``resolution.json`` at the top) and the pattern matches run names as a shell does (``?``, ``*``, ``[0-2]``). A pattern
may name the folder scripts/transfer.sh trains a run in (``trained/*_s?``: every run as trained, none of the augmented
runs ``<pe>_<aug>_s<seed>`` that ``*_s?`` also matches)."""

from __future__ import annotations

import fnmatch
import json
import re
import statistics
from functools import lru_cache
from pathlib import Path
from typing import Callable

from reports.records import with_sign
from reports.transfer import TRANSFER_STAGES, transfer_remedy
from vitpe.resolution.sweep import split_run_spec


@lru_cache(maxsize=8)
def sweep_records(path: str, modified: int) -> list[dict]:
    """A sweep's records, read once per file version: a page's many values read the same sweep (``modified``, the
    file's mtime, keys the cache so that an edited sweep is read again)."""
    return json.loads(Path(path).read_text())


def accuracies(root: Path, study: str, pattern: str, mode: str, size: str) -> list[float]:
    """Accuracy (a fraction) of every run of ``study``'s sweep matching ``pattern`` at ``size`` in ``mode``."""
    return list(accuracies_by_run(root, study, pattern, mode, size).values())


def in_points(fractions: list[float], signed: bool = False) -> str:
    """Mean ± std of ``fractions`` in points (%), one decimal, scaled after averaging as the sweep's tables are, so a
    sentence and a table round the same records alike; the std only over more than one value."""
    mean = 100 * statistics.fmean(fractions)
    text = with_sign(mean) if signed else f"{mean:.1f}"
    return text + (f" ± {100 * statistics.stdev(fractions):.1f}" if len(fractions) > 1 else "")


def accuracies_by_run(root: Path, study: str, pattern: str, mode: str, size: str) -> dict[str, float]:
    """Accuracy (a fraction) by run of every run of ``study``'s sweep matching ``pattern`` at ``size`` in ``mode``."""
    return {r["run"]: r["accuracy"] for r in selected(root, study, pattern, mode, size)}


def selected(root: Path, study: str, pattern: str, mode: str, size: str) -> list[dict]:
    """The records of ``study``'s sweep whose run matches ``pattern`` (``STAGE/NAMES``: only the runs of that
    scripts/transfer.sh folder), at ``size`` in ``mode``; an error naming what is missing when none matches or a
    matching run could not be evaluated there."""
    found = [r for r in matching(root, study, pattern) if r["pe_resize"] == mode and str(r["resolution"]) == size]
    if not found:
        raise ValueError(f"no run of results/{study} matches {pattern!r} at {size} px, {mode}")
    missing = [r["run"] for r in found if r["accuracy"] is None]
    if missing:
        raise ValueError(f"{', '.join(missing)} could not be evaluated at {size} px, {mode}")
    return found


def matching(root: Path, study: str, pattern: str) -> list[dict]:
    """The records of ``study``'s sweep whose run matches ``pattern``, at every size and mode."""
    folder = root / "results" / study
    path = next((p for p in (folder / "resolution/resolution.json", folder / "resolution.json") if p.is_file()), None)
    if path is None:
        raise ValueError(f"results/{study} holds no resolution.json")
    stage, _, names = pattern.rpartition("/")
    if stage and stage not in TRANSFER_STAGES:
        raise ValueError(f"{pattern!r}: {stage!r} is not a folder of scripts/transfer.sh "
                         f"({', '.join(TRANSFER_STAGES)})")
    return [r for r in sweep_records(str(path), path.stat().st_mtime_ns) if fnmatch.fnmatchcase(r["run"], names)
            and (not stage or transfer_remedy(r["run"], r["pe"])[0] == stage)]


def sweep_mean(root: Path, study: str, pattern: str, mode: str, size: str) -> str:
    """The mean accuracy (%, one decimal) of the matching runs."""
    return f"{100 * statistics.fmean(accuracies(root, study, pattern, mode, size)):.1f}"


def sweep_spread(root: Path, study: str, pattern: str, mode: str, size: str) -> str:
    """Mean ± std over the matching runs (the std only over more than one)."""
    return in_points(accuracies(root, study, pattern, mode, size))


def sweep_change(root: Path, study: str, pattern: str, mode: str, size: str, base_mode: str, base_size: str) -> str:
    """Each matching run's change from its own accuracy at ``base_size`` in ``base_mode``, mean ± std with its sign
    (paired: a seed that is good everywhere does not widen the spread)."""
    runs = accuracies_by_run(root, study, pattern, mode, size)
    base = accuracies_by_run(root, study, pattern, base_mode, base_size)
    if set(runs) != set(base):
        raise ValueError(f"{pattern!r}: not every run has both {size} px, {mode} and {base_size} px, {base_mode}")
    return in_points([runs[name] - base[name] for name in sorted(runs)], signed=True)


def sweep_change_from(root: Path, study: str, *two: str) -> str:
    """Each run of a first selection against the run of the same seed in a second (``PATTERN MODE SIZE`` twice), e.g.
    a fine-tune at 128 px against its run as trained at 64 px: mean ± std of the changes, with its sign."""
    if len(two) != 6:
        raise ValueError("sweep-change-from takes STUDY and then PATTERN MODE SIZE twice")
    runs, base = ({transfer_remedy(r["run"], r["pe"])[2]: r["accuracy"]  # by seed, as scripts/transfer.sh names runs
                   for r in selected(root, study, *two[i:i + 3])} for i in (0, 3))
    if not set(runs) <= set(base):
        raise ValueError(f"{two[0]!r}: seeds {sorted(set(runs) - set(base))} have no run matching {two[3]!r}")
    return in_points([runs[seed] - base[seed] for seed in sorted(runs)], signed=True)


def sweep_gap(root: Path, study: str, *two: str) -> str:
    """How far apart (points, one decimal, unsigned) the means of two selections are: ``PATTERN MODE SIZE`` twice."""
    if len(two) != 6:
        raise ValueError("sweep-gap takes STUDY and then PATTERN MODE SIZE twice")
    first, second = (statistics.fmean(accuracies(root, study, *two[i:i + 3])) for i in (0, 3))
    return f"{100 * abs(first - second):.1f}"


def sweep_seeds(root: Path, study: str, *patterns: str) -> str:
    """Which seeds each pattern's runs stand on (as scripts/transfer.sh names runs: a fine-tune or a run tested with
    options, ``lookhere_s0@large_grid_slope=0.6``, has its trained run's seed), the patterns with the same seeds named
    together: "`lookhere` and `fire` seeds 0, 1 and 2, `pape` seed 0" -- so a sentence that says how many seeds its
    numbers stand on says what the sweep holds."""
    if not patterns:
        raise ValueError("sweep-seeds takes STUDY and then one PATTERN or more")
    groups: dict[tuple[int, ...], list[str]] = {}
    for pattern in patterns:
        seeds = tuple(sorted({transfer_remedy(r["run"], r["pe"])[2] for r in matching(root, study, pattern)}))
        if not seeds:
            raise ValueError(f"no run of results/{study} matches {pattern!r}")
        run, options = split_run_spec(pattern.rpartition("/")[2])  # eval.py's RUN@NAME=VALUE[,NAME=VALUE]
        name = ", ".join([re.sub(r"_s[?*\d\[\]-]*$", "", run), *options])  # the pattern less its seed
        groups.setdefault(seeds, []).append(f"`{name}`")
    return ", ".join(f"{_and(names)} {'seed' if len(seeds) == 1 else 'seeds'} {_and([str(s) for s in seeds])}"
                     for seeds, names in groups.items())


def _and(words: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


#: Numbers inside sentences (scripts/report.py's ``<!-- value: NAME ARG ... -->``).
VALUES: dict[str, Callable[..., str]] = {
    "sweep-mean": sweep_mean,
    "sweep-spread": sweep_spread,
    "sweep-gap": sweep_gap,
    "sweep-change": sweep_change,
    "sweep-change-from": sweep_change_from,
    "sweep-seeds": sweep_seeds,
}
