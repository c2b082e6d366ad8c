"""Tried, not adopted (2026-12-02): at compiled inference, the eager in-place complex rotation as a mutating custom
operator (inplace) against this tree's compiled rotation (channel) and none; one layer, recipe dims, 32 px, median of
31. Run before the projections'-rows form: channel was then the padded channel form (+1.86 / +2.62 ms, against
+1.92 / +2.45 ms in place).

    OMP_NUM_THREADS=1 taskset -c 0 python results/bench/2026-12-02/ab/inplace_rotation_op.py
"""
import time, torch
import torch.nn.functional as F
from vitpe.pe import rotary
torch.set_num_threads(1)
B,T,nH,Dh=128,64,4,32

@torch.library.custom_op("scratch::rotate_qk_", mutates_args=("qkv",))
def rotate_qk_(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
    qk = rotary._complex(qkv[:2])
    torch.mul(qk, rotary._phase(cos, sin, qkv.dtype), out=qk)

def inplace(x, w, cos, sin):
    qkv = (x @ w).reshape(B, T, 3, nH, Dh).permute(2, 0, 3, 1, 4)
    rotate_qk_(qkv, cos, sin)
    q, k, v = qkv.unbind(0)
    return F.scaled_dot_product_attention(q, k, v)
def channel(x, w, cos, sin):
    qkv = (x @ w).reshape(B, T, 3, nH, Dh).permute(2, 0, 3, 1, 4)
    q, k, v = rotary.rotate_qk_of_qkv(qkv, cos, sin)
    return F.scaled_dot_product_attention(q, k, v)
def none(x, w, cos, sin):
    return F.scaled_dot_product_attention(*(x @ w).reshape(B, T, 3, nH, Dh).permute(2, 0, 3, 1, 4).unbind(0))
x = torch.randn(B, T, 128); w = torch.randn(128, 384) * 0.05
for per_head in (False, True):
    ph = torch.randn(nH, T, Dh // 2) if per_head else torch.randn(T, Dh // 2)
    if per_head: ph = ph.transpose(0, 1).contiguous().transpose(0, 1)
    cos, sin = ph.cos(), ph.sin()
    fs = {n: torch.compile(f) for n, f in dict(inplace=inplace, channel=channel, none=none).items()}
    with torch.no_grad():
        torch.testing.assert_close(fs["inplace"](x, w, cos, sin), fs["channel"](x, w, cos, sin), atol=1e-4, rtol=1e-4)
        ts = {n: [] for n in fs}
        for r in range(31):
            for n, f in fs.items():
                t = time.perf_counter(); f(x, w, cos, sin); ts[n].append(time.perf_counter() - t)
    med = {n: sorted(v)[15] * 1000 for n, v in ts.items()}
    print("per_head" if per_head else "shared", {n: f"{v:.2f} ms (+{v - med['none']:.2f})" for n, v in med.items()})
