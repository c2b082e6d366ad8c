"""Batches of token sequences: each batch cut to its longest sequence, with a padding mask.

Training batches are drawn from length buckets: the epoch's shuffled order is cut into chunks of ``bucket`` batches,
each chunk sorted by length and cut into batches, and the batches shuffled again -- so a batch holds sequences of
similar length and little padding (SST-2: phrases of 1 to 52 words) while every epoch still sees a fresh order.

``word_dropout`` (training only) replaces each real token by ``<unk>`` with that probability (Iyyer et al. 2015,
"Deep Unordered Composition"): a regulariser, and the only way ``<unk>`` -- which every out-of-vocabulary word of the
test data maps to -- gets a trained embedding when the vocabulary keeps every training word.

``width_multiple`` pads every batch to a multiple of that many tokens (at most the set's longest sequence), as a
compiled model needs: one static graph per width, so a handful of graphs instead of one per sequence length (SST-2:
52), more than dynamo's limit of 8 allows. The model masks the padding and crops its positions to the batch's width,
so padding changes the real tokens' results only by rounding.
"""

from __future__ import annotations

import torch

from vitpe.data.loader import ShardedBatches, step_seed
from vitpe.data.text import UNK_ID, TextSet

#: The ``width_multiple`` of a compiled training run's batches: SST-2's 52 lengths become 7 widths, 7 graphs.
COMPILED_WIDTH_MULTIPLE = 8


class TextBatchLoader(ShardedBatches):
    """Iterate over ``data`` as ``((tokens, mask), labels)``: tokens (B, L) int64, mask (B, L) bool (True for real
    tokens), labels (B,), where L is the longest sequence of the batch, rounded up to a multiple of ``width_multiple``
    (capped at the set's width). Shuffling, seeding and DDP sharding as in :class:`vitpe.data.loader.ShardedBatches`."""

    data: TextSet

    def __init__(self, data: TextSet, batch_size: int, *, train: bool, bucket: int = 50, word_dropout: float = 0.0,
                 width_multiple: int = 1, **kwargs) -> None:
        super().__init__(data, batch_size, train=train, **kwargs)
        if not 0.0 <= word_dropout < 1.0:
            raise ValueError(f"word_dropout must be in [0, 1), got {word_dropout}")
        if width_multiple < 1:
            raise ValueError(f"width_multiple must be >= 1, got {width_multiple}")
        self.bucket, self.word_dropout, self.width_multiple = bucket, word_dropout, width_multiple

    def _width(self, longest: int) -> int:
        """A batch's width: its longest sequence rounded up to ``width_multiple``, at most the set's width."""
        return min(-(-longest // self.width_multiple) * self.width_multiple, self.data.tokens.shape[1])

    def widths(self) -> list[int]:
        """Every width a batch can have (a compiled model's input lengths), shortest first."""
        return sorted({self._width(int(length)) for length in self.data.lengths.unique()})

    def _indices(self, epoch: int) -> torch.Tensor:
        indices = super()._indices(epoch)
        if not self.train or self.bucket <= 1:
            return indices
        usable = self.steps * self.batch_size
        chunk = self.bucket * self.batch_size
        batches = []
        for start in range(0, usable, chunk):
            part = indices[start:min(start + chunk, usable)]
            part = part[torch.argsort(self.data.lengths[part], stable=True)]
            batches += list(part.split(self.batch_size))
        g = torch.Generator().manual_seed(step_seed(self.seed, epoch, -2))
        order = torch.randperm(len(batches), generator=g)
        return torch.cat([batches[i] for i in order.tolist()])  # (steps * batch_size,)

    def batch(self, idx: torch.Tensor, epoch: int, step: int) -> tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
        lengths = self.data.lengths[idx]  # (B,)
        width = self._width(int(lengths.max()))
        tokens = self.data.tokens[idx, :width]  # (B, L)
        mask = torch.arange(width)[None, :] < lengths[:, None]  # (B, L)
        if self.train and self.word_dropout > 0:
            g = torch.Generator().manual_seed(step_seed(self.seed, epoch, step, salt=3))
            drop = (torch.rand(tokens.shape, generator=g) < self.word_dropout) & mask  # (B, L)
            tokens = tokens.masked_fill(drop, UNK_ID)
        to = dict(device=self.device, non_blocking=True)
        return (tokens.to(**to), mask.to(**to)), self.data.labels[idx].to(**to)
