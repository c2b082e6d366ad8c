"""Named A/Bs of vitpe's implementation choices, each old against new in one process (:mod:`benchmarks.ab`). From the
repository root, one pinned thread on a CPU:

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/changes.py cpb_tables --dims default --px 32 --batch 1 --rounds 15
    python benchmarks/changes.py rotary_triton --dims recipe --px 32 --kind infer --device cuda     # on a GPU

Prints each variant's step time and its overhead over ``none``, then new/old per PE, with 90% intervals.

Changes (old -> new):
  cpb_tables     cpb's per-layer MLPs one after another -> batched over the layers (``ContinuousPositionBias.tables``)
  bias_state     a learned bias's state as one (depth, ...) tensor indexed per layer -> split once into a bias per
                 layer, cast once under autocast (``BiasEncoding.prepare``)
  rotary_triton  RoPE's eager rotation as the complex product -> the Triton kernels of vitpe/pe/rotary_triton.py
                 (CUDA only; on a CPU both are the same code)
  flex_bias      a logits-site bias as SDPA's float mask -> FlexAttention's ``score_mod`` on the compiled
                 ``flex_attention``: would a flash-style kernel take away the biases' GPU overhead? Not in vitpe; on
                 a CPU only ``--kind infer`` runs (FlexAttention has no CPU backward in torch 2.14)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere: benchmarks.ab importable

from benchmarks.ab import DIMS, KINDS, Change, compare  # noqa: E402
from vitpe.models import attention  # noqa: E402
from vitpe.pe import rotary  # noqa: E402
from vitpe.pe.base import PositionEncoding  # noqa: E402
from vitpe.pe.cpb import ContinuousPositionBias  # noqa: E402
from vitpe.pe.sites import BiasEncoding  # noqa: E402


def layer_by_layer_tables(self: ContinuousPositionBias, coords: torch.Tensor) -> torch.Tensor:
    """cpb's tables before they were batched: each layer's MLP on its own."""
    return torch.stack([mlp(coords) for mlp in self.mlps])  # (depth, T, nH)


class FlexForBias:
    """``torch.nn.functional`` as vitpe's attention sees it, except that SDPA with a float mask runs as FlexAttention:
    the mask's (nH, T, T) bias added to each score by ``score_mod``, in a flash-style kernel."""

    def __init__(self) -> None:
        from torch.nn.attention.flex_attention import flex_attention

        self.flex = torch.compile(flex_attention)

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.nn.functional, name)

    def scaled_dot_product_attention(self, q, k, v, attn_mask=None, dropout_p=0.0):
        if attn_mask is None or dropout_p:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p)
        bias = attn_mask if attn_mask.dim() == 3 else attn_mask[0]  # (nH, T, T); a 4D mask is a batch-expanded view

        def add_bias(score, b, h, q_index, k_index):
            return score + bias[h, q_index, k_index].to(score.dtype)

        return self.flex(q, k, v, score_mod=add_bias)


def change(name: str) -> tuple[Change, list[str]]:
    """The change called ``name`` and the PEs it concerns."""
    if name == "cpb_tables":
        return Change(ContinuousPositionBias, "tables", {"old": layer_by_layer_tables,
                                                         "new": ContinuousPositionBias.tables}), ["cpb"]
    if name == "bias_state":
        return Change(BiasEncoding, "prepare", {"old": PositionEncoding.prepare,
                                                "new": BiasEncoding.prepare}), ["relbias", "cpb"]
    if name == "rotary_triton":
        return Change(rotary, "_fused_kernels", {"old": lambda qkv: None,
                                                 "new": rotary._fused_kernels}), ["rope_axial", "rope_mixed"]
    if name == "flex_bias":
        return Change(attention, "F", {"old": torch.nn.functional, "new": FlexForBias()}), ["relbias", "cpb", "alibi"]
    raise ValueError(f"unknown change {name!r}; choose one of {', '.join(CHANGES)}")


CHANGES = ("cpb_tables", "bias_state", "rotary_triton", "flex_bias")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("change", choices=CHANGES)
    parser.add_argument("--dims", choices=sorted(DIMS), default="recipe")
    parser.add_argument("--px", type=int, default=32)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--kind", choices=KINDS, default="train")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--pes", help="comma-separated PEs (default: those the change concerns)")
    args = parser.parse_args(argv)
    if args.change == "flex_bias" and args.kind == "train" and args.device == "cpu":
        print("error: flex_bias: FlexAttention has no backward on a CPU (torch 2.14); time --kind infer here, train "
              "on a GPU", file=sys.stderr)
        return 2
    chosen, pes = change(args.change)
    pes = args.pes.split(",") if args.pes else pes
    result = compare(chosen, pes, args.px, args.rounds, args.kind, args.dims, batch=args.batch, device=args.device)
    print("\n".join(result.lines(f"{args.kind} {args.px}px")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
