"""Rotary PEs whose rotation is the exponential of learned skew-symmetric generators: the shared base of
``liere`` (:mod:`vitpe.pe.liere`) and ``comrope`` (:mod:`vitpe.pe.comrope`).

A cell at position ``p`` (ndim coordinates) rotates q and k by ``R(p) = exp(sum_a p_a A_a)``, with ``A_a``
skew-symmetric (so ``R(p)`` is orthogonal) and block-diagonal: Dh/b blocks of ``b x b`` (``block_size``, default 8;
b = 2 with fixed generators is RoPE). Positions are in units of the reference grid's side (``p / g_ref`` per axis, the
reference grid spanning [0, 1)), as in ComRoPE's code, so that the generators' scale does not depend on the training
grid. Prefix tokens are not rotated. Resize: positions squeezed into the reference range (``interpolate``) or
continued (``extrapolate``); DINOv3's coordinate augmentation (``shift``, ``jitter``, ``rescale``) in training.

Cost: a matrix exponential per (layer, head, cell, block) in every training step (ComRoPE: per distinct coordinate of
each axis, :mod:`vitpe.pe.comrope`), and a ``b x b`` product per channel block of q and k (BENCHMARKS.md).
"""


from __future__ import annotations


import torch

from vitpe.pe.base import CommonArgs, PositionEncoding, Unpack
from vitpe.pe.coord_augment import CoordAugment
from vitpe.pe.grid import Grid
from vitpe.pe.option_checks import non_negative_number
from vitpe.pe.sites import _autocast_off

#: A generator RoPE's per-forward state: each layer's rotations, (nH, P + N, Dh/b, b, b).
GeneratorState = tuple[torch.Tensor, ...]


def skew(matrices: torch.Tensor) -> torch.Tensor:
    """``F - F^T`` over the last two dimensions: a skew-symmetric matrix from any square one."""
    return matrices - matrices.transpose(-1, -2)


def rotate_blocks(x: torch.Tensor, rotations: torch.Tensor) -> torch.Tensor:
    """``x`` (..., nH, T, Dh) with each block of ``b`` channels multiplied by its matrix in ``rotations``
    (nH, T, Dh/b, b, b); same shape as ``x``."""
    blocks = x.reshape(*x.shape[:-1], rotations.shape[-3], rotations.shape[-1])  # (..., nH, T, Dh/b, b)
    # one contraction over the channels of a block, batched over (head, token, block): its backward sums the batch
    # inside the product, where a broadcast matmul would first build a (B, nH, T, Dh/b, b, b) outer product per image
    turned = torch.einsum("htkij,...htkj->...htki", rotations.to(x.dtype), blocks)  # (..., nH, T, Dh/b, b)
    return turned.flatten(-2)  # (..., nH, T, Dh)


class GeneratorRope(PositionEncoding):
    """q,k site: ``R(p) = exp(sum_a p_a A_a)`` with block-diagonal skew-symmetric generators from :meth:`generators`,
    shape (depth, nH, ndim, Dh/b, b, b)."""

    site = "qk"
    layered = True

    def __init__(self, block_size: int = 8, init_std: float = 1.0, shift: float | None = None,
                 jitter: float | None = None, rescale: float | None = None, **common: Unpack[CommonArgs]) -> None:
        super().__init__(**common)
        if not isinstance(block_size, int) or block_size < 2 or self.head_dim % block_size:
            raise ValueError(f"{self.name}: block_size must be a whole number >= 2 dividing the head dim "
                             f"({self.head_dim}), got {block_size!r}")
        self.block_size = block_size
        self.blocks = self.head_dim // block_size
        self.init_std = non_negative_number(init_std, f"{self.name}: init_std")
        self.augment = CoordAugment.checked(shift, jitter, rescale, self.name)

    def generators(self) -> torch.Tensor:
        raise NotImplementedError

    def rotations(self, positions: torch.Tensor) -> torch.Tensor:
        """``R(p)`` at ``positions`` (N, ndim) in reference-side units: (depth, nH, N, Dh/b, b, b)."""
        work = self.working_dtype  # a PE cast to bf16: its exponentials in float32 (no-ops in float32)
        A = self.generators().to(work)  # (depth, nH, ndim, Dh/b, b, b)
        exponent = torch.einsum("na,lhakij->lhnkij", positions.to(work), A)  # (depth, nH, N, Dh/b, b, b)
        return torch.linalg.matrix_exp(exponent.contiguous())  # (torch's matrix_exp fails on some strided inputs)

    def prepare(self, grid: int | tuple[int, ...]) -> GeneratorState:
        """As every PE's, except that in evaluation without gradients the rotations are cached per grid and weights
        (their version counters): an evaluation sweep pays the matrix exponentials once per size, not per batch. A
        compiled graph computes them in the graph (a version counter is no value a graph can guard on)."""
        if self.training or torch.is_grad_enabled() or torch.compiler.is_compiling():
            return super().prepare(grid)
        grid = self.check_grid(grid)
        versions = tuple(p._version for p in self.parameters())
        return self.cached(("frozen", grid, self.resize, versions), lambda: self._prepare(grid))

    def _prepare(self, grid: Grid) -> GeneratorState:
        with _autocast_off(self.device):
            rotations = self.rotations(self.positions_in_sides(grid)).float()  # (depth, nH, N, Dh/b, b, b)
        eye = torch.eye(self.block_size, device=self.device).expand(*rotations.shape[:2], self.num_prefix_tokens,
                                                                    self.blocks, -1, -1)
        return tuple(torch.cat([eye, rotations], dim=2).unbind(0))  # depth x (nH, P + N, Dh/b, b, b)

    def rotate(self, x: torch.Tensor, state: GeneratorState, layer: int) -> torch.Tensor:
        self.check_layer(layer)
        self.check_tokens(x.shape[-2], state[layer].shape[-4], "x")
        return rotate_blocks(x, state[layer])
