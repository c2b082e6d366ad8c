"""The speed targets the benchmark is held to, checked against a ``bench.json`` result.

- vitpe ``learnable`` trains at least as fast as timm's ``VisionTransformer`` (ratio >= 1.00);
- a PE's training-step overhead against ``pe="none"`` is at most 3% at the tokens site and at most 8% at the q,k and
  logits sites, at every measured image size;
- a rotary PE's inference overhead against ``pe="none"`` is at most 5%;
- the data pipeline takes at most 5% of a real epoch.

Overhead is ``t_pe / t_none - 1`` (``1 / train_vs_none - 1``), its ratio paired within the interleaved rounds. Each
check carries the bootstrap interval of that figure (:mod:`vitpe.bench.stats`) and says whether the limit lies outside
it: a target is met or missed *beyond the noise* only then; otherwise the run cannot tell, and the table says so.
Results written before the intervals existed carry the older noise floor instead: the overhead of a second, identical
``none`` model over the first, at that image size.

The targets hold at the default dims and at the CPU recipe's (``--preset recipe``); one table over several runs:

    python -m vitpe.bench.targets RUN_DIR [RUN_DIR ...]     # each holding a bench.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import vitpe.pe
from vitpe.bench.stats import CONFIDENCE

MAX_OVERHEAD = {"tokens": 0.03, "qk": 0.08, "logits": 0.08}
MAX_INFER_OVERHEAD = {"qk": 0.05}
MIN_LEARNABLE_VS_TIMM = 1.00
MAX_DATA_SHARE = 0.05
# A second, identical ``none`` model timed in the same rounds: its "overhead" over ``none`` is the noise floor.
NOISE_REFERENCE = "none (again)"


def _overhead(speed_ratio: float) -> float:
    return 1.0 / speed_ratio - 1.0


def check_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per target and image size: ``{"target", "img_size", "measured", "limit", "unit", "met", "interval",
    "clear", "noise"}``, where ``unit`` is ``"ratio"`` (a speed ratio) or ``"fraction"`` (an overhead or a share),
    ``interval`` the (low, high) bounds of ``measured`` or None, ``clear`` whether the limit lies outside that interval
    (None without one), and ``noise`` the noise floor of a result without intervals (a fraction) or None."""
    checks = []
    noise = {(row["img_size"], kind): abs(_overhead(row[f"{kind}_vs_none"])) for row in result["rows"]
             if row["pe"] == NOISE_REFERENCE for kind in ("train", "infer")}

    def check(target: str, size: int, measured: float, limit: float, unit: str, kind: str,
              interval: list[float] | None = None) -> None:
        met = measured >= limit if unit == "ratio" else measured <= limit
        clear = None if interval is None else not min(interval) <= limit <= max(interval)
        checks.append({"target": target, "img_size": size, "measured": measured, "limit": limit, "unit": unit,
                       "met": met, "interval": interval, "clear": clear,
                       "noise": None if interval is not None else noise.get((size, kind))})

    def overhead_interval(row: dict[str, Any], kind: str) -> list[float] | None:
        bounds = row.get(f"{kind}_vs_none_ci")
        return None if bounds is None else sorted(_overhead(b) for b in bounds)

    for row in result["rows"]:
        size = row["img_size"]
        if row["pe"] == "learnable" and "train_vs_timm" in row:
            check("learnable vs timm (train, ratio >=)", size, row["train_vs_timm"], MIN_LEARNABLE_VS_TIMM, "ratio",
                  "train", row.get("train_vs_timm_ci"))
        if row["pe"] in ("timm", "none", NOISE_REFERENCE) or "train_vs_none" not in row:
            continue
        site = vitpe.pe.get(row["pe"]).site
        check(f"{row['pe']} ({site}) overhead vs none (train, <=)", size, _overhead(row["train_vs_none"]),
              MAX_OVERHEAD[site], "fraction", "train", overhead_interval(row, "train"))
        if site in MAX_INFER_OVERHEAD:
            check(f"{row['pe']} ({site}) overhead vs none (inference, <=)", size, _overhead(row["infer_vs_none"]),
                  MAX_INFER_OVERHEAD[site], "fraction", "infer", overhead_interval(row, "infer"))
    if "data_share" in result:
        check("data pipeline share of a real epoch (<=)", 32, result["data_share"], MAX_DATA_SHARE, "fraction", "data")
    return checks


def verdict(check: dict[str, Any]) -> str:
    """``met``, ``**missed**``, or ``within noise`` where the check's interval holds its limit (the run cannot tell)."""
    if check.get("clear") is False:
        return "within noise"
    return "met" if check["met"] else "**missed**"


def _fmt(check: dict[str, Any], value: float) -> str:
    return f"{value:.3f}x" if check["unit"] == "ratio" else f"{100 * value:+.1f}%"


def targets_markdown(checks: list[dict[str, Any]]) -> list[str]:
    """The checks as a markdown table (ratios as x, overheads and shares as %), with a first column naming the
    benchmark run where the checks carry a ``"run"``. The interval column holds a check's interval, or the older
    noise floor; the verdict is :func:`verdict`."""
    runs = any("run" in c for c in checks)
    interval = f"{100 * CONFIDENCE:.0f}% interval (or noise floor)"
    lines = [f"| {'run | ' if runs else ''}target | px | measured | {interval} | limit | verdict |",
             f"|{'---|' if runs else ''}---|---|---|---|---|---|"]
    for c in checks:
        if c.get("interval") is not None:
            noise = f"{_fmt(c, c['interval'][0])} to {_fmt(c, c['interval'][1])}"
        else:
            noise = "" if c.get("noise") is None else f"±{100 * c['noise']:.1f}%"
        lines.append(f"| {c['run'] + ' | ' if runs else ''}{c['target']} | {c['img_size']} | {_fmt(c, c['measured'])} | "
                     f"{noise} | {_fmt(c, c['limit'])} | {verdict(c)} |")
    return lines


def targets_grid(checks: list[dict[str, Any]]) -> list[str]:
    """The checks of several runs (each carrying its ``"run"``) as one markdown table: a row per target, a column per
    run and image size, each cell the measured figure with its interval, marked where it is not met: ``✗`` missed,
    ``?`` within noise."""
    columns = list(dict.fromkeys((c["run"], c["img_size"]) for c in checks))
    cells: dict[str, dict[tuple, str]] = {}
    for c in checks:
        text = _fmt(c, c["measured"])
        if c.get("interval") is not None:
            text += f" ({_fmt(c, c['interval'][0])}…{_fmt(c, c['interval'][1])})"
        mark = {"met": "", "within noise": " ?"}.get(verdict(c), " ✗")
        cells.setdefault(f"{c['target']}, limit {_fmt(c, c['limit'])}", {})[(c["run"], c["img_size"])] = text + mark
    lines = ["| target | " + " | ".join(f"{run}, {px} px" for run, px in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for target, row in cells.items():
        lines.append(f"| {target} | " + " | ".join(row.get(col, "") for col in columns) + " |")
    return lines


def summary(checks: list[dict[str, Any]]) -> str:
    """``"K of N checks met."``, and how many of the N the run could not resolve (interval holding the limit) or
    missed."""
    verdicts = [verdict(c) for c in checks]
    text = f"{verdicts.count('met')} of {len(checks)} checks met."
    unresolved = verdicts.count("within noise")
    if unresolved:
        text += f" {unresolved} within the noise (the interval holds the limit): run more rounds to settle them."
    missed = verdicts.count("**missed**")
    if missed:
        text += f" {missed} missed."
    return text


def describe_run(result: dict[str, Any]) -> str:
    """A short name of a benchmark run's model, threads and compilation, e.g. ``dim 128, 4 heads, MLP 2, mean pool,
    1 thread``."""
    cfg, threads = result["config"], result["machine"].get("cpu_threads")
    parts = [f"dim {cfg['dim']}", f"{cfg['heads']} heads", f"MLP {cfg['mlp_ratio']:g}",
             "mean pool" if cfg.get("pool") == "mean" else "class token"]
    device = cfg.get("device", "cpu")
    if device != "cpu":
        parts.append(device)
    elif threads:
        parts.append(f"{threads} thread{'s' if threads > 1 else ''}")
    if cfg.get("compile"):
        parts.append("compiled")
    if cfg.get("precision", "auto") != "auto":
        parts.append(cfg["precision"])
    return ", ".join(parts)


def load_result(run: Path) -> dict[str, Any]:
    """A run's ``bench.json`` (``run`` is its folder or the file); ValueError saying what is wrong otherwise."""
    path = run / "bench.json" if run.is_dir() else run
    if not path.is_file():
        raise ValueError(f"{run}: no bench.json there; give the --out folder of a python -m vitpe.bench run")
    try:
        result = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not JSON ({err}); rerun the benchmark") from None
    missing = [key for key in ("rows", "config", "machine") if not isinstance(result, dict) or key not in result]
    if missing:
        raise ValueError(f"{path}: not a benchmark result (no {', '.join(missing)}); rerun the benchmark")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One table of the speed targets over benchmark runs (each run's "
                                                 "checks recomputed from its bench.json with the current limits): a "
                                                 "row per target, a column per run and image size.")
    parser.add_argument("runs", nargs="+", type=Path, help="--out folders (or bench.json files) of vitpe.bench runs")
    args = parser.parse_args(argv)
    checks = []
    try:
        for run in args.runs:
            result = load_result(run)
            checks += [{"run": describe_run(result), **c} for c in check_targets(result)]
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("\n".join([*targets_grid(checks), "", summary(checks)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
