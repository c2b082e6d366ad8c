"""Behind BENCHMARKS.md's compiled RoPE change (2026-12-01, evening): one layer's compiled rotation of q and k plus
SDPA, with the rotation written head-major (the compiled form before the change: inductor lays its output out in the
logical (2, B, nH, T, Dh) order) against token-major (computed in the projections' order, as now), and no rotation.
Recipe dims (batch 128, 4 heads, head dim 32), per-head angles as RoPE-Mixed's; inference, then forward + backward.

    OMP_NUM_THREADS=1 taskset -c 1 python results/bench/2026-12-01/ab/compiled_qk_layout.py 64    # T = 64 tokens: 32 px
"""
import time, statistics, torch, torch.nn.functional as F, sys
from vitpe.pe import rotary
torch.manual_seed(0)
B, T, H, D = 128, int(sys.argv[1]), 4, 32
lin = torch.randn(B, T, 3 * H * D)
cos = torch.randn(H, T, D // 2); sin = torch.randn(H, T, D // 2)
def f(lin, cos, sin):
    qkv = lin.reshape(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
    q, k = rotary._composed(qkv[:2], cos, sin).unbind(0)
    return F.scaled_dot_product_attention(q, k, qkv[2])
def g(lin, cos, sin):
    qkv = lin.reshape(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
    q, k = rotary._composed(qkv[:2].transpose(-3, -2), cos.transpose(-3, -2), sin.transpose(-3, -2)).transpose(-3, -2).unbind(0)
    return F.scaled_dot_product_attention(q, k, qkv[2])
def n(lin, cos, sin):
    q, k, v = lin.reshape(B, T, 3, H, D).permute(2, 0, 3, 1, 4).unbind(0)
    return F.scaled_dot_product_attention(q, k, v)
fns = {name: torch.compile(h) for name, h in dict(head_major=f, token_major=g, none=n).items()}
with torch.inference_mode():
    for h in fns.values(): h(lin, cos, sin); h(lin, cos, sin)
    print("same", torch.allclose(fns["head_major"](lin, cos, sin), fns["token_major"](lin, cos, sin), atol=1e-5))
    res = {n_: [] for n_ in fns}
    for r in range(21):
        for n_, h in fns.items():
            t = time.perf_counter(); h(lin, cos, sin); res[n_].append(time.perf_counter() - t)
for n_, x in res.items(): print(n_, f"{statistics.median(x)*1e3:.2f} ms")
lin.requires_grad_(); cos.requires_grad_(); sin.requires_grad_()
go = torch.randn(B, H, T, D)
fns = {name: torch.compile(h) for name, h in dict(head_major=f, token_major=g, none=n).items()}
def step(h):
    lin.grad = cos.grad = sin.grad = None
    h(lin, cos, sin).backward(go)
for h in fns.values(): step(h); step(h)
res = {n_: [] for n_ in fns}
for r in range(15):
    for n_, h in fns.items():
        t = time.perf_counter(); step(h); res[n_].append(time.perf_counter() - t)
for n_, x in res.items(): print("train", n_, f"{statistics.median(x)*1e3:.2f} ms")
