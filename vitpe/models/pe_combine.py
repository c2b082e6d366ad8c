"""How a tokens-site PE meets the tokens: added (the ViT's ``x + pe``) or concatenated and projected back.

``model.pe_combine=concat`` feeds ``[x, pe]`` (B, T, 2D) through a learned projection to the width D instead of adding
``pe`` -- the alternative the ViT tutorial this toolkit grew from discusses. The projection starts as ``[I, I]``, so a
new model computes exactly ``x + pe``, and only training can make the two parts interact differently (a projection
drawn at random would scramble the patch features at the first step). For a PE whose tokens term depends on the
tokens (PEG's convolution) the concatenated part is that term.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

COMBINES = ("add", "concat")


class ConcatProjection(nn.Module):
    """``[x, pe] W^T + b``: (B, T, D) and (B or 1, T, D) -> (B, T, D), ``W`` (D, 2D) starting at ``[I, I]``, ``b`` 0."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        eye = torch.eye(dim)
        self.weight = nn.Parameter(torch.cat([eye, eye], dim=1))  # (D, 2D)
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
        return F.linear(torch.cat([x, pe.expand_as(x)], dim=-1), self.weight, self.bias)  # (B, T, 2D) -> (B, T, D)
