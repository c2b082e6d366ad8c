"""How an image becomes patch tokens: the ViT's one patch convolution, or a stack of small convolutions.

- ``patch``: one p x p convolution with stride p (timm's ``PatchEmbed``), as in the ViT (Dosovitskiy et al. 2021).
- ``conv``: log2(p) 3 x 3 convolutions with stride 2, BatchNorm and ReLU between them, the channels doubling up to D
  (timm's ``ConvStem``): the convolutional stem of Xiao et al. 2021, "Early Convolutions Help Transformers See
  Better", who report steadier optimisation and higher accuracy for about the cost of one transformer block; CCT
  (Hassani et al. 2021) tokenises small images with convolutions too. Its zero-padded 3 x 3 kernels see across patch
  borders and the image edge, so the tokens carry some position of their own (as PEG's convolution gives them).

Both map images (B, C, H, W) to tokens on the patch grid (B, gh, gw, D), gh = H / p, gw = W / p, for any H and W
divisible by p.
"""

from __future__ import annotations

import math

import torch
from timm.layers import PatchEmbed
from timm.models.vision_transformer_hybrid import ConvStem
from torch import nn

STEMS = ("patch", "conv")


def conv_stem_problem(patch_size: int, dim: int) -> str | None:
    """Why a ``conv`` stem cannot give patches of ``patch_size`` at width ``dim``, or None when it can."""
    if patch_size < 2 or patch_size & (patch_size - 1):
        return f"needs a patch size that is a power of 2 (2, 4, 8, 16), got {patch_size}"
    if dim % (patch_size // 2):
        return (f"halves the width once per stride-2 layer before the last: dim {dim} must be divisible by "
                f"{patch_size // 2}")
    return None


class ConvPatchStem(nn.Module):
    """log2(p) stride-2 3 x 3 convolutions (timm's ConvStem: BatchNorm + ReLU after all but the last, which has a
    bias), widths D / 2^(k-1), ..., D / 2, D. (B, C, H, W) -> (B, gh, gw, D)."""

    def __init__(self, patch_size: int, in_chans: int, dim: int) -> None:
        super().__init__()
        problem = conv_stem_problem(patch_size, dim)
        if problem:
            raise ValueError(f"the conv stem {problem}")
        depth = int(math.log2(patch_size))
        self.convs = ConvStem(in_chans, depth=depth, channels=tuple(dim >> i for i in reversed(range(depth))),
                              kernel_size=3, stride=(2,) * depth)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.convs(x).permute(0, 2, 3, 1)  # (B, D, gh, gw) -> (B, gh, gw, D)

    def forward_groups(self, groups: list[torch.Tensor]) -> list[torch.Tensor]:
        """Batches of images of different sizes (b_i, C, H_i, W_i) -> (b_i, gh_i, gw_i, D) each, as one batch: every
        BatchNorm normalises with the statistics of all the groups' pixels together (as one batch of one size would),
        not each group's own -- in training a group of one image would otherwise bring its own statistics."""
        for layer in self.convs:  # ConvNormAct: convolution, then BatchNorm with its activation (none in the last)
            groups = [layer.conv(x) for x in groups]
            if isinstance(layer.bn, nn.modules.batchnorm._BatchNorm):
                groups = joint_batchnorm(layer.bn, groups)
            else:
                groups = [layer.bn(x) for x in groups]
        return [x.permute(0, 2, 3, 1) for x in groups]  # (b, D, gh, gw) -> (b, gh, gw, D)


def joint_batchnorm(norm: nn.Module, groups: list[torch.Tensor]) -> list[torch.Tensor]:
    """A BatchNorm module (and what it fuses: timm's activation) on feature maps (b_i, C, h_i, w_i) of different
    sizes, with the statistics of all of them: their pixels as one (1, C, sum b_i h_i w_i, 1) map, split back."""
    flat = [x.permute(1, 0, 2, 3).reshape(x.shape[1], -1) for x in groups]  # (C, b_i h_i w_i) each
    joined = norm(torch.cat(flat, dim=1)[None, :, :, None])[0, :, :, 0]  # (C, sum b_i h_i w_i)
    parts = joined.split([f.shape[1] for f in flat], dim=1)
    return [part.reshape(x.shape[1], x.shape[0], *x.shape[2:]).permute(1, 0, 2, 3)  # (b_i, C, h_i, w_i)
            for part, x in zip(parts, groups)]


def embed_groups(stem: nn.Module, groups: list[torch.Tensor]) -> list[torch.Tensor]:
    """Groups of images (b_i, C, H_i, W_i), each group one size -> patch tokens (b_i, gh_i, gw_i, D) each, with the
    statistics of a BatchNorm stem shared by all groups (:meth:`ConvPatchStem.forward_groups`)."""
    if isinstance(stem, ConvPatchStem):
        return stem.forward_groups(groups)
    return [stem(x) for x in groups]


def build_stem(kind: str, img_size: tuple[int, int], patch_size: int, in_chans: int, dim: int) -> nn.Module:
    """The stem of ``kind`` (one of :data:`STEMS`): (B, C, H, W) -> (B, H / p, W / p, D)."""
    if kind == "patch":
        return PatchEmbed(img_size, patch_size, in_chans, dim, output_fmt="NHWC", strict_img_size=False)
    if kind == "conv":
        return ConvPatchStem(patch_size, in_chans, dim)
    raise ValueError(f"unknown stem {kind!r}; choose one of {list(STEMS)}")
