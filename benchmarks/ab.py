"""The A/B harness: one change to vitpe timed old against new, in one process, with ``pe="none"`` in the same rounds.

A *change* is an attribute of vitpe (a function of a module, a method of a class) and the values it takes in each
variant, e.g. ``Change(ContinuousPositionBias, "tables", {"old": layer_by_layer, "new": ContinuousPositionBias.tables})``.
Every variant gets its own model per PE; before each of its steps the attribute is set to the variant's value. The
steps run in the benchmark's interleaved rounds (:func:`vitpe.bench.runner.interleaved_rounds`: a fresh seeded order
each round), and each ratio is paired within rounds with a bootstrap interval (:func:`vitpe.bench.stats.paired_speed_ratio`),
so machine noise hits old and new alike. Used by ``benchmarks/changes.py``; from Python::

    from benchmarks.ab import Change, compare
    result = compare(Change(owner, "attribute", {"old": ..., "new": ...}), pes=["cpb"], px=32, rounds=9)
    result.new_over_old["cpb"]   # (ratio, low, high): new's step time over old's, < 1 is faster
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from vitpe.bench.config import BenchConfig
from vitpe.bench.runner import infer_step_fn, interleaved_rounds, train_step_fn
from vitpe.bench.stats import CONFIDENCE, paired_speed_ratio
from vitpe.engine.compiled import compile_limits
from vitpe.engine.cpu_malloc import keep_freed_memory
from vitpe.models import ViT

#: Model shapes: the benchmark's default dims, the CPU recipe's, and a tiny one for smoke runs.
DIMS: dict[str, dict[str, Any]] = {
    "default": dict(dim=192, depth=6, heads=3, mlp_ratio=4.0, pool="cls", fc_norm=False),
    "recipe": dict(dim=128, depth=6, heads=4, mlp_ratio=2.0, pool="mean", fc_norm=True),
    "quick": dict(dim=32, depth=2, heads=2, mlp_ratio=2.0, pool="mean", fc_norm=True),
}
KINDS = ("train", "infer")


@dataclass
class Change:
    """``owner.attribute`` takes ``values[variant]`` in each variant (its first value is the reference, "old")."""

    owner: Any
    attribute: str
    values: dict[str, Any]

    def set(self, variant: str) -> None:
        setattr(self.owner, self.attribute, self.values[variant])


@dataclass
class Result:
    """Seconds per step of every timed function (``"none"`` and ``"PE/variant"``) in every round, and the ratios."""

    seconds: dict[str, list[float]]
    over_none: dict[str, tuple[float, float, float]] = field(default_factory=dict)  # step time / none's, interval
    new_over_old: dict[str, tuple[float, float, float]] = field(default_factory=dict)  # per PE: last / first variant

    def lines(self, label: str) -> list[str]:
        """The result as text, one line per timed function and one per PE's new/old, each with its interval."""
        out = []
        for name, times in self.seconds.items():
            median = sorted(times)[len(times) // 2]
            ratio, low, high = self.over_none[name]
            out.append(f"{label} {name:20s} {median * 1000:8.1f} ms  over none {ratio - 1:+.1%} "
                       f"[{low - 1:+.1%}, {high - 1:+.1%}]")
        for pe, (ratio, low, high) in self.new_over_old.items():
            out.append(f"{label} {pe} new/old {ratio:.3f} [{low:.3f}, {high:.3f}] ({100 * CONFIDENCE:.0f}%)")
        return out


def _time_ratio(times: list[float], reference: list[float]) -> tuple[float, float, float]:
    """``times`` over ``reference`` as a time ratio (> 1: slower), paired within rounds, with its interval."""
    speed, low, high = paired_speed_ratio(times, reference)  # reference time / time
    return 1 / speed, 1 / high, 1 / low


def compare(change: Change, pes: list[str], px: int, rounds: int, kind: str = "train", dims: str = "recipe",
            compiled: bool = False, batch: int = 128, device: str = "cpu", threads: int | None = 1) -> Result:
    """Time ``none`` and, for each PE, one model per variant of ``change``, in interleaved rounds; ``kind``:
    ``"train"`` (forward, loss, backward, AdamW) or ``"infer"``. ``compiled``: every model under torch.compile,
    each variant traced with its own value. On CUDA the steps run as the benchmark's do there (bf16 autocast,
    synchronised). The attribute is left at its last value ("new")."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    if dims not in DIMS:
        raise ValueError(f"dims must be one of {sorted(DIMS)}, not {dims!r}")
    if threads is not None:
        torch.set_num_threads(threads)
    keep_freed_memory(device)
    target = torch.device(device)
    g = torch.Generator().manual_seed(0)
    images = torch.randn(batch, 3, px, px, generator=g).to(target)
    labels = torch.randint(0, 10, (batch,), generator=g).to(target)

    def step(pe: str) -> Callable[[], None]:
        torch.manual_seed(0)
        model = ViT(img_size=px, patch_size=4, num_classes=10, pe=pe, **DIMS[dims]).to(target)
        model = torch.compile(model) if compiled else model
        if kind == "train":
            return train_step_fn(model, (images,), labels, target)
        return infer_step_fn(model, (images,), target)

    steps = {"none": step("none")}
    for pe in pes:
        for variant in change.values:
            def run(fn: Callable[[], None] = step(pe), variant: str = variant) -> None:
                change.set(variant)
                fn()
            steps[f"{pe}/{variant}"] = run
    per_round = max(1, 32 // batch) if target.type == "cpu" else 10  # a GPU step at batch 128 takes ~10 ms
    cfg = BenchConfig(repeats=rounds, warmup=2, steps=per_round)
    graphs = 1 + len(change.values) * len(pes)
    with compile_limits(graphs) if compiled else contextlib.nullcontext():
        seconds = interleaved_rounds(steps, cfg, target)
    result = Result(seconds, {name: _time_ratio(times, seconds["none"]) for name, times in seconds.items()})
    first, last = list(change.values)[0], list(change.values)[-1]
    for pe in pes:
        result.new_over_old[pe] = _time_ratio(seconds[f"{pe}/{last}"], seconds[f"{pe}/{first}"])
    return result
