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
"""
import importlib.util
import sys
from pathlib import Path

import torch

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


def variants(change):
    """(owner, attribute, {variant: value}): what each variant sets before its step."""
    if change == "cpb_tables":
        return ContinuousPositionBias, "tables", {"old": layer_by_layer_tables, "new": ContinuousPositionBias.tables}
    if change == "bias_state":
        return BiasEncoding, "prepare", {"old": PositionEncoding.prepare, "new": BiasEncoding.prepare}
    if change == "rotary_triton":
        return rotary, "_fused_kernels", {"old": lambda qkv: None, "new": rotary._fused_kernels}
    raise SystemExit(f"unknown change {change!r} (cpb_tables, rotary_triton, bias_state)")


PES = {"cpb_tables": ["cpb"], "rotary_triton": ["rope_axial", "rope_mixed"], "bias_state": ["relbias", "cpb"]}


def main():
    change, dims, px, batch, rounds, kind = sys.argv[1:7]
    device = sys.argv[7] if len(sys.argv) > 7 else "cpu"
    owner, attribute, values = variants(change)
    ab_bias.compare_old_new(owner, attribute, values, int(px), PES[change], int(rounds), kind, dims=DIMS[dims],
                            batch=int(batch), device=device)


if __name__ == "__main__":
    main()
