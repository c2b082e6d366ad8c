"""Figures from committed records, like the tables: a study lists ``FIGURES`` (name -> function of the repository root
-> panels, or None while it has no records), and scripts/report.py draws each into ``results/figures/NAME.png`` beside
``NAME.json``, the numbers it plots. ``--check`` compares those numbers with the records (a PNG's bytes depend on the
matplotlib version; its numbers do not), and fails on a figure whose numbers or picture are missing.

One panel answers one question: a few lines (at most :data:`MAX_LINES`), each mean ± std over seeds as a line and a
band, the training size (or range) shaded.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

FOLDER = "results/figures"
MAX_LINES = 8


@dataclass(frozen=True)
class Line:
    label: str
    x: list[float]
    mean: list[float]
    std: list[float]  # over seeds, one per point (0 with one seed)
    seeds: int


@dataclass(frozen=True)
class Panel:
    title: str
    xlabel: str
    ylabel: str
    lines: list[Line]
    #: the training sizes, shaded: (low, high), equal for one size
    trained: tuple[float, float] | None = None


def figure_data(panels: list[Panel]) -> dict:
    """What the figure shows, as JSON-able numbers (rounded as a reader would read them)."""
    def rounded(panel: dict) -> dict:
        for line in panel["lines"]:
            line["mean"] = [round(v, 2) for v in line["mean"]]
            line["std"] = [round(v, 2) for v in line["std"]]
        return panel
    return {"panels": [rounded(asdict(panel)) for panel in panels]}


def draw(panels: list[Panel], path: Path) -> None:
    """The panels side by side, written atomically to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from vitpe.atomic_files import save_figure_atomic

    for panel in panels:
        if len(panel.lines) > MAX_LINES:
            raise ValueError(f"{path.name}: panel {panel.title!r} has {len(panel.lines)} lines; at most {MAX_LINES} "
                             f"read well -- split it")
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), sharey=True, squeeze=False)
    for ax, panel in zip(axes[0], panels):
        if panel.trained is not None:
            low, high = panel.trained
            ax.axvspan(low * 0.97, high * 1.03, color="0.9", zorder=0, label="trained at")
        for line in panel.lines:
            low = [m - s for m, s in zip(line.mean, line.std)]
            high = [m + s for m, s in zip(line.mean, line.std)]
            (handle,) = ax.plot(line.x, line.mean, marker="o", markersize=3, label=line.label)
            ax.fill_between(line.x, low, high, color=handle.get_color(), alpha=0.18, linewidth=0)
        ax.set_xscale("log", base=2)
        ticks = sorted({x for line in panel.lines for x in line.x})
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks], fontsize=8)
        ax.minorticks_off()
        ax.set_title(panel.title, fontsize=10)
        ax.set_xlabel(panel.xlabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, frameon=False)
    axes[0][0].set_ylabel(panels[0].ylabel)
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=110)
    plt.close(fig)


def stale_or_write(name: str, panels: list[Panel] | None, root: Path, check: bool) -> str | None:
    """Bring figure ``name`` up to date with its records (or, with ``check``, say why it is not): the reason it is
    out of date, or None."""
    folder = root / FOLDER
    data_path, png_path = folder / f"{name}.json", folder / f"{name}.png"
    if panels is None:  # no records yet: no figure
        stale = data_path.exists() or png_path.exists()
        if stale and not check:
            data_path.unlink(missing_ok=True)
            png_path.unlink(missing_ok=True)
        return f"{name}: a figure without records" if stale else None
    data = json.loads(json.dumps(figure_data(panels)))  # as stored: tuples become lists
    current = json.loads(data_path.read_text()) if data_path.is_file() else None
    if current == data and png_path.is_file():
        return None
    if not check:
        from vitpe.atomic_files import write_text_atomic

        folder.mkdir(parents=True, exist_ok=True)
        draw(panels, png_path)
        write_text_atomic(json.dumps(data, indent=1) + "\n", data_path)
    return f"{name}: its numbers differ from the records" if current != data else f"{name}: no picture"
