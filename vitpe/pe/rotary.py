"""The rotary rotation itself, as one autograd function with a hand-written backward.

Rotate-half layout: pair ``j`` is channels ``(j, j + Dh/2)``. With ``x = (x1, x2)`` and angles ``a`` (..., T, Dh/2):

    out1 = x1 cos a - x2 sin a          out2 = x2 cos a + x1 sin a

The backward of a rotation is the rotation by ``-a``:

    dx1 = g1 cos a + g2 sin a           dx2 = g2 cos a - g1 sin a

and, when the angles are learned (RoPE-Mixed), ``d cos = g1 x1 + g2 x2`` and ``d sin = g2 x1 - g1 x2``, summed over
the dimensions ``cos``/``sin`` were broadcast along. Written with ``out=`` half-tensor kernels this makes two passes
over q or k per direction, where the composed form (``x * cos + roll(x) * signed_sin``) makes three forward and five
backward, one of them a concatenation (``roll``). The maths runs in float32 (or wider) and returns ``x``'s dtype.

Under ``torch.compile`` the composed form is used instead: the compiler fuses it into one kernel each way, while the
hand-written kernels' ``out=`` writes into half-tensors would break the graph (Dynamo cannot trace them).
"""

from __future__ import annotations

import torch


def _rotate(x1: torch.Tensor, x2: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, out: torch.Tensor,
            sign: float) -> torch.Tensor:
    """Write the rotation by ``sign * a`` of ``(x1, x2)`` into ``out`` (..., Dh)."""
    half = x1.shape[-1]
    o1, o2 = out[..., :half], out[..., half:]
    torch.mul(x1, cos, out=o1)
    o1.addcmul_(x2, sin, value=-sign)
    torch.mul(x2, cos, out=o2)
    o2.addcmul_(x1, sin, value=sign)
    return out


def _out_shape(x: torch.Tensor, cos: torch.Tensor) -> torch.Size:
    return torch.broadcast_shapes(x.shape, (*cos.shape[:-1], 2 * cos.shape[-1]))


class _Rotary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        dtype = torch.promote_types(x.dtype, torch.float32)
        xf = x.to(dtype)
        half = x.shape[-1] // 2
        out = torch.empty(_out_shape(xf, cos), dtype=dtype, device=x.device)
        _rotate(xf[..., :half], xf[..., half:], cos, sin, out, 1.0)
        ctx.needs_angles = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
        ctx.x_dtype = x.dtype
        ctx.save_for_backward(cos, sin, xf if ctx.needs_angles else None)
        return out.to(x.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        cos, sin, xf = ctx.saved_tensors
        g = grad.to(cos.dtype)
        half = g.shape[-1] // 2
        g1, g2 = g[..., :half], g[..., half:]
        grad_x = grad_cos = grad_sin = None
        if ctx.needs_input_grad[0]:
            grad_x = _rotate(g1, g2, cos, sin, torch.empty_like(g), -1.0).to(ctx.x_dtype)
        if ctx.needs_angles:
            x1, x2 = xf[..., :half], xf[..., half:]
            grad_cos = torch.addcmul(g1 * x1, g2, x2).sum_to_size(cos.shape)
            grad_sin = torch.addcmul(g2 * x1, g1, x2, value=-1.0).sum_to_size(sin.shape)
        return grad_x, grad_cos, grad_sin


def rotate_half_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` (..., T, Dh) by angles with cosines/sines ``cos``, ``sin`` (..., T, Dh/2), broadcastable to
    ``x``'s leading dimensions; float32 ``cos``/``sin``. Returns ``x``'s shape and dtype."""
    if x.shape[-1] != 2 * cos.shape[-1]:
        raise ValueError(f"rotary: head dim {x.shape[-1]} does not match {cos.shape[-1]} angle pairs")
    if torch.compiler.is_compiling():
        x1, x2 = x.to(torch.promote_types(x.dtype, torch.float32)).chunk(2, dim=-1)  # (..., T, Dh/2) each
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)  # (..., T, Dh)
    return _Rotary.apply(x, cos, sin)
