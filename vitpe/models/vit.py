"""The Vision Transformer backbone with a pluggable position encoding.

Shape legend: B batch, C channels, H x W image, p patch size, (gh, gw) = (H / p, W / p) patch grid, N = gh * gw
patch tokens, P prefix tokens (1 with a class token, else 0), T = P + N, D width, nH heads, Dh = D / nH.

The model knows only the PE *interface* (:class:`vitpe.pe.PositionEncoding`): once per forward it asks the PE for its
grid state, then hands that state to every block. Any image size divisible by the patch size works; the PE adapts
to the new grid in its resize mode (``interpolate`` or ``extrapolate``, see :mod:`vitpe.pe.grid`).

A list of images of different sizes (``model([img_a, img_b, ...])``, each (C, H, W)) is one *mixed* batch: each image
keeps its own patch grid, the token sequences are padded to the longest, and the PE acts on each image's own grid
(:mod:`vitpe.pe.mixed`), so an image's logits in the batch are its logits alone.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from timm.models._features import feature_take_indices  # indices read as timm's own models read them
from torch import nn

from vitpe.models.encoder import PETrunk, check_pool
from vitpe.models.stem import build_stem, embed_groups
from vitpe.pe.mixed import GridLayout

#: What a ViT takes: a batch (B, C, H, W), or a list of images (C, H, W) of any sizes (a mixed batch).
Images = torch.Tensor | Sequence[torch.Tensor]


def _pair(size: int | Sequence[int]) -> tuple[int, int]:
    pair = (size, size) if isinstance(size, int) else tuple(size)
    if len(pair) != 2 or any(int(s) < 1 for s in pair):
        raise ValueError(f"expected an int or an (h, w) pair of positive ints, got {size!r}")
    return int(pair[0]), int(pair[1])


class ViT(PETrunk):
    """ViT with any registered position encoding.

    Args:
        img_size: reference image size, int or (H, W); sets the PE's reference grid.
        patch_size: square patch side p (H and W of every input must be divisible by it).
        in_chans, num_classes: input channels and classifier outputs (0 = no head, return features).
        dim, depth, heads, mlp_ratio: width D, blocks, heads nH, MLP hidden = mlp_ratio * D.
        pe: registered PE name (see ``vitpe.pe.available()``); ``pe_options``: its own options as a dict.
        pe_resize: ``"interpolate"`` or ``"extrapolate"``, how the PE acts at a grid other than the reference.
        pool: ``"cls"`` (class token) or ``"mean"`` (average of patch tokens).
        class_token: add a class token; defaults to ``pool == "cls"``.
        reg_tokens: R register tokens (Darcet et al. 2024, "Vision Transformers Need Registers"), learned prefix tokens
            after the class token; like the class token they get no position and are not pooled.
        layer_scale_init: LayerScale on every residual branch, starting at this gain (DeiT-III, DINOv2); None = off.
        fc_norm: with ``pool="mean"``, apply the final LayerNorm to the pooled features instead of to every token
            (timm's layout for global average pooling).
        norm_eps: epsilon of every LayerNorm (timm's ViTs use 1e-6).
        mlp: ``"gelu"`` (Linear-GELU-Linear) or ``"swiglu"`` (EVA-02, DINOv3's larger models); ``mlp_norm``: a
            LayerNorm on the MLP's hidden features (EVA-02's sub-LN). See :mod:`vitpe.models.mlp`.
        drop_rate, attn_drop_rate, drop_path: dropout after MLP/projections and before the head, attention dropout,
            stochastic depth (linearly increasing over depth up to this value).
        qkv_bias: bias on the qkv projection.
        pe_combine: how a tokens-site PE meets the tokens: ``"add"`` (``x + pe``) or ``"concat"`` (``[x, pe]``
            projected back to ``dim``; :mod:`vitpe.models.pe_combine`).
        pos_drop: dropout on the tokens after the PE, before the first block (timm's ``pos_drop``).
        stem: ``"patch"`` (one p x p convolution, the ViT's) or ``"conv"`` (log2(p) stride-2 3 x 3 convolutions, Xiao
            et al. 2021); see :mod:`vitpe.models.stem`.
    """

    def __init__(
        self,
        img_size: int | Sequence[int] = 32,
        patch_size: int = 4,
        in_chans: int = 3,
        num_classes: int = 10,
        dim: int = 192,
        depth: int = 6,
        heads: int = 3,
        mlp_ratio: float = 4.0,
        pe: str = "learnable",
        pe_options: dict[str, Any] | None = None,
        pe_resize: str = "interpolate",
        pool: str = "cls",
        class_token: bool | None = None,
        drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        drop_path: float = 0.0,
        qkv_bias: bool = True,
        reg_tokens: int = 0,
        layer_scale_init: float | None = None,
        fc_norm: bool = False,
        norm_eps: float = 1e-5,
        mlp: str = "gelu",
        mlp_norm: bool = False,
        stem: str = "patch",
        pe_combine: str = "add",
        pos_drop: float = 0.0,
    ) -> None:
        super().__init__()
        class_token = check_pool(pool, class_token)
        if reg_tokens < 0:
            raise ValueError(f"reg_tokens must be >= 0, got {reg_tokens}")
        self.img_size = _pair(img_size)
        if patch_size < 1:
            raise ValueError(f"patch_size must be positive, got {patch_size}")
        self.patch_size = patch_size
        self.grid = self.patch_grid(self.img_size)
        self.in_chans = in_chans
        self.patch_embed = build_stem(stem, self.img_size, patch_size, in_chans, dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim)) if class_token else None
        self.build_trunk(grid=self.grid, num_classes=num_classes, dim=dim, depth=depth, heads=heads,
                         mlp_ratio=mlp_ratio, pe=pe, pe_options=pe_options, pe_resize=pe_resize, pool=pool,
                         num_prefix_tokens=int(class_token) + reg_tokens, drop_rate=drop_rate,
                         attn_drop_rate=attn_drop_rate, drop_path=drop_path, qkv_bias=qkv_bias,
                         layer_scale_init=layer_scale_init, norm_eps=norm_eps, fc_norm=fc_norm, mlp=mlp,
                         mlp_norm=mlp_norm, pe_combine=pe_combine, pos_drop=pos_drop)
        self.reg_token = nn.Parameter(torch.zeros(1, reg_tokens, dim)) if reg_tokens else None
        self.init_weights()
        for token in (self.cls_token, self.reg_token):
            if token is not None:
                nn.init.normal_(token, std=1e-6)

    # ------------------------------------------------------------------------------------------------- resolution
    def patch_grid(self, img_size: tuple[int, int]) -> tuple[int, int]:
        """The patch grid (gh, gw) of an (H, W) image; ``ValueError`` naming the patch size if it does not divide."""
        h, w = img_size
        if h % self.patch_size or w % self.patch_size:
            raise ValueError(
                f"image size {h}x{w} is not divisible by the patch size {self.patch_size}; resize or crop the "
                f"images to a multiple of {self.patch_size} (e.g. {h - h % self.patch_size or self.patch_size}x"
                f"{w - w % self.patch_size or self.patch_size})"
            )
        return h // self.patch_size, w // self.patch_size

    # ---------------------------------------------------------------------------------------------------- forward
    def forward_features(self, x: Images) -> torch.Tensor:
        """(B, C, H, W), or a list of B images (C, H, W) -> normalised tokens (B, T, D) (for a mixed batch padded to
        the longest sequence: :meth:`embed_images` says which tokens are each image's)."""
        return self.encode(*(self.embed(x) if isinstance(x, torch.Tensor) else self.embed_images(x)))

    def embed_images(self, images: Sequence[torch.Tensor]) -> tuple[torch.Tensor, tuple[int, int] | GridLayout]:
        """A list of B images (C, H, W) of any sizes divisible by the patch size -> (tokens (B, T, D) before block
        0, and their layout): one grid when every image has one size (the batch's path), else a
        :class:`~vitpe.pe.mixed.GridLayout`, each image's P prefix and gh * gw patch tokens first, zeros after."""
        if isinstance(images, torch.Tensor) or not len(images):
            raise ValueError("expected a non-empty list of images, each (C, H, W)")
        for i, image in enumerate(images):
            if not isinstance(image, torch.Tensor) or image.dim() != 3:
                shape = tuple(image.shape) if isinstance(image, torch.Tensor) else type(image).__name__
                raise ValueError(f"image {i} of the list is {shape}; each image of a list is one (C, H, W) tensor")
        layout = GridLayout([self.patch_grid(tuple(image.shape[-2:])) for image in images], self.num_prefix_tokens,
                            images[0].device)
        if layout.uniform:
            return self.embed(torch.stack(list(images)))
        batches = [self.check_images(torch.stack([images[i] for i in group.members])) for group in layout.groups]
        patches = embed_groups(self.patch_embed, batches)  # (b, gh, gw, D) per group, BatchNorm over them all
        return layout.assemble([self.with_prefix(p.flatten(1, 2)) for p in patches], dim=1), layout  # (B, T, D)

    def check_images(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` when it is a batch (B, C, H, W) this model takes, else a ``ValueError`` that says what is wrong."""
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"expected one batch tensor (B, C, H, W) here, got a {type(x).__name__} (a list of images "
                             f"of different sizes goes to model(images) or forward_features, which pad them)")
        if x.dim() != 4:
            raise ValueError(f"expected images of shape (B, C, H, W), got a tensor of shape {tuple(x.shape)}")
        if x.shape[1] != self.in_chans:
            raise ValueError(f"expected {self.in_chans} input channels, got images of shape {tuple(x.shape)}")
        if not x.is_floating_point():
            raise ValueError(f"expected floating-point images (normalised, e.g. float32), got {x.dtype}: convert "
                             f"them first, as the data loaders do")
        return x

    def embed(self, x: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int]]:
        """(B, C, H, W) -> (tokens (B, T, D) before block 0, patch grid (gh, gw)); a clear error for images the
        model cannot take."""
        self.check_images(x)
        grid = self.patch_grid((x.shape[-2], x.shape[-1]))
        return self.with_prefix(self.patch_embed(x).flatten(1, 2)), grid  # (B, gh, gw, D) -> (B, N, D) -> (B, T, D)

    def with_prefix(self, x: torch.Tensor) -> torch.Tensor:
        """Patch tokens (B, N, D) -> (B, T, D): the class token and registers in front, where the model has them."""
        prefix = [t.expand(x.shape[0], -1, -1) for t in (self.cls_token, self.reg_token) if t is not None]
        if prefix:
            x = torch.cat((*prefix, x), dim=1)  # (B, T, D): class token, registers, patches
        else:
            # the patch convolution writes (B, D, gh, gw) and NHWC is a permuted view of it: left so, the tokens keep
            # that transposed memory order through every residual add, and every LayerNorm copies them (one copy
            # here instead: 0.91-0.95x inference, 0.92-0.99x training time, mean pooling, recipe dims; BENCHMARKS.md)
            x = x.contiguous()  # (B, N, D), row-major
        return x

    def forward_intermediates(
        self,
        x: torch.Tensor,
        indices: int | Sequence[int] | None = None,
        return_prefix_tokens: bool = False,
        norm: bool = False,
        stop_early: bool = False,
        output_fmt: str = "NCHW",
        intermediates_only: bool = False,
    ) -> list[Any] | tuple[torch.Tensor, list[Any]]:
        """Features of intermediate blocks, with timm's signature and outputs, at any input size.

        ``indices``: the last n blocks (int) or these block indices (negative counts from the end); default all.
        Each intermediate holds the tokens after its block (through the final norm when ``norm``), the patch tokens as
        (B, D, gh, gw) (``output_fmt="NCHW"``) or (B, N, D) (``"NLC"``), with ``return_prefix_tokens`` paired with
        the prefix tokens (B, P, D). Returns the intermediates, or with ``intermediates_only=False`` also the final
        normalised tokens (B, T, D) (of the last block run, when ``stop_early`` stops after the last one asked for).
        """
        if output_fmt not in ("NCHW", "NLC"):
            raise ValueError(f"output_fmt must be 'NCHW' or 'NLC', got {output_fmt!r}")
        take, last = feature_take_indices(len(self.blocks), indices)
        tokens, (gh, gw) = self.embed(x)
        x, kept = self.run_blocks(tokens, (gh, gw), keep=set(take), last=last if stop_early else None)
        if norm:
            kept = [self.norm(t) for t in kept]
        P = self.num_prefix_tokens
        patches = [t[:, P:] for t in kept]  # (B, N, D) each
        if output_fmt == "NCHW":
            patches = [t.reshape(t.shape[0], gh, gw, -1).permute(0, 3, 1, 2).contiguous()  # (B, D, gh, gw)
                       for t in patches]
        intermediates: list[Any] = list(zip(patches, (t[:, :P] for t in kept))) if return_prefix_tokens else patches
        return intermediates if intermediates_only else (self.norm(x), intermediates)

    def prune_intermediate_layers(self, indices: int | Sequence[int] = 1, prune_norm: bool = False,
                                  prune_head: bool = True) -> list[int]:
        """Drop the blocks after the last of ``indices`` (as in :meth:`forward_intermediates`), and with ``prune_norm``
        the final norm, with ``prune_head`` the pooling norm and the classifier; returns the kept indices (timm's
        method of the same name)."""
        take, last = feature_take_indices(len(self.blocks), indices)
        self.blocks = self.blocks[:last + 1]
        if prune_norm:
            self.norm = nn.Identity()
        if prune_head:
            self.fc_norm, self.head, self.num_classes = nn.Identity(), nn.Identity(), 0
        return take

    def forward(self, x: Images) -> torch.Tensor:
        """Images (B, C, H, W), or a list of B images (C, H, W) of any sizes -> logits (B, num_classes)."""
        if isinstance(x, torch.Tensor):
            return self.forward_head(self.forward_features(x))
        tokens, layout = self.embed_images(x)
        if not isinstance(layout, GridLayout):
            return self.forward_head(self.encode(tokens, layout))
        return self.forward_head(self.encode(tokens, layout), token_mask=layout.token_mask(tokens.dtype))
