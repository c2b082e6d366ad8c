"""Pictures of what a trained PE looks like, at the training grid and at a resized grid in both modes.

* additive PEs (learnable, separable, sincos): the cosine similarity of each grid position's embedding with every
  other one (the ViT paper's figure 7): a mosaic of gh x gw small maps, one per position;
* q,k PEs (RoPE): the score of the centre query against every key when all tokens carry the same content, per head,
  first block;
* logits PEs (relbias, cpb, alibi): the attention bias of the centre query, per head, first block.
PEG and none have no static pattern and are skipped.
"""

from __future__ import annotations

from pathlib import Path

import torch

from vitpe.atomic_files import save_figure_atomic
from vitpe.pe import PositionEncoding, ResizeError
from vitpe.pe.sites import AdditiveEncoding


def _patterns(pe: PositionEncoding, grid: tuple[int, int]) -> torch.Tensor | None:
    """(rows, cols) images to show for ``grid``, or None when the PE has no static pattern."""
    gh, gw = grid
    P = pe.num_prefix_tokens
    state = pe.prepare(grid)
    centre = P + (gh // 2) * gw + gw // 2
    if isinstance(pe, AdditiveEncoding):
        emb = torch.nn.functional.normalize(pe.embedding(grid).float(), dim=-1)  # (N, D)
        sim = (emb @ emb.T).reshape(gh, gw, gh, gw)  # position (r, c) -> map over (r', c')
        return sim.permute(0, 2, 1, 3).reshape(gh * gh, gw * gw)  # mosaic (gh * gh, gw * gw)
    if pe.site == "qk":
        qkv = torch.ones(3, pe.heads, P + gh * gw, pe.head_dim)  # same content everywhere
        q, k, _ = pe.rotate_qkv(qkv, state, 0)  # (nH, T, E): E = Dh, or wider for a PE that widens q, k (PaPE)
        scores = (q[:, centre:centre + 1] @ k[:, P:].transpose(-1, -2)) / q.shape[-1] ** 0.5  # (nH, 1, N)
        return scores.reshape(pe.heads, gh, gw).permute(1, 0, 2).reshape(gh, pe.heads * gw)  # heads side by side
    if pe.site == "logits":
        bias = pe.attention_bias(state, 0)[:, centre, P:]  # (nH, N)
        return bias.reshape(pe.heads, gh, gw).permute(1, 0, 2).reshape(gh, pe.heads * gw)
    return None


@torch.no_grad()
def plot_pe(pe: PositionEncoding, resized_grid: tuple[int, int], path: str | Path, title: str) -> bool:
    """Draw the PE at its reference grid and at ``resized_grid`` in both modes; False when there is nothing to draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []
    for grid, mode in ((pe.grid, pe.resize), (resized_grid, "interpolate"), (resized_grid, "extrapolate")):
        try:
            with pe.resize_mode(mode):
                image = _patterns(pe, grid)
        except ResizeError:
            image = "n/a in this mode"
        if image is None:
            return False
        panels.append((f"grid {grid[0]}x{grid[1]}" + ("" if grid == pe.grid else f", {mode}"), image))
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.5))
    for ax, (label, image) in zip(axes, panels):
        ax.set_title(label, fontsize=9)
        ax.axis("off")
        if isinstance(image, str):
            ax.text(0.5, 0.5, image, ha="center", va="center")
        else:
            shown = ax.imshow(image.cpu().numpy(), cmap="viridis")
            fig.colorbar(shown, ax=ax, fraction=0.046)
    what = {"tokens": "cosine similarity of position embeddings", "qk": "centre-query scores per head (block 1)",
            "logits": "centre-query attention bias per head (block 1)"}[pe.site]
    fig.suptitle(f"{title}: {what}", fontsize=10)
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=110)
    return True
