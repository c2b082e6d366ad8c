"""Tables and plots of accuracy against resolution (or sequence length), one line per PE and resize mode.

Records are dicts with ``run``, ``pe``, ``pe_resize``, ``accuracy`` (a fraction or None), ``loss``, ``n``, the
x-axis key (``resolution`` or ``length``) and ``group`` (runs that differ only in seed share a group and are averaged).
"""

from __future__ import annotations

import csv
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

PUBLIC_KEYS = ("run", "pe", "pe_resize", "accuracy", "loss", "n", "reason")


def _x_sort_key(value: Any) -> tuple:
    if isinstance(value, int):
        return (value, value)
    h, w = (int(v) for v in str(value).split("x"))
    return (h * w) ** 0.5, h


def group_labels(records: list[dict[str, Any]]) -> dict[str, str]:
    """A readable label per group: the PE name, plus the first run's name when several groups share a PE."""
    by_pe = defaultdict(list)
    for r in records:
        if r["group"] not in by_pe[r["pe"]]:
            by_pe[r["pe"]].append(r["group"])
    labels = {}
    for pe, groups in by_pe.items():
        for g in groups:
            first_run = next(r["run"] for r in records if r["group"] == g)
            labels[g] = pe if len(groups) == 1 else f"{pe} ({first_run})"
    return labels


def summarise(records: list[dict[str, Any]], x_key: str) -> list[dict[str, Any]]:
    """Mean and std over the runs of each (group, mode, x); None when no run could be evaluated there."""
    labels = group_labels(records)
    cells: dict[tuple, list] = defaultdict(list)
    reasons: dict[tuple, str] = {}
    for r in records:
        key = (labels[r["group"]], r["pe_resize"], r[x_key])
        if r["accuracy"] is None:
            reasons[key] = r.get("reason", "")
        else:
            cells[key].append(r["accuracy"])
    rows = []
    for key in sorted(set(cells) | set(reasons), key=lambda k: (k[0], k[1], _x_sort_key(k[2]))):
        values = cells.get(key, [])
        rows.append({"label": key[0], "pe_resize": key[1], x_key: key[2], "runs": len(values),
                     "mean": statistics.fmean(values) if values else None,
                     "std": statistics.stdev(values) if len(values) > 1 else 0.0 if values else None,
                     "reason": reasons.get(key) if not values else None})
    return rows


def write_reports(records: list[dict[str, Any]], out_dir: str | Path, x_key: str, title: str) -> list[Path]:
    """Write ``<x_key>.json``, ``.csv``, ``.md`` and ``.png`` to ``out_dir``; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    public = [{k: r[k] for k in (PUBLIC_KEYS[:2] + (x_key,) + PUBLIC_KEYS[2:]) if k in r} for r in records]
    paths = [out / f"{x_key}.{ext}" for ext in ("json", "csv", "md", "png")]
    paths[0].write_text(json.dumps(public, indent=1) + "\n")
    with paths[1].open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[*PUBLIC_KEYS[:2], x_key, *PUBLIC_KEYS[2:]])
        writer.writeheader()
        writer.writerows(public)
    rows = summarise(records, x_key)
    paths[2].write_text(markdown_table(rows, x_key, title))
    plot(rows, records, x_key, title, paths[3])
    return paths


def markdown_table(rows: list[dict[str, Any]], x_key: str, title: str) -> str:
    xs = sorted({r[x_key] for r in rows}, key=_x_sort_key)
    lines = [f"# {title}", "", "Accuracy (%), mean ± std over seeds (runs per cell in brackets when more than one); "
             "n/a: the PE cannot work there in this mode.", "",
             "| PE | mode | " + " | ".join(str(x) for x in xs) + " |", "|---|---|" + "---|" * len(xs)]
    table = defaultdict(dict)
    for r in rows:
        table[(r["label"], r["pe_resize"])][r[x_key]] = r
    for (label, mode), cells in table.items():
        out = []
        for x in xs:
            cell = cells.get(x)
            if cell is None:
                out.append("")
            elif cell["mean"] is None:
                out.append("n/a")
            else:
                text = f"{100 * cell['mean']:.1f}"
                if cell["runs"] > 1:
                    text += f" ± {100 * cell['std']:.1f} ({cell['runs']})"
                out.append(text)
        lines.append(f"| {label} | {mode} | " + " | ".join(out) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], records: list[dict[str, Any]], x_key: str, title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    series = defaultdict(list)
    for r in rows:
        if r["mean"] is not None and isinstance(r[x_key], int):  # squares / lengths on the x axis
            series[(r["label"], r["pe_resize"])].append((r[x_key], r["mean"], r["std"]))
    colours = {}
    for (label, mode), points in sorted(series.items()):
        points.sort()
        xs, means, stds = zip(*points)
        colour = colours.setdefault(label, f"C{len(colours) % 10}")
        ax.errorbar(xs, [100 * m for m in means], yerr=[100 * s for s in stds], color=colour, capsize=2,
                    linestyle="-" if mode == "interpolate" else "--", marker="o" if mode == "interpolate" else "s",
                    label=f"{label} · {mode}")
    trained = {r.get(f"train_{x_key}") for r in records if r.get(f"train_{x_key}") is not None}
    for t in trained:
        ax.axvline(t, color="grey", linestyle=":", linewidth=1)
    if trained:
        ax.text(min(trained), ax.get_ylim()[0], " trained here", color="grey", va="bottom", fontsize=8)
    ax.set_xlabel(x_key)
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
