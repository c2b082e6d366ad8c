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
    """One panel per resize mode (shared y axis), one line per group with its seed spread as error bars; a group keeps
    its colour in every panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = defaultdict(list)
    for r in rows:
        if r["mean"] is not None and isinstance(r[x_key], int):  # squares / lengths on the x axis
            series[(r["label"], r["pe_resize"])].append((r[x_key], r["mean"], r["std"]))
    modes = sorted({mode for _, mode in series}, key=lambda m: (m != "interpolate", m))
    labels = sorted({label for label, _ in series})
    palette = plt.get_cmap("tab10" if len(labels) <= 10 else "tab20")
    colours = {label: palette(i % palette.N) for i, label in enumerate(labels)}
    panels, legend_columns = max(len(modes), 1), 4
    fig, axes = plt.subplots(1, panels, figsize=(1 + 5 * panels, 5.5), sharey=True, squeeze=False)
    trained = sorted({r[f"train_{x_key}"] for r in records if r.get(f"train_{x_key}") is not None})
    handles = {}
    for ax, mode in zip(axes[0], modes):
        for label in labels:
            points = sorted(series.get((label, mode), []))
            if not points:
                continue
            xs, means, stds = zip(*points)
            handles[label] = ax.errorbar(xs, [100 * m for m in means], yerr=[100 * s for s in stds], capsize=2,
                                         color=colours[label], marker="o", markersize=4)
        for t in trained:
            ax.axvline(t, color="grey", linestyle=":", linewidth=1)
        ax.set_title(f"{mode}{'  (dotted: training ' + x_key + ')' if trained else ''}", fontsize=10)
        ax.set_xlabel(x_key)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test accuracy (%)")
    fig.suptitle(title)
    shown = [label for label in labels if label in handles]
    legend_rows = -(-len(shown) // legend_columns)
    fig.legend([handles[label] for label in shown], shown, loc="lower center", ncol=legend_columns, fontsize=8,
               frameon=False)
    fig.tight_layout(rect=(0, 0.045 * legend_rows + 0.02, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
