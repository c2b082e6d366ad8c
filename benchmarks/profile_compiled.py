"""Where a compiled training step spends its time on the CPU, per inductor kernel (``cpp.enable_kernel_profile``): the
CPU recipe's model (dim 128, depth 6, 4 heads, MLP 2, mean pooling), one thread, three profiled steps. From the
repository root:

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/profile_compiled.py rope_mixed [--px 32 --batch 128]
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import torch._inductor.config as inductor_config
from torch.profiler import ProfilerActivity, profile

from vitpe import ViT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pe")
    parser.add_argument("--px", type=int, default=32)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--rows", type=int, default=40, help="rows of the profile table")
    args = parser.parse_args(argv)
    inductor_config.cpp.enable_kernel_profile = True
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = ViT(img_size=args.px, patch_size=4, num_classes=10, dim=128, depth=6, heads=4, mlp_ratio=2, pool="mean",
                fc_norm=True, pe=args.pe)
    compiled = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters())
    images, labels = torch.randn(args.batch, 3, args.px, args.px), torch.randint(0, 10, (args.batch,))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(compiled(images), labels).backward()
        optimizer.step()

    for _ in range(3):  # compile and warm up
        step()
    start = time.perf_counter()
    for _ in range(3):
        step()
    print(f"{args.pe}: {(time.perf_counter() - start) / 3 * 1e3:.0f} ms per training step")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows, max_name_column_width=90))
    return 0


if __name__ == "__main__":
    sys.exit(main())
