"""A/B behind ab_chunked_bias.txt: learned attention biases on the CPU through the batch-chunked attention (new)
against the path before it (old: the plain formula under autograd up to 128 tokens, SDPA's math fallback beyond).

Run from the repository root, one thread:

    PYTHONPATH=. python results/bench/2026-11-30/ab_chunked_bias.py layer 64 relbias 9
    PYTHONPATH=. python results/bench/2026-11-30/ab_chunked_bias.py model 64 relbias,cpb 9

``layer`` and ``model`` as in ab_layout.py (recipe dims, batch 128); ``none`` is timed in the same rounds, and every
time is also given as the overhead over it. Training steps only (inference never takes either path).
"""
import sys

import torch

import vitpe.models.attention as attention
from ab_layout import setup, time_variants, with_setting
from vitpe.engine.cpu_malloc import keep_freed_memory
from vitpe.models.biased_attention import biased_attention, plain_biased_attention, takes_fast_path


def old_takes_fast_path(q: torch.Tensor, bias: torch.Tensor) -> bool:
    return takes_fast_path(q, bias) and q.shape[-2] <= 128


VARIANTS = {"old": (old_takes_fast_path, plain_biased_attention), "new": (takes_fast_path, biased_attention)}


def with_variant(variant: str, step):
    test, attend = VARIANTS[variant]
    return with_setting(attention, "takes_fast_path", test, with_setting(attention, "biased_attention", attend, step))


def main() -> None:
    scope, px, pes, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), int(sys.argv[4])
    keep_freed_memory()  # as vitpe.bench, train.py and eval.py do (the first run in the .txt had it off)
    cfg, device, inputs, labels, models = setup(scope, px, ["none", *pes], rounds, pool="mean")
    times = time_variants("train", models, VARIANTS, with_variant, inputs, labels, cfg, device, plain=("none",))
    ref = times["none"]
    print(f"{scope} {px}px train none {ref * 1000:.1f} ms")
    for pe in pes:
        old, new = times[f"{pe}/old"], times[f"{pe}/new"]
        print(f"{scope} {px}px train {pe}: old {old * 1000:.1f} ms ({old / ref - 1:+.1%} over none), new "
              f"{new * 1000:.1f} ms ({new / ref - 1:+.1%}), new/old {new / old:.3f}")
    with_variant("new", lambda: None)()  # leave the module as imported


if __name__ == "__main__":
    main()
