"""Kernels a step launches, per PE and variant (kernel_count.txt): what sets the pace where a step is launch-bound, as
the benchmark's small ViTs are on a GPU. From the repository root:

    python results/bench/2026-12-02/host/kernel_count.py

The default dims (dim 192, depth 6, 3 heads, class token), 32 px, batch 2, on the CPU under bf16 autocast (the
benchmark's GPU dtype, so the PEs take their GPU paths: no chunked attention, the rotation through a bf16 ``qkv``).
Inference runs under ``torch.no_grad``, where the
operations reach the counter decomposed as in training (under ``inference_mode`` they reach it whole, before
autocast); the PEs take the same paths as under ``inference_mode``. Every aten operation that reaches a kernel counts (views, allocations and dtype queries do not); a Triton kernel
counts one launch, run here by Triton's interpreter. Not counted: SDPA's own kernels, which differ between a CPU and
a GPU (the same in every variant of a PE). Variants:
  rotation: complex -- the complex product (vitpe/pe/rotary.py); triton -- vitpe/pe/rotary_triton.py's kernels
  cpb: layer by layer -- one MLP after another; batched -- ContinuousPositionBias.tables
"""
import collections
import importlib.util
import os
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from vitpe.models import ViT
from vitpe.pe import rotary
from vitpe.pe.cpb import ContinuousPositionBias

NOT_KERNELS = {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "lift_fresh", "detach",
               "result_type", "promote_types", "_unsafe_view", "_local_scalar_dense", "is_same_size", "sym_size",
               "sym_stride", "_has_compatible_shallow_copy_type"}


COUNTING: list = []  # the counter of the step being counted


class CountKernels(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops = collections.Counter()
        self.paused = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if not self.paused and not func.is_view and name not in NOT_KERNELS and not name.startswith("_conj") and name != "_neg_view":
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))


def interpreted_kernels():
    os.environ["TRITON_INTERPRET"] = "1"
    path = Path(rotary.__file__).with_name("rotary_triton.py")
    spec = importlib.util.spec_from_file_location("rotary_triton_interpreted", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    del os.environ["TRITON_INTERPRET"]
    launch = module._launch

    def counted(*args, **kwargs):
        if not COUNTING:
            return launch(*args, **kwargs)
        counter = COUNTING[-1]
        counter.ops["triton rotation"] += 1
        counter.paused = True  # the interpreter's own copies of the arguments are no kernels
        try:
            return launch(*args, **kwargs)
        finally:
            counter.paused = False

    module._launch = counted
    return module


def count(pe: str, train: bool) -> collections.Counter:
    torch.manual_seed(0)
    model = ViT(pe=pe, img_size=32, patch_size=4, dim=192, depth=6, heads=3, num_classes=10)
    images, labels = torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))

    def step():
        if train:
            with torch.autocast("cpu", torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(images).float(), labels)
            loss.backward()
        else:
            with torch.no_grad(), torch.autocast("cpu", torch.bfloat16):
                model.eval()(images)
            model.train()

    step()
    with CountKernels() as counter:
        COUNTING.append(counter)
        step()
        COUNTING.pop()
    return counter.ops


def main() -> None:
    kernels = interpreted_kernels()
    original_fused, original_tables = rotary._fused_kernels, ContinuousPositionBias.tables
    variants = {
        "none": ("none", lambda: None),
        "rope_axial complex": ("rope_axial", lambda: None),
        "rope_axial triton": ("rope_axial", lambda: setattr(rotary, "_fused_kernels", lambda qkv: kernels)),
        "rope_mixed complex": ("rope_mixed", lambda: None),
        "rope_mixed triton": ("rope_mixed", lambda: setattr(rotary, "_fused_kernels", lambda qkv: kernels)),
        "cpb layer by layer": ("cpb", lambda: setattr(ContinuousPositionBias, "tables", lambda self, coords:
                                                      torch.stack([mlp(coords) for mlp in self.mlps]))),
        "cpb batched": ("cpb", lambda: None),
        "relbias": ("relbias", lambda: None),
        "alibi": ("alibi", lambda: None),
    }
    for train in (True, False):
        base = None
        print(f"\n{'training step' if train else 'inference'} (bf16 autocast, default dims, 32 px)")
        for label, (pe, setup) in variants.items():
            rotary._fused_kernels, ContinuousPositionBias.tables = original_fused, original_tables
            setup()
            ops = count(pe, train)
            base = base if base is not None else ops
            extra = ops.copy()
            extra.subtract(base)
            listed = ", ".join(f"{k} {v:+d}" for k, v in sorted(extra.items(), key=lambda kv: -abs(kv[1])) if v)
            print(f"{label:20s} {sum(ops.values()):5d} kernels ({sum(ops.values()) - sum(base.values()):+5d}): {listed}")
    rotary._fused_kernels, ContinuousPositionBias.tables = original_fused, original_tables


if __name__ == "__main__":
    main()
