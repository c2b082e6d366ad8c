"""The rotary rotation itself, as autograd functions with hand-written backwards.

Interleaved layout: pair ``j`` is channels ``(2j, 2j + 1)``, read as one complex number ``z_j = x[2j] + i x[2j + 1]``
(the layout of the RoPE-ViT paper's code and of timm's EVA). Rotating pair ``j`` by angle ``a_j`` is one complex
product, ``z_j e^{i a_j}``; its backward is the product by ``e^{-i a}``, and, when the angles are learned
(RoPE-Mixed), the gradient of the phase ``e^{i a}`` is ``sum g conj(z)`` over the dimensions it was broadcast along
(batch; q and k; heads when shared) -- PyTorch's convention for a complex tensor's gradient, whose real and
imaginary parts are the gradients of ``cos a`` and ``sin a``.

Why complex, and why interleaved: in the rotate-half layout (pair ``j`` = channels ``j, j + Dh/2``) a rotation is
four half-tensor kernels whose innermost loop runs over ``Dh/2`` channels before jumping over the other half. Read as
complex numbers the pairs sit side by side, the product is one kernel, and its innermost loop runs over every head of
a token at once (the projections' memory order, (B, T, 3, nH, Dh)). On one CPU thread, q and k at the CPU recipe's
dims (batch 128, 4 heads, head dim 32): 3.2 ms against 8.9 ms per layer at 32 px, 15 ms against 30 ms at 64 px.

Two entry points:

* :func:`rotate_pairs` rotates one tensor (q or k).
* :func:`rotate_qk_of_qkv` takes the attention's stacked projections ``qkv`` (3, B, nH, T, Dh) and returns rotated
  ``q``, ``k`` and the untouched ``v`` in one call. This is the fast path the ViT uses: q and k are rotated in one
  product, and in the backward the rotated gradients of q and k and the gradient of v are written straight into one
  gradient of ``qkv`` laid out like ``qkv`` itself -- where autograd would first rotate each gradient, then stack all
  three, then copy the stack into the projections' order.

The maths runs in float32 (or wider) and returns ``x``'s dtype. Under ``torch.compile`` the same rotation is written
with real tensors (:func:`_composed`), which the compiler fuses into one vectorised kernel each way; complex tensors
and ``out=`` writes would break its graph. There :func:`rotate_qk_of_qkv` computes it in the projections' memory
order, so that the compiled kernel writes q and k token-major, as the eager path leaves them, and at inference reads
each channel's neighbours straight from the projections' rows (:func:`_rotate_in_projection_rows`).

Eager on CUDA, where Triton is installed, :func:`rotate_qk_of_qkv` runs :mod:`vitpe.pe.rotary_triton` instead: the
same rotation as one kernel each way, for a GPU step that the host's kernel launches set the pace of.
"""

from __future__ import annotations

import functools
from types import ModuleType

import torch
import torch.nn.functional as F


def _working_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)


def _pairs_adjacent(x: torch.Tensor) -> bool:
    """Whether ``x`` (..., Dh) can be viewed as complex numbers: channels contiguous, every pair on an even offset."""
    return x.stride(-1) == 1 and x.storage_offset() % 2 == 0 and all(s % 2 == 0 for s in x.stride()[:-1])


def _complex(x: torch.Tensor) -> torch.Tensor:
    """``x`` (..., Dh) real as (..., Dh/2) complex, a view where :func:`_pairs_adjacent` allows (copied otherwise)."""
    return torch.view_as_complex((x if _pairs_adjacent(x) else x.contiguous()).unflatten(-1, (-1, 2)))


def _real(z: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(z).flatten(-2)  # (..., Dh/2) complex -> (..., Dh/2, 2) -> (..., Dh)


def _phase(cos: torch.Tensor, sin: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.complex(cos.to(dtype), sin.to(dtype))  # (..., T, Dh/2): e^{i a}


def _phase_grads(grads: tuple[torch.Tensor, ...], inputs: tuple[torch.Tensor, ...], cos: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """``d cos``, ``d sin`` (shape of ``cos``) of rotations of complex ``inputs`` whose outputs got complex ``grads``:
    ``sum g conj(z)`` over the broadcast dimensions, split into its real and imaginary parts.

    The products go into one contiguous buffer, summed as real numbers over its leading dimensions: summed in the
    inputs' memory order, or as complex numbers, the reduction took 5x as long as the products.
    """
    buf = torch.empty((len(grads), *grads[0].shape), dtype=grads[0].dtype, device=cos.device)  # (n, ..., T, Dh/2)
    for slot, g, z in zip(buf, grads, inputs):
        torch.mul(z.conj(), g, out=slot)
    grad_phase = torch.view_as_real(buf).sum_to_size(*cos.shape, 2)  # (..., T, Dh/2, 2): (d cos, d sin)
    return grad_phase[..., 0].to(cos.dtype), grad_phase[..., 1].to(cos.dtype)


class _Rotary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        dtype = _working_dtype(x.dtype)
        z, phase = _complex(x.to(dtype)), _phase(cos, sin, dtype)  # (..., T, Dh/2) each
        ctx.needs_angles = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
        ctx.x_dtype = x.dtype
        ctx.save_for_backward(cos, phase, z if ctx.needs_angles else None)
        return _real(z * phase).to(x.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        cos, phase, z = ctx.saved_tensors
        g = _complex(grad.to(phase.real.dtype))
        grad_x = grad_cos = grad_sin = None
        if ctx.needs_input_grad[0]:
            grad_x = _real(g * phase.conj_physical()).to(ctx.x_dtype)
        if ctx.needs_angles:
            grad_cos, grad_sin = _phase_grads((g,), (z,), cos)
        return grad_x, grad_cos, grad_sin


class _RotaryQK(torch.autograd.Function):
    """``qkv`` (3, ..., T, Dh) -> (rotated q, rotated k, v); v is returned as the view it is."""

    @staticmethod
    def forward(ctx, qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        dtype = _working_dtype(qkv.dtype)
        qk, phase = _complex(qkv[:2].to(dtype)), _phase(cos, sin, dtype)  # (2, ..., T, Dh/2), (..., T, Dh/2)
        ctx.needs_angles = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
        ctx.save_for_backward(qkv, cos, phase, qk if ctx.needs_angles else None)
        q, k = _real(qk * phase).to(qkv.dtype).unbind(0)  # product laid out like qkv: (B, T, 2, nH, Dh) in memory
        return q, k, qkv[2]

    @staticmethod
    def backward(ctx, grad_q: torch.Tensor, grad_k: torch.Tensor, grad_v: torch.Tensor):
        qkv, cos, phase, qk = ctx.saved_tensors
        grad_qkv = torch.empty_like(qkv)  # qkv's strides: the projections' gradient needs no copy into their order
        unrotate = phase.conj_physical()
        grads = []
        for slot, grad in zip(grad_qkv, (grad_q, grad_k)):
            g = _complex(grad.to(phase.real.dtype))  # (..., T, Dh/2), in the working dtype
            grads.append(g)
            if slot.dtype == phase.real.dtype and _pairs_adjacent(slot):  # straight into the slot, viewed as complex
                torch.mul(g, unrotate, out=_complex(slot))
            else:  # a bfloat16 slot has no complex view: rotate in the working dtype, then convert
                slot.copy_(_real(g * unrotate))
        grad_qkv[2].copy_(grad_v)
        grad_cos = grad_sin = None
        if ctx.needs_angles:
            grad_cos, grad_sin = _phase_grads(tuple(grads), tuple(qk.unbind(0)), cos)
        return grad_qkv, grad_cos, grad_sin


def _check_pairs(x: torch.Tensor, cos: torch.Tensor) -> None:
    if x.shape[-1] != 2 * cos.shape[-1]:
        raise ValueError(f"rotary: head dim {x.shape[-1]} does not match {cos.shape[-1]} angle pairs")


def _records_grad(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> bool:
    """Whether autograd records a rotation of ``x`` by ``cos``, ``sin``."""
    return torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad or sin.requires_grad)


def _channel_multipliers(cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Cosines, sines (..., Dh/2) -> the multipliers (..., Dh) of channel ``d``, of ``d + 1`` and of ``d - 1`` in a
    rotation of interleaved pairs: ``(c0, c0, c1, c1, ..)``, ``(-s0, 0, -s1, 0, ..)`` and ``(0, s0, 0, s1, ..)``."""
    zero = torch.zeros_like(sin)
    pairs = (torch.stack((cos, cos), -1), torch.stack((-sin, zero), -1), torch.stack((zero, sin), -1))
    return torch.stack(pairs).flatten(-2).unbind(0)  # (3, ..., Dh/2, 2) -> 3 x (..., Dh)


def _pairwise(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)  # (..., T, Dh/2) each
    return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)  # (..., T, Dh)


def _weighted_neighbours(x: torch.Tensor, following: torch.Tensor, preceding: torch.Tensor,
                         multipliers: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """``x[d] m0[d] + x[d + 1] m+[d] + x[d - 1] m-[d]``: the channel form of the rotation, given each channel's
    neighbours ``following`` (x[d + 1]) and ``preceding`` (x[d - 1]) and :func:`_channel_multipliers`."""
    same, after, before = multipliers
    return x * same + following * after + preceding * before


def _channelwise(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    following = F.pad(x[..., 1:], (0, 1))  # x[d + 1], zero past the last channel
    preceding = F.pad(x[..., :-1], (1, 0))  # x[d - 1], zero before the first
    return _weighted_neighbours(x, following, preceding, _channel_multipliers(cos, sin))  # (..., T, Dh)


def _composed(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The rotation as the compiler sees it: pair by pair where autograd records it, else channel by channel,
    ``x[d] m0[d] + x[d + 1] m+[d] + x[d - 1] m-[d]``.

    Written pair by pair (``stack((x1 c - x2 s, x2 c + x1 s), -1)``), inductor's CPU code writes each half of the
    pairs with a stride of 2, one channel at a time (no SIMD), and computes each layer's learned cos/sin again for
    every sample. Written per channel, the loads and stores are contiguous and vectorised, and the multipliers, built
    by ``torch.stack``, are computed once per call (a stack is a realised buffer in inductor's CPU code). Compiled
    inference at the CPU recipe's dims, in the ViT: RoPE-Mixed's overhead over no PE +10.9% -> +4.7% at 32 px, +12.3%
    -> +5.4% at 64 px (the projections' rows now take :func:`_rotate_in_projection_rows`, unpadded). The backward of
    the channel form, through its padded shifts, was slower: training steps new/old 1.005 (RoPE-Mixed) and 1.013
    (RoPE-Axial), so training keeps the pair form (BENCHMARKS.md, "Tried and not adopted").
    """
    work = x.to(_working_dtype(x.dtype))
    return (_pairwise if _records_grad(x, cos, sin) else _channelwise)(work, cos, sin).to(x.dtype)


def _heads_inside(angles: torch.Tensor) -> torch.Tensor:
    """Cosines or sines (..., nH, T, Dh/2), or (T, Dh/2) shared by the heads, as (..., T, nH or 1, Dh/2)."""
    return angles.transpose(-3, -2) if angles.dim() >= 3 else angles.unsqueeze(-2)


def _rotate_in_projection_rows(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The channel form (:func:`_weighted_neighbours`) for projections ``qkv`` (3, B, nH, T, Dh) whose memory is one row
    (3, nH, Dh) per token, (B, T, 3, nH, Dh): rotated q and k (2, B, nH, T, Dh), token-major.

    The neighbours ``x[d + 1]`` and ``x[d - 1]`` are read from the rows without padding: where they fall in another
    head, another projection or the previous token, their multiplier is 0 (a non-finite neighbour would give NaN
    there, where padding gives 0; projections that hold one make the attention non-finite anyway). Only the first
    channel of the whole buffer has nothing before it, so the first sample takes the padded form, into the same
    output. Padded, every load was masked, and inductor's CPU code loads masked vectors one float at a time: compiled
    inference of one layer at the CPU recipe's 32 px, the rotation added 2.5 ms padded, 0.8 ms from the rows."""
    _, batch, heads, tokens, head_dim = qkv.shape
    width, span = 3 * heads * head_dim, 2 * heads * head_dim  # a token's row; its q and k
    flat = qkv.permute(1, 3, 0, 2, 4).reshape(-1)  # (B * T * 3 * nH * Dh,): a view of the projections' memory
    rows = flat.view(batch, tokens, width)
    multipliers = _channel_multipliers(_heads_inside(cos), _heads_inside(sin))  # 3 x (T, nH or 1, Dh)
    multipliers = tuple(m.unsqueeze(-3) for m in multipliers)  # (T, 1, nH or 1, Dh): broadcast over q and k
    work = _working_dtype(qkv.dtype)

    def rotate(x: torch.Tensor, following: torch.Tensor, preceding: torch.Tensor) -> torch.Tensor:
        shape = (x.shape[0], tokens, 2, heads, head_dim)  # (b, T, 2 * nH * Dh) -> (b, T, 2, nH, Dh)
        operands = (t.reshape(shape).to(work) for t in (x, following, preceding))
        return _weighted_neighbours(*operands, multipliers).to(qkv.dtype)

    following = rows[..., 1:span + 1]  # x[d + 1]: the last channel of k reads v's first
    sample = tokens * width
    first_before = F.pad(flat[:sample - 1], (1, 0)).view(1, tokens, width)[..., :span]  # x[d - 1] of sample 0
    rest_before = flat[sample - 1:batch * sample - 1].view(batch - 1, tokens, width)[..., :span]  # samples 1 ..
    rotated = torch.cat((rotate(rows[:1, :, :span], following[:1], first_before),
                         rotate(rows[1:, :, :span], following[1:], rest_before)))  # (B, T, 2, nH, Dh)
    return rotated.permute(2, 0, 3, 1, 4)  # (2, B, nH, T, Dh), token-major in memory


@functools.cache
def _triton_kernels() -> ModuleType | None:
    try:
        from vitpe.pe import rotary_triton
    except ImportError:  # no Triton (a CPU-only or a Windows install): the complex product serves CUDA too
        return None
    return rotary_triton


def _fused_kernels(qkv: torch.Tensor) -> ModuleType | None:
    """:mod:`vitpe.pe.rotary_triton` where it serves ``qkv``: a CUDA tensor, Triton installed."""
    return _triton_kernels() if qkv.is_cuda else None


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the interleaved pairs of ``x`` (..., T, Dh) by angles with cosines/sines ``cos``, ``sin``
    (..., T, Dh/2), broadcastable to ``x``'s leading dimensions; float32 ``cos``/``sin``. Returns ``x``'s shape and
    dtype."""
    _check_pairs(x, cos)
    if torch.compiler.is_compiling():
        return _composed(x, cos, sin)
    return _Rotary.apply(x, cos, sin)


def rotate_qk_of_qkv(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, in_place: bool = False
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Split stacked projections ``qkv`` (3, ..., T, Dh) into ``(q, k, v)`` with q and k rotated as by
    :func:`rotate_pairs` (``cos``/``sin`` (..., T, Dh/2) broadcast over ``qkv[i]``'s leading dimensions).

    ``in_place``: where no gradient is asked for, q and k are rotated in ``qkv``'s own memory and returned as views of
    it, for a caller that gives ``qkv`` up (at inference one buffer fewer: 1.5 ms against 2.7 ms per layer at the CPU
    recipe's 32 px, one thread)."""
    _check_pairs(qkv, cos)
    if qkv.shape[0] != 3:
        raise ValueError(f"rotary: expected stacked (q, k, v) of shape (3, ..., T, Dh), got {tuple(qkv.shape)}")
    if torch.compiler.is_compiling():
        qk = qkv[:2]  # (2, ..., nH, T, Dh)
        rows = qkv.dim() == 5 and qkv.permute(1, 3, 0, 2, 4).is_contiguous()  # the projections' (B, T, 3, nH, Dh)
        if rows and not _records_grad(qkv, cos, sin):
            q, k = _rotate_in_projection_rows(qkv, cos, sin).unbind(0)
            return q, k, qkv[2]
        if qk.dim() >= 5 and qk.stride(-2) > qk.stride(-3):  # tokens outside heads in memory: the projections' order
            # computed in that order, the compiled kernel writes q and k token-major too, as the eager path leaves
            # them; written head-major, SDPA's CPU kernel took 1.3 ms longer per layer (recipe dims, 32 px)
            rotated = _composed(qk.transpose(-3, -2), _heads_inside(cos), _heads_inside(sin)).transpose(-3, -2)
        else:
            rotated = _composed(qk, cos, sin)
        q, k = rotated.unbind(0)  # (2, ..., T, Dh) -> 2 x (..., T, Dh)
        return q, k, qkv[2]
    kernels = _fused_kernels(qkv)
    if kernels is not None and kernels.fusable(qkv, cos, sin):  # CUDA: one kernel each way
        if in_place and not _records_grad(qkv, cos, sin):
            return kernels.rotate_qk_in_place(qkv, cos, sin)
        return kernels.FusedRotaryQK.apply(qkv, cos, sin)
    in_own_memory = in_place and qkv.dtype == _working_dtype(qkv.dtype) and _pairs_adjacent(qkv)
    if in_own_memory and not _records_grad(qkv, cos, sin):
        qk = _complex(qkv[:2])  # (2, ..., T, Dh/2): a view of qkv
        q, k = _real(torch.mul(qk, _phase(cos, sin, qkv.dtype), out=qk)).unbind(0)
        return q, k, qkv[2]
    return _RotaryQK.apply(qkv, cos, sin)
