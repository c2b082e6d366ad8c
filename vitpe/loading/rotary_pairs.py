"""Checkpoints written before vitpe paired rotary channels side by side, read as they were trained.

Until 2026-12-01 vitpe's RoPE paired channel ``j`` of a head with channel ``j + Dh/2`` (rotate-half); it now pairs
``2j`` with ``2j + 1`` (see :mod:`vitpe.pe.rotary` for why). A model with a rotary PE trained in the old layout gives
the same scores in the new one once the output rows of its q and k projections are reordered head by head: the same
permutation on q and on k leaves every ``q . k`` unchanged, and each pair meets the angle it was trained with.

Checkpoints now say which layout they hold (:data:`CHECKPOINT_KEY`); one without the key is from before. Reading it,
checkpoint loading (:func:`vitpe.loading.checkpoint.upgrade_checkpoint`) calls :func:`reorder_rotary_rows`, which
reorders the rows in the model's weights, the EMA weights and, when a run is resumed, the optimiser's per-parameter
state (AdamW's moments), so a resumed run continues exactly where it stopped.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

from vitpe.models.attention import Attention
from vitpe.pe.sites import RotaryEncoding

#: The checkpoint entry naming the rotary pair layout, and its value since the interleaved layout.
CHECKPOINT_KEY, LAYOUT = "rotary_pairs", "interleaved"


def half_to_interleaved(rows: torch.Tensor, heads: int) -> torch.Tensor:
    """Reorder the q (or k) output rows of a projection, (nH * Dh, ...), from the rotate-half layout (pair j =
    channels j, j + Dh/2) to the interleaved one (pair j = channels 2j, 2j + 1), head by head."""
    head_dim = rows.shape[0] // heads
    order = torch.stack((torch.arange(head_dim // 2), torch.arange(head_dim // 2, head_dim)), -1).flatten()  # (Dh,)
    return rows.reshape(heads, head_dim, *rows.shape[1:])[:, order].reshape(rows.shape)  # (nH, Dh, ...) reordered


def rotated_projections(model: nn.Module) -> dict[str, int]:
    """The qkv projection parameters (name -> heads) whose q and k rows a rotary PE turns; empty without one."""
    if not any(isinstance(m, RotaryEncoding) for m in model.modules()):
        return {}
    return {f"{name}.qkv.{part}": module.heads for name, module in model.named_modules()
            if isinstance(module, Attention) for part in ("weight", "bias") if getattr(module.qkv, part) is not None}


def reorder_qk(tensor: torch.Tensor, heads: int,
               reorder: Callable[[torch.Tensor, int], torch.Tensor] = half_to_interleaved) -> torch.Tensor:
    """A qkv projection's weight or bias (3 nH Dh, ...) with ``reorder`` applied to its q and k rows (v kept)."""
    q, k, v = tensor.chunk(3)  # (D, ...) each: the projections' q, k and v rows
    return torch.cat((reorder(q, heads), reorder(k, heads), v))


def _upgrade_optimizer(state: dict[str, Any], optimizer: torch.optim.Optimizer, model: nn.Module,
                       projections: dict[str, int]) -> dict[str, Any]:
    """An optimiser state dict with the per-parameter tensors of ``projections`` reordered. Its parameters are
    numbered in the order of ``optimizer``'s groups, which were built from the same model the same way."""
    names = {id(p): n for n, p in model.named_parameters()}
    order = [names.get(id(p)) for group in optimizer.param_groups for p in group["params"]]
    state = {**state, "state": dict(state["state"])}
    for index, entry in state["state"].items():
        name = order[index] if isinstance(index, int) and index < len(order) else None
        if name in projections:
            shape = model.get_parameter(name).shape
            state["state"][index] = {key: reorder_qk(value, projections[name])
                                     if isinstance(value, torch.Tensor) and value.shape == shape else value
                                     for key, value in entry.items()}
    return state


def reorder_rotary_rows(ckpt: dict[str, Any], model: nn.Module, optimizer: torch.optim.Optimizer | None = None
                        ) -> dict[str, Any]:
    """A copy of ``ckpt`` (saved in the rotate-half layout) in the interleaved one for ``model`` (built from its
    config): the q and k rows of the model, EMA and (given ``optimizer``) optimiser states reordered; ``ckpt`` itself
    where the model has no rotary PE."""
    projections = rotated_projections(model)
    ckpt = {**ckpt, CHECKPOINT_KEY: LAYOUT}
    if not projections:
        return ckpt
    for key in ("model", "ema"):
        if ckpt.get(key) is not None:
            ckpt[key] = {name: reorder_qk(value, projections[name]) if name in projections else value
                         for name, value in ckpt[key].items()}
    if optimizer is not None and ckpt.get("optimizer") is not None:
        ckpt["optimizer"] = _upgrade_optimizer(ckpt["optimizer"], optimizer, model, projections)
    return ckpt
