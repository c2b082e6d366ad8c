"""Where compiled RoPE training spends its time on the CPU: per inductor kernel (``cpp.enable_kernel_profile``), one
thread, the CPU recipe's model (dim 128, depth 6, 4 heads, MLP 2, mean pooling), batch 128, 32 px, three steps.
Run: OMP_NUM_THREADS=1 taskset -c 1 python profile_compiled_rope.py rope_mixed > profile_compiled_rope_mixed.txt"""

import sys
import time

import torch
import torch._inductor.config as inductor_config
from torch.profiler import ProfilerActivity, profile

from vitpe import ViT

inductor_config.cpp.enable_kernel_profile = True
torch.set_num_threads(1)
pe = sys.argv[1]
torch.manual_seed(0)
model = ViT(img_size=32, patch_size=4, num_classes=10, dim=128, depth=6, heads=4, mlp_ratio=2, pool="mean",
            fc_norm=True, pe=pe)
compiled = torch.compile(model)
optimizer = torch.optim.AdamW(model.parameters())
images, labels = torch.randn(128, 3, 32, 32), torch.randint(0, 10, (128,))


def step() -> None:
    optimizer.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(compiled(images), labels).backward()
    optimizer.step()


for _ in range(3):
    step()
start = time.perf_counter()
for _ in range(3):
    step()
print(f"{pe}: {(time.perf_counter() - start) / 3 * 1e3:.0f} ms per training step")
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(3):
        step()
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40, max_name_column_width=90))
