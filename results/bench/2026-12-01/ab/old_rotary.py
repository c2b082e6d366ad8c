"""The rotary rotation itself, as autograd functions with hand-written backwards.

Rotate-half layout: pair ``j`` is channels ``(j, j + Dh/2)``. With ``x = (x1, x2)`` and angles ``a`` (..., T, Dh/2):

    out1 = x1 cos a - x2 sin a          out2 = x2 cos a + x1 sin a

The backward of a rotation is the rotation by ``-a``:

    dx1 = g1 cos a + g2 sin a           dx2 = g2 cos a - g1 sin a

and, when the angles are learned (RoPE-Mixed), ``d a = g2 out1 - g1 out2``, summed over the dimensions the angles
were broadcast along (batch; heads when shared). ``cos`` and ``sin`` must therefore be the cosines and sines of one set
of angles: their gradients are returned as ``-sin d a`` and ``cos d a``, the components along the unit circle.

Two entry points:

* :func:`rotate_half_pairs` rotates one tensor (q or k).
* :func:`rotate_qk_of_qkv` takes the attention's stacked projections ``qkv`` (3, B, nH, T, Dh) and returns rotated
  ``q``, ``k`` and the untouched ``v`` in one call. This is the fast path the ViT uses: q and k are rotated into one
  buffer, and in the backward the rotated gradients of q and k and the gradient of v are written straight into the
  one gradient of ``qkv`` -- with two separate rotations autograd first rotates each gradient, then copies all three
  into a stack. The angle gradients of q and k go through one reduction over the batch.

Written with ``out=`` half-tensor kernels a rotation makes two passes over its input per direction, where the composed
form (``x * cos + roll(x) * signed_sin``) makes three forward and five backward, one of them a concatenation. The
angle gradient takes one pass over half the channels and one reduction, where separate ``d cos = g1 x1 + g2 x2`` and
``d sin = g2 x1 - g1 x2`` would take three times that. The maths runs in float32 (or wider) and returns ``x``'s dtype.

Under ``torch.compile`` the composed form is used instead: the compiler fuses it into one kernel each way, while the
hand-written kernels' ``out=`` writes into half-tensors would break the graph (Dynamo cannot trace them).
"""

from __future__ import annotations

import torch


#: Bytes of output rotated per slice (see :func:`_rotate`): about what one core's L2 cache holds.
SLICE_BYTES = 1 << 20


def _slicing(x: torch.Tensor, cos: torch.Tensor, out: torch.Tensor) -> tuple[int, int]:
    """(dimension, step) to cut a rotation into slices of about :data:`SLICE_BYTES` of ``out``: the largest leading
    dimension the angles are broadcast along (so every slice uses all of ``cos``); step 0 where slicing does not pay.

    Only on the CPU: a GPU streams the whole tensor in one launch per kernel, and there every slice costs four more
    launches (on an H200 the slicing made RoPE's training step 4.2-4.3x that of no PE at 64 px, batch 128).
    """
    lead = out.dim() - cos.dim()  # out's dimensions in front of cos's
    if (out.device.type != "cpu" or x.shape != out.shape or lead < 1
            or out.numel() * out.element_size() <= 2 * SLICE_BYTES):
        return 0, 0
    dim = max(range(lead), key=lambda d: out.shape[d])
    per_index = out.numel() // out.shape[dim] * out.element_size()
    step = max(1, SLICE_BYTES // per_index)
    return (dim, step) if step < out.shape[dim] else (0, 0)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, out: torch.Tensor, sign: float) -> torch.Tensor:
    """Write the rotation by ``sign * a`` of ``x`` (..., Dh) into ``out`` (..., Dh).

    Each half-tensor kernel passes over the whole tensor; on a large batch the four of them would each stream it
    through memory. Cut into cache-sized slices along a batch-like dimension, the three later passes find their slice
    in cache (25-35% less time per rotation on CPU, one thread, for the ViT's q and k at 32 and 64 px).
    """
    dim, step = _slicing(x, cos, out)
    if step:
        for start in range(0, out.shape[dim], step):
            length = min(step, out.shape[dim] - start)
            _rotate_slice(x.narrow(dim, start, length), cos, sin, out.narrow(dim, start, length), sign)
        return out
    return _rotate_slice(x, cos, sin, out, sign)


def _rotate_slice(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, out: torch.Tensor, sign: float
                  ) -> torch.Tensor:
    half = cos.shape[-1]
    x1, x2 = x[..., :half], x[..., half:]
    o1, o2 = out[..., :half], out[..., half:]
    torch.mul(x1, cos, out=o1)
    o1.addcmul_(x2, sin, value=-sign)
    torch.mul(x2, cos, out=o2)
    o2.addcmul_(x1, sin, value=sign)
    return out


def _angle_grads(grads: tuple[torch.Tensor, ...], outputs: tuple[torch.Tensor, ...], cos: torch.Tensor,
                 sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``d cos``, ``d sin`` (shape of ``cos``) of rotations whose ``outputs`` got ``grads``, all (..., T, Dh).

    The gradient of the angle itself is ``d a = g2 out1 - g1 out2`` (the rotated output turns with ``a``), summed over
    the broadcast dimensions: one product per pair into one buffer, reduced once. It is returned as its components
    ``d cos = -sin d a`` and ``d sin = cos d a``, which autograd maps back to ``d a = -sin d cos + cos d sin`` exactly
    -- the gradients of ``cos`` and ``sin`` along the unit circle, which is all an angle can change.
    """
    half = cos.shape[-1]
    buf = torch.empty((len(grads), *grads[0].shape[:-1], half), dtype=cos.dtype, device=cos.device)
    for slot, g, y in zip(buf, grads, outputs):
        torch.mul(g[..., half:], y[..., :half], out=slot)  # g2 out1
        slot.addcmul_(g[..., :half], y[..., half:], value=-1.0)  # - g1 out2
    grad_angle = buf.sum_to_size(cos.shape)  # (..., T, Dh/2)
    return -sin * grad_angle, cos * grad_angle


def _working_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)


class _Rotary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        xf = x.to(_working_dtype(x.dtype))
        shape = torch.broadcast_shapes(xf.shape, (*cos.shape[:-1], 2 * cos.shape[-1]))
        out = _rotate(xf, cos, sin, torch.empty(shape, dtype=xf.dtype, device=x.device), 1.0)
        ctx.needs_angles = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
        ctx.x_dtype = x.dtype
        ctx.save_for_backward(cos, sin, out if ctx.needs_angles else None)
        return out.to(x.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        cos, sin, out = ctx.saved_tensors
        g = grad.to(cos.dtype)
        grad_x = grad_cos = grad_sin = None
        if ctx.needs_input_grad[0]:
            grad_x = _rotate(g, cos, sin, torch.empty_like(g), -1.0).to(ctx.x_dtype)
        if ctx.needs_angles:
            grad_cos, grad_sin = _angle_grads((g,), (out,), cos, sin)
        return grad_x, grad_cos, grad_sin


class _RotaryQK(torch.autograd.Function):
    """``qkv`` (3, ..., T, Dh) -> (rotated q, rotated k, v); v is returned as the view it is."""

    @staticmethod
    def forward(ctx, qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        dtype = _working_dtype(qkv.dtype)
        qk = qkv[:2].to(dtype)  # (2, ..., T, Dh)
        out = _rotate(qk, cos, sin, torch.empty(qk.shape, dtype=dtype, device=qkv.device), 1.0)
        ctx.needs_angles = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
        ctx.save_for_backward(cos, sin, out if ctx.needs_angles else None)
        q, k = out.to(qkv.dtype).unbind(0)
        return q, k, qkv[2]

    @staticmethod
    def backward(ctx, grad_q: torch.Tensor, grad_k: torch.Tensor, grad_v: torch.Tensor):
        cos, sin, out = ctx.saved_tensors
        grad_qkv = torch.empty((3, *grad_q.shape), dtype=grad_q.dtype, device=grad_q.device)  # (3, ..., T, Dh)
        grads = tuple(g.to(cos.dtype) for g in (grad_q, grad_k))
        for slot, g in zip(grad_qkv, grads):
            if g.dtype == slot.dtype:
                _rotate(g, cos, sin, slot, -1.0)
            else:
                slot.copy_(_rotate(g, cos, sin, torch.empty_like(g), -1.0))
        grad_qkv[2].copy_(grad_v)
        grad_cos = grad_sin = None
        if ctx.needs_angles:
            grad_cos, grad_sin = _angle_grads(grads, tuple(out.unbind(0)), cos, sin)
        return grad_qkv, grad_cos, grad_sin


def _check_pairs(x: torch.Tensor, cos: torch.Tensor) -> None:
    if x.shape[-1] != 2 * cos.shape[-1]:
        raise ValueError(f"rotary: head dim {x.shape[-1]} does not match {cos.shape[-1]} angle pairs")


def _composed(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.to(_working_dtype(x.dtype)).chunk(2, dim=-1)  # (..., T, Dh/2) each
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)  # (..., T, Dh)


def rotate_half_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` (..., T, Dh) by angles with cosines/sines ``cos``, ``sin`` (..., T, Dh/2), broadcastable to
    ``x``'s leading dimensions; float32 ``cos``/``sin``. Returns ``x``'s shape and dtype."""
    _check_pairs(x, cos)
    if torch.compiler.is_compiling():
        return _composed(x, cos, sin)
    return _Rotary.apply(x, cos, sin)


def rotate_qk_of_qkv(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Split stacked projections ``qkv`` (3, ..., T, Dh) into ``(q, k, v)`` with q and k rotated as by
    :func:`rotate_half_pairs` (``cos``/``sin`` (..., T, Dh/2) broadcast over ``qkv[i]``'s leading dimensions)."""
    _check_pairs(qkv, cos)
    if qkv.shape[0] != 3:
        raise ValueError(f"rotary: expected stacked (q, k, v) of shape (3, ..., T, Dh), got {tuple(qkv.shape)}")
    if torch.compiler.is_compiling():
        q, k = _composed(qkv[:2], cos, sin).unbind(0)  # (2, ..., T, Dh) -> 2 x (..., T, Dh)
        return q, k, qkv[2]
    return _RotaryQK.apply(qkv, cos, sin)
