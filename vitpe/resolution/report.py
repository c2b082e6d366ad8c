"""Tables and plots of accuracy against resolution (or sequence length), one line per PE and resize mode.

Records are dicts with ``run``, ``pe``, ``pe_resize``, ``accuracy`` (a fraction or None), ``loss``, ``n``, the
x-axis key (``resolution`` or ``length``), ``train_<x-axis key>`` (the size the run was trained at, when known) and
``group`` (runs that differ only in seed share a group and are averaged).

Besides accuracy, the markdown report gives each run's change against its own training size, averaged over the runs
of a group: seeds move a whole curve up or down together, so the paired difference separates "testing at 24 px helps"
from the spread between seeds, which the accuracy table's ± mixes in.
"""

from __future__ import annotations

import csv
import io
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

from vitpe.atomic_files import save_figure_atomic, write_text_atomic

PUBLIC_KEYS = ("run", "pe", "pe_resize", "accuracy", "loss", "n", "precision", "reason")


def _public_keys(x_key: str) -> tuple[str, ...]:
    aspect = ("aspect",) if x_key == "resolution" else ()  # images: centred squares or native aspect
    return (*PUBLIC_KEYS[:2], x_key, f"train_{x_key}", *PUBLIC_KEYS[2:], *aspect)


def _x_sort_key(value: Any) -> tuple:
    if isinstance(value, int):
        return (value, value)
    h, w = (int(v) for v in str(value).split("x"))
    return (h * w) ** 0.5, h


# the seed of run names such as rope_mixed_s2 or learnable-s0, also before the options of a run tested with PE options
# of its own (lookhere_s1@large_grid_slope=0.6: grouped as lookhere@large_grid_slope=0.6)
SEED_SUFFIX = re.compile(r"[_-]s\d+(?=@|$)")


def group_labels(records: list[dict[str, Any]]) -> dict[str, str]:
    """A readable label per group: the PE name, plus the first run's name when several groups share a PE (without its
    seed suffix when the group holds several runs: the row is theirs, not the first one's)."""
    by_pe = defaultdict(list)
    for r in records:
        if r["group"] not in by_pe[r["pe"]]:
            by_pe[r["pe"]].append(r["group"])
    labels = {}
    for pe, groups in by_pe.items():
        for g in groups:
            runs = list(dict.fromkeys(r["run"] for r in records if r["group"] == g))
            name = SEED_SUFFIX.sub("", runs[0]) if len(runs) > 1 else runs[0]
            labels[g] = pe if len(groups) == 1 else f"{pe} ({name})"
    return labels


def _spread(values: list[float]) -> dict[str, Any]:
    """``runs``, ``mean`` and sample ``std`` of ``values`` (std 0 for one value; mean and std None for none)."""
    return {"runs": len(values), "mean": statistics.fmean(values) if values else None,
            "std": statistics.stdev(values) if len(values) > 1 else 0.0 if values else None}


def _grid_lines(heads: list[str], table: dict[tuple, dict], xs: list, cell_text: Callable[[dict | None], str]
                ) -> list[str]:
    """Markdown rows of a table with one row per key of ``table`` (its parts under ``heads``) and one column per x."""
    lines = ["| " + " | ".join([*heads, *map(str, xs)]) + " |", "|" + "---|" * (len(heads) + len(xs))]
    for key, cells in table.items():
        lines.append("| " + " | ".join([*map(str, key), *(cell_text(cells.get(x)) for x in xs)]) + " |")
    return lines


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
        rows.append({"label": key[0], "pe_resize": key[1], x_key: key[2], **_spread(values),
                     "reason": reasons.get(key) if not values else None})
    return rows


def paired_gains(records: list[dict[str, Any]], x_key: str) -> list[dict[str, Any]]:
    """Per (group, mode, x): mean and std over runs of ``accuracy(x) - accuracy(training size)``, each run against
    itself in the same mode. Runs whose training size is unknown or was not evaluated are left out."""
    labels = group_labels(records)
    trained = f"train_{x_key}"
    at_train = {(r["run"], r["pe_resize"]): r["accuracy"] for r in records
                if r.get(trained) is not None and r[x_key] == r[trained] and r["accuracy"] is not None}
    cells: dict[tuple, list] = defaultdict(list)
    for r in records:
        base = at_train.get((r["run"], r["pe_resize"]))
        if base is not None and r["accuracy"] is not None:
            cells[(labels[r["group"]], r["pe_resize"], r[x_key], r[trained])].append(r["accuracy"] - base)
    return [{"label": key[0], "pe_resize": key[1], x_key: key[2], trained: key[3], **_spread(values)}
            for key, values in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1], _x_sort_key(kv[0][2])))]


def gains_table(gains: list[dict[str, Any]], x_key: str) -> str:
    """The markdown of :func:`paired_gains`, the best size of each row in bold; empty without gains."""
    if not gains:
        return ""
    xs = sorted({g[x_key] for g in gains}, key=_x_sort_key)
    rows: dict[tuple, dict] = defaultdict(dict)
    for g in gains:
        rows[(g["label"], g["pe_resize"], g[f"train_{x_key}"])][g[x_key]] = g
    best = {id(max(cells.values(), key=lambda g: g["mean"])) for cells in rows.values()}

    def cell_text(g: dict | None) -> str:
        if g is None:
            return ""
        text = f"{100 * g['mean']:+.1f}" + (f" ± {100 * g['std']:.1f}" if g["runs"] > 1 else "")
        return f"**{text}**" if id(g) in best else text

    lines = ["", f"Change against the training {x_key} (accuracy points, each run against itself, then mean ± std "
             "over runs); the best of each row in bold.", ""]
    return "\n".join(lines + _grid_lines(["PE", "mode", "trained at"], rows, xs, cell_text)) + "\n"


def write_reports(records: list[dict[str, Any]], out_dir: str | Path, x_key: str, title: str) -> list[Path]:
    """Write ``<x_key>.json``, ``.csv``, ``.md`` and ``.png`` to ``out_dir``; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    public = [{k: r[k] for k in _public_keys(x_key) if k in r} for r in records]
    paths = [out / f"{x_key}.{ext}" for ext in ("json", "csv", "md", "png")]
    write_text_atomic(json.dumps(public, indent=1) + "\n", paths[0])
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=_public_keys(x_key))
    writer.writeheader()
    writer.writerows(public)
    write_text_atomic(table.getvalue(), paths[1])
    rows = summarise(records, x_key)
    write_text_atomic(markdown_table(rows, x_key, title) + gains_table(paired_gains(records, x_key), x_key), paths[2])
    plot(rows, records, x_key, title, paths[3])
    return paths


def accuracy_grid(rows: list[dict[str, Any]], x_key: str, *, show_runs: bool = True,
                  label: Callable[[str], str] = str) -> list[str]:
    """Markdown lines of :func:`summarise`'s rows: a row per (group, mode), a column per x; each cell the mean with
    its std over runs (and, with ``show_runs``, the number of runs), ``n/a`` where no run could be evaluated."""
    xs = sorted({r[x_key] for r in rows}, key=_x_sort_key)
    table: dict[tuple, dict] = defaultdict(dict)
    for r in rows:
        table[(label(r["label"]), r["pe_resize"])][r[x_key]] = r

    def cell_text(cell: dict | None) -> str:
        if cell is None:
            return ""
        if cell["mean"] is None:
            return "n/a"
        runs = f" ({cell['runs']})" if show_runs else ""
        return f"{100 * cell['mean']:.1f}" + (f" ± {100 * cell['std']:.1f}{runs}" if cell["runs"] > 1 else "")

    return _grid_lines(["PE", "mode"], table, xs, cell_text)


def markdown_table(rows: list[dict[str, Any]], x_key: str, title: str) -> str:
    lines = [f"# {title}", "", "Accuracy (%), mean ± std over seeds (runs per cell in brackets when more than one); "
             "n/a: the run cannot be evaluated there in this mode (a PE that cannot resize so, or a size that is not "
             "a multiple of the patch size: the reasons follow the table).", ""]
    return "\n".join(lines + accuracy_grid(rows, x_key) + not_evaluated(rows, x_key)) + "\n"


def not_evaluated(rows: list[dict[str, Any]], x_key: str) -> list[str]:
    """Markdown lines naming, for each row and reason, the sizes the table shows as n/a; none when every cell has a
    value."""
    where: dict[tuple, list] = defaultdict(list)
    for r in rows:
        if r["mean"] is None:
            where[(r["label"], r["pe_resize"], r.get("reason") or "no reason recorded")].append(str(r[x_key]))
    if not where:
        return []
    return ["", "Not evaluated (n/a):", ""] + [f"- {label}, {mode}, at {', '.join(xs)}: {reason}"
                                              for (label, mode, reason), xs in where.items()]


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
    save_figure_atomic(fig, path, dpi=120)
