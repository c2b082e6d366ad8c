"""The rotation of q and k in stacked projections as one Triton kernel each way: the eager path on CUDA.

On a GPU the ViTs of this toolkit are launch-bound: a training step of the benchmark's models takes 10-16 ms on an
H200 (2026-11-30), most of it the host launching small kernels one after another. The complex-product rotation of
:mod:`vitpe.pe.rotary` is, per layer, four kernels forward (to float32, the phase, the product, back to the input's
dtype) and about eight backward (each gradient to float32, its product with the conjugate phase, the copy into the
projections' gradient, the conjugate itself, v's gradient), four more for learned angles; measured on the H200, RoPE
added 21-47% to a training step. Here the forward is one kernel that reads q and k from the projections and writes
both rotated, and the backward one kernel that writes the gradients of q, k and v straight into one gradient laid out
like ``qkv`` -- plus, for learned angles, one reduction over the batch of the per-sample angle gradients the same
kernel writes (summed by ``torch.sum``, so the result does not depend on the order programs finish in).

Timed on the H200 (2026-12-04, recipe dims, 32 px, training) against the complex product in the same rounds: no
faster (new/old 0.96 for RoPE-Axial, 1.02 for RoPE-Mixed, both 90% intervals holding 1), although RoPE-Axial's
kernels per training step over no PE fell from +66 to +6: RoPE's GPU overhead lies elsewhere (BENCHMARKS.md).

Layout and maths are those of :mod:`vitpe.pe.rotary`: interleaved pairs ``(x[2j], x[2j + 1])`` rotated by the angle
with cosine ``c`` and sine ``s``: ``(x0 c - x1 s, x1 c + x0 s)``, in float32, stored in the input's dtype. The
gradient of the input is the rotation by the opposite angle; of the angle, per pair, ``d c = g0 x0 + g1 x1`` and
``d s = g1 x0 - g0 x1`` summed over the batch, q and k (and the heads where one angle serves all of them).

One program per token of one sample rotates every pair of every head of its q and k. Importing this module needs
Triton; :func:`vitpe.pe.rotary.rotate_qk_of_qkv` takes it for CUDA tensors that :func:`fusable` accepts where
Triton is installed, outside ``torch.compile`` (which fuses the rotation itself).
Set ``TRITON_INTERPRET=1`` before importing it to run the same kernels on CPU tensors (the tests do).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rotate_rows(src_q, src_k, src_v, dst_q, dst_k, dst_v, cos, sin, inputs_q, inputs_k, angle_grads,
                 tokens, heads, half, width,
                 s_b, s_h, s_t, s_d, o_b, o_h, o_t, o_d, c_h, c_t, c_j, x_b, x_h, x_t, x_d,
                 INVERSE: tl.constexpr, COPY_V: tl.constexpr, ANGLES: tl.constexpr,
                 PAIRS: tl.constexpr, CHANNELS: tl.constexpr):
    """Rotate token ``(b, t)``'s q and k (``src_*``, strides ``s_*`` for batch, head, token, channel) into ``dst_*``
    (strides ``o_*``); ``INVERSE`` rotates by the opposite angle (the backward), ``COPY_V`` copies ``src_v`` to
    ``dst_v``, ``ANGLES`` writes this sample's angle gradients against the unrotated ``inputs_*`` (strides ``x_*``)
    to ``angle_grads`` (2, B, T, nH * Dh/2)."""
    row = tl.program_id(0).to(tl.int64)  # b * T + t
    b = row // tokens
    t = row % tokens
    pair = tl.arange(0, PAIRS)  # h * Dh/2 + j over every head
    live = pair < heads * half
    h = pair // half
    j = pair % half
    c = tl.load(cos + h * c_h + t * c_t + j * c_j, mask=live, other=0.0).to(tl.float32)
    s = tl.load(sin + h * c_h + t * c_t + j * c_j, mask=live, other=0.0).to(tl.float32)
    if INVERSE:
        s = -s
    src_at = b * s_b + t * s_t + h * s_h + 2 * j * s_d  # channel 2j of head h
    dst_at = b * o_b + t * o_t + h * o_h + 2 * j * o_d
    grad_c = tl.full((PAIRS,), 0.0, tl.float32)  # tl.full, not tl.zeros: a builtin, which the interpreter
    grad_s = tl.full((PAIRS,), 0.0, tl.float32)  # runs even where Triton was imported first
    for which in tl.static_range(2):  # q, then k
        src = src_q if which == 0 else src_k
        dst = dst_q if which == 0 else dst_k
        even = tl.load(src + src_at, mask=live, other=0.0).to(tl.float32)
        odd = tl.load(src + src_at + s_d, mask=live, other=0.0).to(tl.float32)
        if ANGLES:  # the gradients ``even``/``odd`` against the unrotated input x
            inputs = inputs_q if which == 0 else inputs_k
            x_at = b * x_b + t * x_t + h * x_h + 2 * j * x_d
            x0 = tl.load(inputs + x_at, mask=live, other=0.0).to(tl.float32)
            x1 = tl.load(inputs + x_at + x_d, mask=live, other=0.0).to(tl.float32)
            grad_c += even * x0 + odd * x1
            grad_s += odd * x0 - even * x1
        tl.store(dst + dst_at, (even * c - odd * s).to(dst.dtype.element_ty), mask=live)
        tl.store(dst + dst_at + o_d, (odd * c + even * s).to(dst.dtype.element_ty), mask=live)
    if ANGLES:  # (2, B, T, nH * Dh/2): this sample's share, summed over the batch by the caller
        at = row * width + pair
        tl.store(angle_grads + at, grad_c, mask=live)
        tl.store(angle_grads + tl.num_programs(0).to(tl.int64) * width + at, grad_s, mask=live)
    if COPY_V:
        channel = tl.arange(0, CHANNELS)  # h * Dh + d over every head
        live_v = channel < 2 * heads * half
        hv = channel // (2 * half)
        d = channel % (2 * half)
        v = tl.load(src_v + b * s_b + t * s_t + hv * s_h + d * s_d, mask=live_v)
        tl.store(dst_v + b * o_b + t * o_t + hv * o_h + d * o_d, v.to(dst_v.dtype.element_ty), mask=live_v)


#: The dtypes the kernels compute in float32: wider inputs (float64, as gradcheck uses) keep the complex product.
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def fusable(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> bool:
    """Whether the kernels take these inputs: non-empty ``qkv`` (3, B, nH, T, Dh) of one of :data:`DTYPES`, and
    ``cos``, ``sin`` of one of them too and one memory layout, (T, Dh/2) shared by the heads or (nH or 1, T, Dh/2)."""
    if qkv.dim() != 5 or cos.dim() not in (2, 3) or qkv.numel() == 0 or cos.stride() != sin.stride():
        return False
    if qkv.dtype not in DTYPES or cos.dtype not in DTYPES or sin.dtype not in DTYPES:
        return False
    return _shared_by_heads(cos) or cos.shape[0] == qkv.shape[2]


def _shared_by_heads(angles: torch.Tensor) -> bool:
    """Whether ``angles`` ((nH or 1,) T, Dh/2) hold one angle for every head."""
    return angles.dim() == 2 or angles.shape[0] == 1


def _angle_strides(cos: torch.Tensor) -> tuple[int, int, int]:
    """(head, token, pair) strides of ``cos`` and ``sin`` (:func:`fusable`: the same); 0 for the heads where the
    angles are shared."""
    if _shared_by_heads(cos):
        return 0, cos.stride(-2), cos.stride(-1)
    return cos.stride(0), cos.stride(1), cos.stride(2)


#: Kernels launched so far (the benchmark counts a step's kernels: :mod:`vitpe.bench.kernels`).
launches = 0


def _launch(src: tuple[torch.Tensor, ...], dst: tuple[torch.Tensor, ...], cos: torch.Tensor, sin: torch.Tensor, *,
            inverse: bool, inputs: tuple[torch.Tensor, torch.Tensor] | None = None,
            angle_grads: torch.Tensor | None = None) -> None:
    """Rotate ``src`` (q, k[, v]), each (B, nH, T, Dh) with one set of strides, into ``dst`` (the same, its own
    strides); a third tensor in each is copied unrotated."""
    batch, heads, tokens, head_dim = src[0].shape
    half = head_dim // 2
    x = inputs[0] if inputs is not None else src[0]  # (B, nH, T, Dh); read only when the angles take a gradient
    q_src, k_src, *v_src = src
    q_dst, k_dst, *v_dst = dst
    device = q_src.device
    if device.type == "cuda" and device.index != torch.cuda.current_device():  # Triton launches on the current one
        with torch.cuda.device(device):
            return _launch(src, dst, cos, sin, inverse=inverse, inputs=inputs, angle_grads=angle_grads)
    global launches
    launches += 1
    _rotate_rows[(batch * tokens,)](
        q_src, k_src, v_src[0] if v_src else q_src, q_dst, k_dst, v_dst[0] if v_dst else q_dst, cos, sin,
        x, inputs[1] if inputs is not None else x, angle_grads if angle_grads is not None else cos,
        tokens, heads, half, heads * half,
        *src[0].stride(), *dst[0].stride(), *_angle_strides(cos), *x.stride(),
        INVERSE=inverse, COPY_V=bool(v_src), ANGLES=angle_grads is not None,
        PAIRS=triton.next_power_of_2(heads * half), CHANNELS=triton.next_power_of_2(heads * head_dim))


def _shared_strides(tensors: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """The gradients as the kernel reads them: one set of strides for all (copied to contiguous where they differ)."""
    if all(t.stride() == tensors[0].stride() for t in tensors):
        return tensors
    return tuple(t.contiguous() for t in tensors)


class FusedRotaryQK(torch.autograd.Function):
    """``qkv`` (3, B, nH, T, Dh) -> (rotated q, rotated k, v), as :class:`vitpe.pe.rotary._RotaryQK`, in one kernel
    each way."""

    @staticmethod
    def forward(ctx, qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        _, batch, heads, tokens, head_dim = qkv.shape
        rotated = qkv.new_empty((batch, tokens, 2, heads, head_dim)).permute(2, 0, 3, 1, 4)  # (2, B, nH, T, Dh)
        _launch((qkv[0], qkv[1]), (rotated[0], rotated[1]), cos, sin, inverse=False)
        ctx.needs_angles = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
        ctx.save_for_backward(qkv, cos, sin)
        return rotated[0], rotated[1], qkv[2]

    @staticmethod
    def backward(ctx, grad_q: torch.Tensor, grad_k: torch.Tensor, grad_v: torch.Tensor):
        qkv, cos, sin = ctx.saved_tensors
        grad_qkv = torch.empty_like(qkv)  # qkv's strides: the projections' gradient needs no copy into their order
        _, batch, heads, tokens, head_dim = qkv.shape
        angle_grads = None
        if ctx.needs_angles:
            angle_grads = torch.empty((2, batch, tokens, heads * head_dim // 2), dtype=torch.float32,
                                      device=qkv.device)
        _launch(_shared_strides((grad_q, grad_k, grad_v)), tuple(grad_qkv.unbind(0)), cos, sin, inverse=True,
                inputs=(qkv[0], qkv[1]), angle_grads=angle_grads)
        if angle_grads is None:
            return grad_qkv, None, None
        per_token = angle_grads.view(2, batch, tokens, heads, head_dim // 2)  # (2, B, T, nH, Dh/2)
        if _shared_by_heads(cos):  # one angle for every head: summed over the heads too
            summed = per_token.sum((1, 3))  # (2, T, Dh/2)
        else:
            summed = per_token.sum(1).transpose(1, 2)  # (2, nH, T, Dh/2)
        grad_cos, grad_sin = (g.reshape(cos.shape).to(cos.dtype) for g in summed)
        return grad_qkv, grad_cos, grad_sin


def rotate_qk_in_place(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rotate q and k in ``qkv``'s own memory, no gradient (each program reads its pairs before writing them);
    returns views (q, k, v) of ``qkv``."""
    _launch((qkv[0], qkv[1]), (qkv[0], qkv[1]), cos, sin, inverse=False)
    return qkv[0], qkv[1], qkv[2]
