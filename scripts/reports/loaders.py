"""Data loading: the stream loader against timm's and torchvision's loaders, and its memory over many images
(``benchmarks/loaders.py``'s records in ``results/bench/loaders_cpu/``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from reports.records import markdown

RUN = "results/bench/loaders_cpu"


def _record(root: Path, name: str) -> dict | None:
    path = root / RUN / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _machine(record: dict) -> str:
    from vitpe.machine import cpu_line

    return f"Machine: {cpu_line(record['machine'])}, {record.get('cores', '?')} cores"


def bench_loaders(root: Path) -> str:
    """Images per second of each loader (median over the rounds) and the stream loader's ratios (median of the
    rounds' paired ratios, and their range), per output size and worker count."""
    record = _record(root, "throughput")
    if record is None:
        return "(no record yet: run benchmarks/loaders.py throughput)\n"
    def ratio(row: dict, ours: str, anchor: str) -> str:  # the median paired ratio, and its range over the rounds
        pairs = [a / b for a, b in zip(row[f"{ours}_rounds"], row[f"{anchor}_rounds"])]
        return f"{row[f'{ours}_over_{anchor}']:.2f} ({min(pairs):.2f}–{max(pairs):.2f})"

    rows = [[f"{r['size']}", f"{r['workers']}", f"{r['vitpe_img_s']:.0f}", f"{r['vitpe_draft_img_s']:.0f}",
             f"{r['timm_img_s']:.0f}", f"{r['torchvision_img_s']:.0f}", ratio(r, "vitpe", "timm"),
             ratio(r, "vitpe_draft", "timm"), ratio(r, "vitpe", "torchvision")] for r in record["rows"]]
    table = markdown(["px", "workers", "vitpe img/s", "vitpe draft img/s", "timm img/s", "torchvision img/s",
                      "vitpe / timm", "vitpe draft / timm", "vitpe / torchvision"], rows)
    return (f"{table}\n{_machine(record)}, torch {record['torch']}, {record['date']}; {record['rounds']} rounds of "
            f"{record['timed']} batches of {record['batch']} after {record['warmup']}; `{record['command']}`\n")


def bench_loader_memory(root: Path) -> str:
    """Peak memory of the stream loader (PSS over its processes, and the main process's peak RSS) per folder size,
    and each over the smallest folder's."""
    record = _record(root, "memory")
    if record is None:
        return "(no record yet: run benchmarks/loaders.py memory)\n"
    rows = sorted(record["rows"], key=lambda r: r["images"])
    smallest = rows[0]
    table = markdown(["images", "peak PSS, main + workers (MB)", "PSS over the smallest", "main process peak RSS (MB)",
                      "RSS over the smallest"],
                     [[f"{r['images']:,}", f"{r['peak_pss_mb']:.0f}",
                       f"{r['peak_pss_mb'] / smallest['peak_pss_mb']:.3f}", f"{r['main_peak_rss_mb']:.0f}",
                       f"{r['main_peak_rss_mb'] / smallest['main_peak_rss_mb']:.3f}"]
                      for r in rows])
    return (f"{table}\n{_machine(record)}, torch {record['torch']}, {record['date']}; {record['workers']} workers, "
            f"{record['batches']} batches of {record['batch']} at {record['px']} px; `{record['command']}`\n")


def bench_in_memory(root: Path) -> str:
    """The in-memory path on full-size photographs: whether it trained, its peak against the decoded set."""
    record = _record(root, "in_memory")
    if record is None:
        return "(no record yet: run benchmarks/loaders.py in_memory)\n"
    trained = "yes" if record["returncode"] == 0 else f"no (exit {record['returncode']})"
    table = markdown(["data", "stored at (px)", "images", "decoded (MB)", "trained", "peak RSS (MB)",
                      "peak over decoded"],
                     [[record["data"], str(record["img_size"]), f"{record['images']:,}", f"{record['decoded_mb']:.0f}",
                       trained, f"{record['peak_rss_mb']:.0f}", f"{record['peak_rss_mb'] / record['decoded_mb']:.2f}"]])
    return f"{table}\n{_machine(record)}, torch {record['torch']}, {record['date']}; `{record['command']}`\n"


#: This study's tables: name -> function of the repository root -> markdown (scripts/report.py).
TABLES: dict[str, Callable[[Path], str]] = {
    "bench-loaders": bench_loaders,
    "bench-loader-memory": bench_loader_memory,
    "bench-in-memory": bench_in_memory,
}
