"""A/Bs behind the files here (2026-12-02): changes that cut the operations a step launches, each timed old against
new in one process with ``none`` in the same rounds (results/bench/2026-12-01/ab/ab_bias.py's compare_old_new: the
benchmark's shuffled interleaved rounds, one thread, paired ratios with 90% bootstrap intervals). A batch of one is
where the interpreter and the launches set the pace on a CPU, as they do for these small models on a GPU. From the
repository root:

    OMP_NUM_THREADS=1 taskset -c 1 python results/bench/2026-12-02/host/ab_host.py cpb_tables default 32 1 15 train
    python results/bench/2026-12-02/host/ab_host.py rotary_triton default 32 128 9 train cuda   # on a GPU

Arguments: change, dims (default: dim 192, 3 heads, MLP 4, class token; recipe: dim 128, 4 heads, MLP 2, mean pool),
image size, batch, rounds, train or infer, and the device (default cpu).

cpb_tables: cpb's per-layer MLPs run one after another (old) or as batched products over the layers (new,
``ContinuousPositionBias.tables``).
rotary_triton (CUDA only; on a CPU old and new are the same code): RoPE's eager rotation as the complex product (old)
or as the Triton kernels of vitpe/pe/rotary_triton.py (new).
bias_state: a learned bias's per-forward state as one (depth, ...) tensor indexed per layer (old) or split once into
a bias per layer, cast once under autocast (new, ``BiasEncoding.prepare``).
angle_grad (third session; compiled, every model under torch.compile; tried, not adopted): the learned angles'
gradient in compiled training as autograd derives it from the pair form (old, ``rotary._composed``) or summed per
channel over the batch, then per pair (new, :class:`PairwiseLearnedAngles` below, its cos/sin realised by a stack).
flex_bias (third session; for a GPU, where a float mask takes SDPA off its flash kernel): a logits-site bias as
SDPA's float mask (old) or as FlexAttention's ``score_mod`` on the compiled ``flex_attention`` (new). Not in vitpe:
this asks whether it would pay. On a CPU only ``infer`` runs (FlexAttention has no CPU backward in torch 2.14).
"""
import importlib.util
import sys
from pathlib import Path

import torch

from vitpe.models import attention
from vitpe.pe import rotary
from vitpe.pe.base import PositionEncoding
from vitpe.pe.cpb import ContinuousPositionBias
from vitpe.pe.sites import BiasEncoding

spec = importlib.util.spec_from_file_location("ab_bias", Path(__file__).parents[2] / "2026-12-01/ab/ab_bias.py")
ab_bias = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ab_bias)

DIMS = {"default": dict(dim=192, heads=3, mlp_ratio=4), "recipe": ab_bias.RECIPE_DIMS}


def layer_by_layer_tables(self, coords):
    return torch.stack([mlp(coords) for mlp in self.mlps])  # (depth, T, nH)


class FlexForBias:
    """``torch.nn.functional`` as vitpe's attention sees it, except that SDPA with a float mask runs as FlexAttention:
    the mask's (nH, T, T) bias added to each score by ``score_mod``, in a flash-style kernel."""

    def __init__(self):
        from torch.nn.attention.flex_attention import flex_attention

        self.flex = torch.compile(flex_attention)
        self.calls = 0

    def __getattr__(self, name):
        return getattr(torch.nn.functional, name)

    def scaled_dot_product_attention(self, q, k, v, attn_mask=None, dropout_p=0.0):
        if attn_mask is None or dropout_p:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p)
        self.calls += 1
        bias = attn_mask if attn_mask.dim() == 3 else attn_mask[0]  # (nH, T, T); a 4D mask is a batch-expanded view

        def add_bias(score, b, h, q_index, k_index):
            return score + bias[h, q_index, k_index].to(score.dtype)

        return self.flex(q, k, v, score_mod=add_bias)


class PairwiseLearnedAngles(torch.autograd.Function):
    """The pair form with a backward for learned angles: ``d cos_j = sum g[2j] x[2j] + g[2j+1] x[2j+1]`` and
    ``d sin_j = sum g[2j+1] x[2j] - g[2j] x[2j+1]``, each product formed per channel in memory order and summed over
    the broadcast dimensions before the pairs are combined (the sine term from channel d's and d + 1's views)."""

    @staticmethod
    def forward(ctx, x, cos, sin):
        ctx.save_for_backward(x, cos, sin)
        return rotary._pairwise(x, cos, sin)

    @staticmethod
    def backward(ctx, grad):
        x, cos, sin = ctx.saved_tensors
        lead = cos.shape[:-1]
        same = (grad * x).sum_to_size(*lead, x.shape[-1]).unflatten(-1, (-1, 2)).sum(-1)
        across = (grad[..., 1:] * x[..., :-1] - grad[..., :-1] * x[..., 1:]).sum_to_size(*lead, x.shape[-1] - 1)
        return rotary._pairwise(grad, cos, -sin), same, across[..., 0::2]


def composed_with_channel_sums(x, cos, sin):
    """``rotary._composed`` with :class:`PairwiseLearnedAngles` where the angles get a gradient; their cos/sin are
    realised once by a stack (without it inductor computed sin again for every sample, one float at a time)."""
    if torch.is_grad_enabled() and (cos.requires_grad or sin.requires_grad):
        cos, sin = torch.stack((cos, sin)).unbind(0)
        return PairwiseLearnedAngles.apply(x, cos, sin)
    return ORIGINAL_COMPOSED(x, cos, sin)


ORIGINAL_COMPOSED = rotary._composed


def variants(change):
    """(owner, attribute, {variant: value}): what each variant sets before its step."""
    if change == "cpb_tables":
        return ContinuousPositionBias, "tables", {"old": layer_by_layer_tables, "new": ContinuousPositionBias.tables}
    if change == "bias_state":
        return BiasEncoding, "prepare", {"old": PositionEncoding.prepare, "new": BiasEncoding.prepare}
    if change == "rotary_triton":
        return rotary, "_fused_kernels", {"old": lambda qkv: None, "new": rotary._fused_kernels}
    if change == "angle_grad":
        return rotary, "_composed", {"old": ORIGINAL_COMPOSED, "new": composed_with_channel_sums}
    if change == "flex_bias":
        return attention, "F", {"old": torch.nn.functional, "new": FlexForBias()}
    raise SystemExit(f"unknown change {change!r} (cpb_tables, rotary_triton, bias_state, angle_grad, flex_bias)")


PES = {"cpb_tables": ["cpb"], "rotary_triton": ["rope_axial", "rope_mixed"], "bias_state": ["relbias", "cpb"],
       "flex_bias": ["relbias", "cpb", "alibi"], "angle_grad": ["rope_mixed"]}
COMPILED = {"angle_grad"}


def main():
    change, dims, px, batch, rounds, kind = sys.argv[1:7]
    device = sys.argv[7] if len(sys.argv) > 7 else "cpu"
    if change == "flex_bias" and kind == "train" and device == "cpu":
        raise SystemExit("flex_bias: FlexAttention has no backward on a CPU (torch 2.14); time infer here, train on a GPU")
    owner, attribute, values = variants(change)
    ab_bias.compare_old_new(owner, attribute, values, int(px), PES[change], int(rounds), kind, dims=DIMS[dims],
                            compiled=change in COMPILED, batch=int(batch), device=device)


if __name__ == "__main__":
    main()
