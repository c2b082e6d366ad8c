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
from torch.utils._python_dispatch import _disable_current_modes

from vitpe.bench_kernels import KernelCounter
from vitpe.models import ViT
from vitpe.pe import rotary
from vitpe.pe.cpb import ContinuousPositionBias


def interpreted_kernels():
    """vitpe/pe/rotary_triton.py loaded anew under Triton's interpreter, its launches kept out of the counter."""
    os.environ["TRITON_INTERPRET"] = "1"
    path = Path(rotary.__file__).with_name("rotary_triton.py")
    spec = importlib.util.spec_from_file_location("rotary_triton_interpreted", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    del os.environ["TRITON_INTERPRET"]
    launch = module._launch

    def uncounted(*args, **kwargs):
        with _disable_current_modes():  # the interpreter's own copies of the arguments are no kernels
            return launch(*args, **kwargs)

    module._launch = uncounted
    return module


KERNELS = interpreted_kernels()


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
    launched = KERNELS.launches
    with KernelCounter() as counter:
        step()
    if KERNELS.launches > launched:
        counter.ops["triton rotation"] = KERNELS.launches - launched
    return counter.ops


def main() -> None:
    original_fused, original_tables = rotary._fused_kernels, ContinuousPositionBias.tables
    variants = {
        "none": ("none", lambda: None),
        "rope_axial complex": ("rope_axial", lambda: None),
        "rope_axial triton": ("rope_axial", lambda: setattr(rotary, "_fused_kernels", lambda qkv: KERNELS)),
        "rope_mixed complex": ("rope_mixed", lambda: None),
        "rope_mixed triton": ("rope_mixed", lambda: setattr(rotary, "_fused_kernels", lambda qkv: KERNELS)),
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
