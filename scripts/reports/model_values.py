"""Numbers inside sentences about a model's size, computed from the code rather than read from records: the
parameters and the floating-point operations of the model a config builds. A page writes, e.g.,

    (<!-- value: model-mflops configs/cifar10_17ep.yaml model.stem=conv model.depth=5 -->291<!-- /value --> MFLOP)

the config and then any overrides, as train.py takes them."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

from vitpe.config import eval_size, load_config
from vitpe.models.from_config import build_model


@lru_cache(maxsize=16)
def built(root: Path, config: str, overrides: tuple[str, ...]) -> tuple[torch.nn.Module, int]:
    """The model ``config`` with ``overrides`` builds (ten classes, seeded) and the image size it is evaluated at."""
    loaded = load_config(root / config, overrides)
    torch.manual_seed(0)
    return build_model(loaded, num_classes=10), eval_size(loaded)


def model_params(root: Path, config: str, *overrides: str) -> str:
    """The model's parameters, in thousands ("758k")."""
    model, _ = built(root, config, overrides)
    return f"{sum(p.numel() for p in model.parameters()) / 1000:.0f}k"


def model_mflops(root: Path, config: str, *overrides: str) -> str:
    """Floating-point operations (millions, whole) of one training step per image at the config's evaluation size,
    forward and backward, by torch's FlopCounterMode (a multiply-add counts two)."""
    model, size = built(root, config, overrides)
    batch = 2
    with FlopCounterMode(display=False) as counter:
        model(torch.randn(batch, 3, size, size)).sum().backward()
    model.zero_grad(set_to_none=True)
    return f"{counter.get_total_flops() / batch / 1e6:.0f}"


#: Numbers inside sentences (scripts/report.py's ``<!-- value: NAME ARG ... -->``).
VALUES: dict[str, Callable[..., str]] = {"model-params": model_params, "model-mflops": model_mflops}
