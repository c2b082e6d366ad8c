"""vitpe.pe as a library, side by side: 2D RoPE applied to q and k in vitpe, timm's layers and rotary-embedding-torch
(``benchmarks/rope_apply.py``'s record in ``results/bench/rope_apply_cpu/``), and what ``import vitpe.pe`` costs
(``benchmarks/import_time.py``'s in ``results/bench/import_cpu/``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from reports.records import markdown

RECORD = "results/bench/rope_apply_cpu/rope_apply.json"
IMPORT_RECORD = "results/bench/import_cpu/import.json"


def bench_rope_apply(root: Path) -> str:
    """Each library's time (median) per PE and pass, vitpe's time over it (median of the rounds' paired ratios, and
    their range), and the lines a user writes for the task."""
    path = root / RECORD
    if not path.is_file():
        return "(no record yet: run benchmarks/rope_apply.py)\n"
    from vitpe.machine import cpu_line

    record = json.loads(path.read_text())
    rows = []
    for r in record["rows"]:
        low, high = r["vitpe_over_range"]
        over = "1" if r["library"] == "vitpe" else f"{r['vitpe_over']:.2f} ({low:.2f}–{high:.2f})"
        rows.append([f"`{r['pe']}`", r["library"], r["pass"], f"{r['ms']:.2f}", over, str(r["lines"])])
    table = markdown(["PE", "library", "pass", "ms", "vitpe's time / this", "lines"], rows)
    shape = " × ".join(map(str, record["shape"]))
    return (f"{table}\nq and k of shape ({shape}), float32; machine: {cpu_line(record['machine'])}, "
            f"{record['threads']} threads, torch {record['torch']}, timm {record['timm']}, {record['date']}; "
            f"{record['rounds']} interleaved rounds of {record['repeats']} calls; `{record['command']}`\n")


def bench_import(root: Path) -> str:
    """Median seconds of ``import torch`` and of ``import torch; import vitpe.pe`` in fresh processes."""
    path = root / IMPORT_RECORD
    if not path.is_file():
        return "(no record yet: run benchmarks/import_time.py)\n"
    from vitpe.machine import cpu_line

    record = json.loads(path.read_text())
    median = record["median_s"]
    table = markdown(["import", "seconds (median)"], [
        ["`torch`", f"{median['torch']:.3f}"], ["`torch`, then `vitpe.pe`", f"{median['torch + vitpe.pe']:.3f}"],
        ["`vitpe.pe` after `torch`, in that process", f"{median['vitpe.pe after torch']:.3f}"]])
    heavy = ", ".join(record["heavy_modules"]) or "none of timm, torchvision, yaml, matplotlib"
    return (f"{table}\n{record['rounds']} fresh processes each, alternated; modules beyond torch's: {heavy}; machine: "
            f"{cpu_line(record['machine'])}, Python {record['python']}, {record['date']}; `{record['command']}`\n")


#: This study's tables: name -> function of the repository root -> markdown (scripts/report.py).
TABLES: dict[str, Callable[[Path], str]] = {"bench-rope-apply": bench_rope_apply, "bench-import": bench_import}
