"""Count the aten operations of one training step (forward and backward) of the recipe-dims ViT, per PE, and print
each PE's operations beyond the first PE's (how op_count.txt was made; on a GPU each operation is a kernel launch).

Run from the repository root:

    PYTHONPATH=. python results/bench/2026-11-30/op_count.py none,rope_axial,rope_mixed

torch.profiler on the CPU, float32, 16 px, batch 8, dim 128, depth 6, 4 heads, mean pooling. Views, allocations and
dtype queries are left out of the "work" count; nested operations (a clone's copy) count too.
"""
import collections
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from vitpe.models.vit import ViT

NOT_WORK = {"aten::view", "aten::select", "aten::slice", "aten::unbind", "aten::as_strided", "aten::narrow",
            "aten::permute", "aten::transpose", "aten::t", "aten::expand", "aten::reshape", "aten::unsqueeze",
            "aten::squeeze", "aten::detach", "aten::alias", "aten::empty", "aten::empty_strided", "aten::lift_fresh",
            "aten::_unsafe_view", "aten::flip", "aten::chunk", "aten::split", "aten::resolve_conj", "aten::resolve_neg",
            "aten::_reshape_alias", "aten::result_type", "aten::empty_like", "aten::contiguous", "aten::to",
            "aten::_to_copy", "aten::promote_types"}


def work_ops(pe: str) -> collections.Counter:
    torch.manual_seed(0)
    model = ViT(pe=pe, img_size=16, patch_size=4, dim=128, depth=6, heads=4, mlp_ratio=2, pool="mean", fc_norm=True)
    images, labels = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))

    def step() -> None:
        torch.nn.functional.cross_entropy(model(images), labels).backward()

    step()  # warm-up
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    return collections.Counter(e.name for e in prof.events() if e.name.startswith("aten::") and e.name not in NOT_WORK)


def main() -> None:
    pes = sys.argv[1].split(",")
    base = work_ops(pes[0])
    print(f"{pes[0]}: {sum(base.values())} operations per training step")
    for pe in pes[1:]:
        ops = work_ops(pe)
        extra = {k: ops[k] - base[k] for k in set(ops) | set(base) if ops[k] != base[k]}
        listed = ", ".join(f"{k[6:]} {v:+d}" for k, v in sorted(extra.items(), key=lambda kv: -kv[1]))
        print(f"{pe}: {sum(ops.values())} ({sum(ops.values()) - sum(base.values()):+d}): {listed}")


if __name__ == "__main__":
    main()
