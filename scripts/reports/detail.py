"""The detail protocol (train at 16 px, test at 16-48 px): each run's gain against its training size."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from vitpe.resolution.report import gains_table, paired_gains
from reports.records import sweep


# ---------------------------------------------------------------------------------------- the detail protocol
def detail_records(root: Path) -> list[dict]:
    """The detail protocol's sweep, the multi-resolution runs named by their training sizes."""
    records = sweep(root / "results/detail/resolution.json")
    for r in records:
        if r["run"].startswith("multires_"):
            r["pe"] = f"{r['pe']}, 12–20 px"
    return records


def detail_gains(root: Path) -> str:
    """Trained at 16 px, tested at 16-48 px: each run against its own 16 px accuracy."""
    return gains_table(paired_gains(detail_records(root), "resolution"), "resolution").split("\n\n", 2)[-1]


#: This study's tables: name -> function of the repository root -> markdown (scripts/report.py).
TABLES: dict[str, Callable[[Path], str]] = {
    "detail-gains": detail_gains,
}
