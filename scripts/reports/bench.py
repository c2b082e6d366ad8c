"""The benchmarks: speed targets, throughput against timm, the GPU runs and A/Bs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable, Iterable

from vitpe.bench.targets import check_targets, summary, targets_grid, verdict
from reports.records import MISSING, markdown


# ------------------------------------------------------------------------------------------------ benchmarks
CPU_RUNS = {"eager": ("default_cpu_fp32", "recipe_cpu_fp32"),
            "compiled": ("default_cpu_fp32_compiled", "recipe_cpu_fp32_compiled")}
GPU_RUNS = ("default_h200_bf16", "recipe_h200_bf16")
NEW_PES_RUN = "new_pes_recipe_cpu_fp32"  # the PEs built to extrapolate, with none and three earlier PEs


def _bench(root: Path, name: str) -> dict:
    return json.loads((root / "results/bench" / name / "bench.json").read_text())


def _preset(result: dict) -> str:
    return "recipe" if result["config"].get("pool") == "mean" else "default"


def target_checks(root: Path, runs: Iterable[str]) -> list[dict]:
    """Every speed target's check over the benchmark ``runs`` (folders of results/bench/), each named by its preset."""
    checks = []
    for name in runs:
        result = _bench(root, name)
        checks += [{"run": _preset(result), **c} for c in check_targets(result)]
    return checks


def targets_table(runs: Iterable[str]) -> Callable[[Path], str]:
    """The table of every speed target over the benchmark ``runs`` (each check with its interval), then how many were
    met: the CPU runs of one mode, the GPU runs (one H200, bf16, where a step is launch-bound and most are missed), or
    the run of the PEs built to extrapolate."""
    def table(root: Path) -> str:
        checks = target_checks(root, runs)
        return "\n".join([*targets_grid(checks), "", summary(checks)]) + "\n"

    return table


def gpu_step_ms(root: Path) -> str:
    """The range of a training step's time (ms) over every model of the GPU runs (each PE, and timm's ViT)."""
    steps = []
    for name in GPU_RUNS:
        result = _bench(root, name)
        steps += [1000 * result["config"]["batch"] / r["train_img_s"] for r in result["rows"]]
    return f"{min(steps):.1f}–{max(steps):.1f} ms"


def speed_verdicts(root: Path) -> str:
    """The README's sentence on the targets: how many each kind of run meets and misses."""
    def counted(runs: Iterable[str]) -> str:
        verdicts = [verdict(c) for c in target_checks(root, runs)]
        return (f"{verdicts.count('met')} of {len(verdicts)} met, {verdicts.count('within noise')} within the noise, "
                f"{verdicts.count('**missed**')} missed")

    return (f"on the CPU, eager: {counted(CPU_RUNS['eager'])}; compiled: {counted(CPU_RUNS['compiled'])}; "
            f"on one H200 (bf16, eager): {counted(GPU_RUNS)}")


def bench_throughput(root: Path) -> str:
    """Training and inference throughput of timm's ViT and of vitpe's without a PE, per current run and size."""
    rows = []
    for name in (*CPU_RUNS["eager"], *CPU_RUNS["compiled"], *GPU_RUNS):
        result = _bench(root, name)
        machine, cfg = result["machine"], result["config"]
        device = machine.get("gpu") or machine.get("cpu_model") or machine["processor"]
        for size in cfg["img_sizes"]:
            by_pe = {r["pe"]: r for r in result["rows"] if r["img_size"] == size}
            rows.append([f"`{name}`", device, _preset(result), "compiled" if cfg.get("compile") else "eager", size,
                         f"{by_pe['timm']['train_img_s']:.0f}", f"{by_pe['none']['train_img_s']:.0f}",
                         f"{by_pe['learnable']['train_vs_timm']:.3f}" if "learnable" in by_pe else MISSING,
                         f"{by_pe['timm']['infer_img_s']:.0f}", f"{by_pe['none']['infer_img_s']:.0f}"])
    return markdown(["run (`results/bench/`)", "device", "preset", "mode", "px", "timm train img/s",
                     "vitpe `none` train img/s", "`learnable` / timm, train", "timm infer img/s",
                     "vitpe `none` infer img/s"], rows)


def bench_gpu(root: Path) -> str:
    """The GPU runs: each PE's step time over no PE, and the kernels it adds to a training step (runs that count)."""
    rows = []
    for name in GPU_RUNS:
        result = _bench(root, name)
        kernels = {(r["pe"], r["img_size"]): r.get("train_kernels") for r in result["rows"]}
        for r in result["rows"]:
            if r["pe"] not in ("timm", "none (again)"):
                added = kernels[r["pe"], r["img_size"]], kernels["none", r["img_size"]]
                rows.append([f"`{name}`", r["img_size"], f"`{r['pe']}`", f"{1 / r['train_vs_none'] - 1:+.1%}",
                             f"{1 / r['infer_vs_none'] - 1:+.1%}",
                             MISSING if None in added else f"{added[0] - added[1]:+d}"])
    return markdown(["run (`results/bench/`)", "px", "PE", "training step over `none`", "inference over `none`",
                     "kernels per training step over `none`"], rows)


AB_DIMS = re.compile(r"^== (\w+) dims")
AB_OVER_NONE = re.compile(r"^(train|infer) (\d+)px (\w+)/(old|new) +[\d.]+ ms +over none ([+-][\d.]+)%")
AB_RATIO = re.compile(r"^(train|infer) (\d+)px (\w+) new/old ([\d.]+) \[([\d.]+), ([\d.]+)\]")


def bench_gpu_ab(root: Path) -> str:
    """The GPU A/Bs of ``benchmarks/changes.py`` (their logs in ``results/bench/ab_h200/``): old and new over
    ``none``, and new/old with its 90% interval."""
    rows = []
    for log in sorted((root / "results/bench/ab_h200").glob("*.log")):
        dims, over = None, {}
        for line in log.read_text().splitlines():
            if match := AB_DIMS.match(line):
                dims = match.group(1)
            elif match := AB_OVER_NONE.match(line):
                kind, px, pe, side, value = match.groups()
                over[kind, px, pe, side] = f"{float(value):+.1f}%"
            elif match := AB_RATIO.match(line):
                kind, px, pe, ratio, low, high = match.groups()
                rows.append([f"`{log.stem}`", dims, px, "training" if kind == "train" else "inference", f"`{pe}`",
                             over[kind, px, pe, "old"], over[kind, px, pe, "new"], f"{ratio} ({low}…{high})"])
    return markdown(["change (`benchmarks/changes.py`)", "dims", "px", "step", "PE", "old over `none`",
                     "new over `none`", "new/old (90% interval)"], rows)


#: This study's tables: name -> function of the repository root -> markdown (scripts/report.py).
TABLES: dict[str, Callable[[Path], str]] = {
    "bench-targets-eager": targets_table(CPU_RUNS["eager"]),
    "bench-targets-compiled": targets_table(CPU_RUNS["compiled"]),
    "bench-throughput": bench_throughput,
    "bench-gpu": bench_gpu,
    "bench-gpu-ab": bench_gpu_ab,
    "bench-targets-gpu": targets_table(GPU_RUNS),
    "bench-new-pes": targets_table([NEW_PES_RUN]),
}

#: This study's numbers inside sentences (scripts/report.py's ``<!-- value: NAME -->``).
VALUES: dict[str, Callable[[Path], str]] = {
    "speed-verdicts": speed_verdicts,
    "gpu-step-ms": gpu_step_ms,
}
