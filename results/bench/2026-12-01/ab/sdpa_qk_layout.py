"""SDPA's CPU kernel, inference, with q, k, v as strided token-major views of the projections (what the eager rotation
leaves), with q and k contiguous head-major (what the compiled rotation wrote before the change), and all three
head-major. Recipe dims (batch 128, 4 heads, head dim 32).

    OMP_NUM_THREADS=1 taskset -c 1 python results/bench/2026-12-01/ab/sdpa_qk_layout.py 64     # 32 px; 256 for 64 px
"""
import time, statistics, torch, torch.nn.functional as F, sys
torch.manual_seed(0)
B, T, H, D = 128, int(sys.argv[1]), 4, 32
qkv = torch.randn(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
q, k, v = qkv.unbind(0)
qc, kc = q.contiguous(), k.contiguous()
fns = dict(token_major=lambda: F.scaled_dot_product_attention(q, k, v),
           qk_head_major=lambda: F.scaled_dot_product_attention(qc, kc, v),
           all_head_major=lambda: F.scaled_dot_product_attention(qc, kc, v.contiguous()))
with torch.inference_mode():
    for h in fns.values(): h()
    res = {n: [] for n in fns}
    for r in range(15):
        for n, h in fns.items():
            t = time.perf_counter(); h(); res[n].append(time.perf_counter() - t)
for n, x in res.items(): print(n, f"{statistics.median(x)*1e3:.2f} ms")
