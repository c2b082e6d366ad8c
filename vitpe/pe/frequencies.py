"""Geometric frequency ladders shared by the sinusoidal and rotary encodings."""

from __future__ import annotations

import torch


def geometric_frequencies(count: int, base: float, device: torch.device | None = None) -> torch.Tensor:
    """``base ** (-k / count)`` for ``k = 0 .. count - 1``, float32 of shape (count,).

    Vaswani's 1D sinusoid (``count = D/2``), MAE's 2D sin-cos (``count = D/4`` per axis), 1D RoPE (``count = Dh/2``)
    and axial 2D RoPE (``count = Dh/4`` per axis, Heo et al.) all use this ladder.
    """
    if count < 1:
        raise ValueError(f"need at least one frequency, got {count}")
    if base <= 0:
        raise ValueError(f"frequency base must be positive, got {base}")
    k = torch.arange(count, device=device, dtype=torch.float32)
    return base ** (-k / count)
