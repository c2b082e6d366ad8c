"""Imagewoof2-320 at native aspect (RESULTS.md, "Native aspect on Imagewoof2-320"), from the records of
``scripts/imagewoof_native.sh`` in ``results/imagewoof_native/``: runs ``square_<pe>_s<seed>`` and
``native_<pe>_s<seed>`` (vitpe), ``naflex_<pos>_s<seed>`` (timm's NaFlexViT, its own sweep in the run's folder), and
the sweep of the vitpe runs in ``resolution/resolution.json`` (native aspect, short side 48-320 px)."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Callable

from reports.figures import Line, Panel
from reports.records import MISSING, SEEDS, finished_by_seed, markdown, mean_std, per_seed

STUDY = "results/imagewoof_native"
PES = ("learnable", "rope_mixed", "cpb", "lookhere", "fire")
ANCHORS = ("learned", "rope_mixed")
#: What each way of training is, as a table's row says it.
TRAININGS = {"square": "centred squares, 40 → 64 px", "native": "native aspect, 16–144 patches",
             "naflex": "timm NaFlexViT, its own loader"}
SIZES = (48, 64, 96, 128, 160, 192, 256, 320)


#: The runs' rows: (training, PE or NaFlexViT's position embedding), named ``<training>_<pe>_s<seed>``.
ROWS = [("square", pe) for pe in PES] + [("native", pe) for pe in PES] + [("naflex", pos) for pos in ANCHORS]


def native_runs(root: Path) -> str:
    """Test accuracy at native aspect, short side 64 px (square runs: the centred square at 64 px, as they were
    tested in training), per seed and mean ± std, for every PE and way of training."""
    rows = []
    for training, pe in ROWS:
        runs = finished_by_seed(root / STUDY, f"{training}_{pe}", SEEDS)
        accuracies = {seed: run.accuracy for seed, run in runs.items()}
        rows.append([f"`{pe}`", TRAININGS[training], per_seed(accuracies, SEEDS),
                     mean_std(list(accuracies.values())) if accuracies else MISSING])
    return markdown(["PE", "training", "test acc. at 64 px, seeds 0 / 1 / 2 (%)", "mean ± std"], rows)


def _sweep_records(root: Path) -> list[dict]:
    records = []
    path = root / STUDY / "resolution/resolution.json"
    if path.is_file():
        records += json.loads(path.read_text())
    for pos in ANCHORS:
        for seed in SEEDS:
            anchor = root / STUDY / f"naflex_{pos}_s{seed}/resolution.json"
            if anchor.is_file():
                records += json.loads(anchor.read_text())
    return [r for r in records if r.get("aspect", "native") == "native"]


def transfer_cells(root: Path) -> dict[tuple[str, str, str], dict[int, list[float]]]:
    """Every committed sweep's accuracies (%), by (PE, way of training, resize mode) and short side."""
    cells: dict[tuple[str, str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in _sweep_records(root):
        if r["accuracy"] is None:
            continue
        training = r["run"].split("_", 1)[0]
        pe = r["pe"].removeprefix("naflex_")
        cells[(pe, training, r["pe_resize"])][int(r["resolution"])].append(100 * r["accuracy"])
    return cells


def native_transfer(root: Path) -> str:
    """Accuracy at native aspect with the short side at each size, mean ± std over seeds, per PE, way of training and
    resize mode (a mode without meaning for a PE left out)."""
    cells = transfer_cells(root)
    if not cells:
        return f"{MISSING} No sweep committed yet (`{STUDY}/resolution/resolution.json`).\n"
    sizes = sorted({size for by_size in cells.values() for size in by_size})
    order = {pe: i for i, pe in enumerate(PES + ANCHORS)}
    rows = [[f"`{pe}`", TRAININGS.get(training, training), mode,
             *[mean_std(by_size[size]) if size in by_size else "n/a" for size in sizes]]
            for (pe, training, mode), by_size in sorted(cells.items(), key=lambda item: (
                order.get(item[0][0], 99), list(TRAININGS).index(item[0][1]) if item[0][1] in TRAININGS else 9,
                item[0][2]))]
    return markdown(["PE", "training", "mode", *[f"{size} px" for size in sizes]], rows)


def native_figure(root: Path) -> list[Panel] | None:
    """Accuracy against the test photographs' short side: one panel per way of training and resize mode, a line per
    PE (mean ± std over seeds), timm's NaFlexViT beside the native-aspect runs it is trained like."""
    cells = transfer_cells(root)
    if not cells:
        return None
    trained = {"square": (40.0, 64.0), "native": (32.0, 96.0)}  # short side in training: sizes / 16-144 patches of 8
    panels = []
    for training in ("square", "native"):
        for mode in ("interpolate", "extrapolate"):
            keys = [(pe, training, mode) for pe in PES]
            if training == "native" and mode == "interpolate":
                keys += [(pos, "naflex", "timm") for pos in ANCHORS]  # timm's own resampling
            lines = []
            for key in keys:
                by_size = cells.get(key)
                if not by_size:
                    continue
                sizes = sorted(by_size)
                label = key[0] if key[1] != "naflex" else f"NaFlexViT {key[0]}"
                lines.append(Line(label, [float(s) for s in sizes], [statistics.mean(by_size[s]) for s in sizes],
                                  [statistics.stdev(by_size[s]) if len(by_size[s]) > 1 else 0.0 for s in sizes],
                                  min(len(by_size[s]) for s in sizes)))
            if lines:
                panels.append(Panel(f"{TRAININGS[training].split(',')[0]}, {mode}d", "test short side (px)",
                                    "test accuracy (%)", lines, trained[training]))
    return panels or None


#: This study's figures: name -> function of the repository root -> panels, or None without records.
FIGURES: dict[str, Callable[[Path], list[Panel] | None]] = {"imagewoof-native": native_figure}

#: This study's tables: name -> function of the repository root -> markdown (scripts/report.py).
TABLES: dict[str, Callable[[Path], str]] = {"imagewoof-native-runs": native_runs,
                                           "imagewoof-native-transfer": native_transfer}
