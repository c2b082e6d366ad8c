"""The speed targets the benchmark is held to, checked against a ``bench.json`` result.

- vitpe ``learnable`` trains at least as fast as timm's ``VisionTransformer`` (ratio >= 1.00);
- a PE's training-step overhead against ``pe="none"`` is at most 3% at the tokens site and at most 8% at the q,k and
  logits sites, at every measured image size;
- the data pipeline takes at most 5% of a real epoch.

Overhead is ``t_pe / t_none - 1`` from the medians of one interleaved run (``1 / train_vs_none - 1``).
"""

from __future__ import annotations

from typing import Any

import vitpe.pe

MAX_OVERHEAD = {"tokens": 0.03, "qk": 0.08, "logits": 0.08}
MIN_LEARNABLE_VS_TIMM = 1.00
MAX_DATA_SHARE = 0.05


def check_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per target and image size: ``{"target", "img_size", "measured", "limit", "unit", "met"}``, where
    ``unit`` is ``"ratio"`` (a speed ratio) or ``"fraction"`` (an overhead or a share)."""
    checks = []
    for row in result["rows"]:
        if row["pe"] == "learnable" and "train_vs_timm" in row:
            ratio = row["train_vs_timm"]
            checks.append({"target": "learnable vs timm (train, ratio >=)", "img_size": row["img_size"],
                           "measured": ratio, "limit": MIN_LEARNABLE_VS_TIMM, "unit": "ratio",
                           "met": ratio >= MIN_LEARNABLE_VS_TIMM})
        if row["pe"] in ("timm", "none") or "train_vs_none" not in row:
            continue
        site = vitpe.pe.get(row["pe"]).site
        overhead = 1.0 / row["train_vs_none"] - 1.0
        checks.append({"target": f"{row['pe']} ({site}) overhead vs none (train, <=)", "img_size": row["img_size"],
                       "measured": overhead, "limit": MAX_OVERHEAD[site], "unit": "fraction",
                       "met": overhead <= MAX_OVERHEAD[site]})
    if "data_share" in result:
        share = result["data_share"]
        checks.append({"target": "data pipeline share of a real epoch (<=)", "img_size": 32, "measured": share,
                       "limit": MAX_DATA_SHARE, "unit": "fraction", "met": share <= MAX_DATA_SHARE})
    return checks


def targets_markdown(checks: list[dict[str, Any]]) -> list[str]:
    """The checks as a markdown table (ratios as x, overheads and shares as %)."""
    lines = ["| target | px | measured | limit | met |", "|---|---|---|---|---|"]
    for c in checks:
        fmt = (lambda v: f"{v:.3f}x") if c["unit"] == "ratio" else (lambda v: f"{100 * v:+.1f}%")
        lines.append(f"| {c['target']} | {c['img_size']} | {fmt(c['measured'])} | {fmt(c['limit'])} | "
                     f"{'yes' if c['met'] else '**no**'} |")
    return lines
