"""A/B behind ab_contiguous_tokens.txt: the tokens made row-major after the patch embedding (new) against the
patch embedding's transposed NHWC view going into the blocks as it is (old), for mean-pooled models (no class token
to concatenate, the CPU recipe's head), with timm's average-pooling VisionTransformer in the same rounds.

Run from the repository root:

    PYTHONPATH=. python results/bench/2026-11-30/ab_contiguous_tokens.py 32 none,learnable,rope_mixed 9 2

Arguments: image size, PEs, rounds, threads[, infer or train: only that kind of step]. The ViT has the recipe's dims
(dim 128, depth 6, 4 heads, MLP ratio 2, patch 4, mean pooling with the LayerNorm after the pool), batch 128.
Training steps and inference are :mod:`vitpe.bench`'s, timed by its ``interleaved``.
"""
import sys

import torch

from ab_layout import print_old_new, time_variants, with_setting  # the sibling A/B script (its folder is on sys.path)
from vitpe.bench import BenchConfig, timm_vit
from vitpe.engine.cpu_malloc import keep_freed_memory
from vitpe.models.vit import ViT


def transposed_tokens(self: ViT, x: torch.Tensor) -> torch.Tensor:
    """``forward_features`` before the change, for models without prefix tokens."""
    return self.encode(self.patch_embed(x).flatten(1, 2), self.patch_grid((x.shape[-2], x.shape[-1])))


VARIANTS = {"old": transposed_tokens, "new": ViT.forward_features}


def switch(variant: str, step):
    return with_setting(ViT, "forward_features", VARIANTS[variant], step)


def main() -> None:
    px, pes, rounds, threads = int(sys.argv[1]), sys.argv[2].split(","), int(sys.argv[3]), int(sys.argv[4])
    keep_freed_memory()  # as vitpe.bench, train.py and eval.py do
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cfg, device = BenchConfig(dim=128, heads=4, mlp_ratio=2.0, repeats=rounds, pool="mean"), torch.device("cpu")
    inputs, labels = (torch.randn(cfg.batch, 3, px, px),), torch.randint(0, 10, (cfg.batch,))
    models = {pe: ViT(img_size=px, patch_size=4, dim=cfg.dim, depth=6, heads=cfg.heads, mlp_ratio=cfg.mlp_ratio, pe=pe,
                      pool="mean", fc_norm=True) for pe in pes}
    with torch.no_grad():
        for pe, model in models.items():
            outs = {}
            for variant, forward_features in VARIANTS.items():
                ViT.forward_features = forward_features
                outs[variant] = model(inputs[0][:8])
            print(f"{pe}: largest difference of the logits, new - old: {(outs['new'] - outs['old']).abs().max():.1e}")
    print(f"{px} px, recipe dims, mean pooling, {rounds} rounds, {threads} threads")
    models["timm"] = timm_vit(cfg, px)
    for kind in sys.argv[5:] or ("infer", "train"):
        times = time_variants(kind, models, VARIANTS, switch, inputs, labels, cfg, device, plain=("timm",))
        print_old_new(kind, times, pes, "timm", lambda t, timm: f"{timm / t:.3f}x timm")
    ViT.forward_features = VARIANTS["new"]


if __name__ == "__main__":
    main()
