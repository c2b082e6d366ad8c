"""One layer (qkv projection, RoPE of q and k, SDPA) compiled, inference, recipe dims at 32 px, median of 41: the
rotation read from the projections' rows (channel; this tree), the padded channel form (padded), no rotation (none),
and, with shared angles, a cost probe: the same loads as the padded form without masks (wrong values at each head's
first channel). Behind BENCHMARKS.md's 2.53 / 1.10 ms and 0.81 / 1.18 against 2.47 / 2.42 ms (2026-12-02).

    OMP_NUM_THREADS=1 taskset -c 1 python results/bench/2026-12-02/ab/rotation_layer.py            # shared angles
    OMP_NUM_THREADS=1 taskset -c 1 python results/bench/2026-12-02/ab/rotation_layer.py per_head
"""
import time, torch
import torch.nn.functional as F
from vitpe.pe import rotary
torch.set_num_threads(1)
B,T,nH,Dh=128,64,4,32
def channel(x, w, cos, sin):
    qkv = (x @ w).reshape(B, T, 3, nH, Dh).permute(2, 0, 3, 1, 4)
    q, k, v = rotary.rotate_qk_of_qkv(qkv, cos, sin)
    return F.scaled_dot_product_attention(q, k, v)
def probe(x, w, cos, sin):  # same loads and flops, no masks (wrong values at each head's first channel): a cost probe
    row = (x @ w).reshape(B, T, 3 * nH * Dh)
    same, after, before = rotary._channel_multipliers(cos, sin)  # (T, Dh)
    xs = row[..., :2 * nH * Dh].unflatten(-1, (2, nH, Dh))
    left = row[..., 1:2 * nH * Dh + 1].unflatten(-1, (2, nH, Dh))
    right = row[..., 0:2 * nH * Dh].unflatten(-1, (2, nH, Dh))  # stands in for x[d - 1]
    out = xs * same[:, None, None] + left * after[:, None, None] + right * before[:, None, None]  # (B, T, 2, nH, Dh)
    q, k = out.permute(2, 0, 3, 1, 4).unbind(0)
    v = row[..., 2 * nH * Dh:].unflatten(-1, (nH, Dh)).transpose(1, 2)
    return F.scaled_dot_product_attention(q, k, v)
def padded(x, w, cos, sin):
    qkv = (x @ w).reshape(B, T, 3, nH, Dh).permute(2, 0, 3, 1, 4)
    qk = qkv[:2]
    r = rotary._composed(qk.transpose(-3, -2), rotary._heads_inside(cos), rotary._heads_inside(sin)).transpose(-3, -2)
    q, k = r.unbind(0)
    return F.scaled_dot_product_attention(q, k, qkv[2])
def none(x, w, cos, sin):
    return F.scaled_dot_product_attention(*(x @ w).reshape(B, T, 3, nH, Dh).permute(2, 0, 3, 1, 4).unbind(0))
x = torch.randn(B, T, 128); w = torch.randn(128, 384) * 0.05
import sys
ph = torch.randn(nH, T, Dh // 2) if sys.argv[1:] == ['per_head'] else torch.randn(T, Dh // 2); cos, sin = ph.cos(), ph.sin()
forms = dict(channel=channel, padded=padded, none=none) if sys.argv[1:] else dict(channel=channel, padded=padded, probe=probe, none=none)
fs = {n: torch.compile(f) for n, f in forms.items()}
with torch.no_grad():
    torch.testing.assert_close(fs['channel'](x, w, cos, sin), fs['padded'](x, w, cos, sin))
    ts = {n: [] for n in fs}
    for f in fs.values(): f(x, w, cos, sin)
    for r in range(41):
        for n, f in fs.items():
            t = time.perf_counter(); f(x, w, cos, sin); ts[n].append(time.perf_counter() - t)
med = {n: sorted(v)[20] * 1000 for n, v in ts.items()}
print({n: f"{v:.2f} ms (+{v - med['none']:.2f})" for n, v in med.items()})
