"""Images of many grids in one batch: vitpe's mixed batch against padding to one grid and one call per grid
(``benchmarks/mixed_batches.py``'s record in ``results/bench/mixed_cpu/``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from reports.records import markdown

RECORD = "results/bench/mixed_cpu/mixed.json"


def bench_mixed(root: Path) -> str:
    """Training steps per second in images (median over the rounds) of each way, and the mixed batch's speed over
    each other way (median of the rounds' paired ratios, and their range), per sequence length and PE."""
    path = root / RECORD
    if not path.is_file():
        return "(no record yet: run benchmarks/mixed_batches.py)\n"
    from vitpe.machine import cpu_line

    record = json.loads(path.read_text())

    def ratio(row: dict, anchor: str) -> str:
        low, high = row[f"mixed_over_{anchor}_range"]
        return f"{row[f'mixed_over_{anchor}']:.2f} ({low:.2f}–{high:.2f})"

    rows = [[str(r["length"]), f"{r['images']} / {r['grids']}", f"{r['tokens']} / {r['mixed_tokens']} / "
             f"{r['padded_tokens']}", r["pe"], f"{r['mixed_img_s']:.1f}", f"{r['padded_img_s']:.1f}",
             f"{r['grouped_img_s']:.1f}", ratio(r, "padded"), ratio(r, "grouped")] for r in record["rows"]]
    table = markdown(["L", "images / grids", "tokens: image / mixed / padded", "PE", "mixed img/s", "padded img/s",
                      "grouped img/s", "mixed / padded", "mixed / grouped"], rows)
    return (f"{table}\nMachine: {cpu_line(record['machine'])}, {record['threads']} threads, torch {record['torch']}, "
            f"{record['date']}; training steps (forward, loss, backward), {record['rounds']} interleaved rounds after "
            f"a warm-up step; `{record['command']}`\n")


#: This study's tables: name -> function of the repository root -> markdown (scripts/report.py).
TABLES: dict[str, Callable[[Path], str]] = {"bench-mixed": bench_mixed}
