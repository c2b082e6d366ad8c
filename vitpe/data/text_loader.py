"""Batches of token sequences: each batch cut to its longest sequence, with a padding mask."""

from __future__ import annotations

import torch

from vitpe.data.loader import ShardedBatches
from vitpe.data.text import TextSet


class TextBatchLoader(ShardedBatches):
    """Iterate over ``data`` as ``((tokens, mask), labels)``: tokens (B, L) int64, mask (B, L) bool (True for real
    tokens), labels (B,), where L is the longest sequence of the batch. Shuffling, seeding and DDP sharding as in
    :class:`vitpe.data.loader.ShardedBatches`."""

    data: TextSet

    def batch(self, idx: torch.Tensor, epoch: int, step: int) -> tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
        lengths = self.data.lengths[idx]  # (B,)
        width = int(lengths.max())
        tokens = self.data.tokens[idx, :width]  # (B, L)
        mask = torch.arange(width)[None, :] < lengths[:, None]  # (B, L)
        to = dict(device=self.device, non_blocking=True)
        return (tokens.to(**to), mask.to(**to)), self.data.labels[idx].to(**to)
