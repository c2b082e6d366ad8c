"""The hand-written rotary autograd functions against the composed formula and numerical gradients."""

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from vitpe.models.vit import ViT
from vitpe.pe import rotary
from vitpe.pe.rotary import rotate_half_pairs, rotate_qk_of_qkv


@pytest.fixture(params=["whole", "sliced"])
def slicing(request, monkeypatch):
    """Rotations in one piece, or cut into slices (the path large batches take): two float32 (nH, T, Dh) = (2, 7, 8)
    blocks per slice, so q alone (B = 5) goes in slices of 2, 2, 1 batch entries and q with k in slices of one."""
    if request.param == "sliced":
        monkeypatch.setattr(rotary, "SLICE_BYTES", 2 * 2 * 7 * 8 * 4)
    return request.param


def composed(x, cos, sin):
    """x * (cos, cos) + roll(x, Dh/2) * (-sin, sin): the textbook rotate-half form, autograd's own backward."""
    return torch.addcmul(x * torch.cat((cos, cos), -1), x.roll(x.shape[-1] // 2, dims=-1), torch.cat((-sin, sin), -1))


def test_matches_the_composed_form_and_its_gradients(slicing):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 2, 7, 8, generator=g, requires_grad=True)  # (B, nH, T, Dh)
    angles = torch.randn(2, 7, 4, generator=g, requires_grad=True)  # per head: (nH, T, Dh/2)
    grad = torch.randn(5, 2, 7, 8, generator=g)
    ours = rotate_half_pairs(x, angles.cos(), angles.sin())
    ours.backward(grad)
    ours_grads = x.grad.clone(), angles.grad.clone()
    x.grad = angles.grad = None
    ref = composed(x, angles.cos(), angles.sin())
    ref.backward(grad)
    torch.testing.assert_close(ours, ref)
    torch.testing.assert_close(ours_grads[0], x.grad)
    torch.testing.assert_close(ours_grads[1], angles.grad)


def test_numerical_gradients():
    x = torch.randn(2, 5, 6, dtype=torch.double, requires_grad=True)
    angles = torch.randn(5, 3, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, a: rotate_half_pairs(x, a.cos(), a.sin()), (x, angles))


def test_keeps_the_input_dtype_and_checks_the_head_dim():
    x = torch.randn(2, 4, 8, dtype=torch.bfloat16)
    angles = torch.randn(4, 4)
    out = rotate_half_pairs(x, angles.cos(), angles.sin())
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), composed(x.float(), angles.cos(), angles.sin()), atol=2e-2, rtol=2e-2)
    with pytest.raises(ValueError, match="head dim 8"):
        rotate_half_pairs(x, angles[:, :3].cos(), angles[:, :3].sin())


@pytest.mark.parametrize("angle_shape", [(2, 7, 4), (7, 4)], ids=["per-head", "shared"])
def test_fused_qk_rotation_matches_two_rotations_and_their_gradients(angle_shape, slicing):
    g = torch.Generator().manual_seed(1)
    projections = torch.randn(5, 7, 3, 2, 8, generator=g, requires_grad=True)  # (B, T, 3, nH, Dh) as a Linear gives
    angles = torch.randn(*angle_shape, generator=g, requires_grad=True)
    out_grads = [torch.randn(5, 2, 7, 8, generator=g) for _ in range(3)]  # for q, k, v: (B, nH, T, Dh)

    def run(split):
        projections.grad = angles.grad = None
        qkv = projections.permute(2, 0, 3, 1, 4)  # (3, B, nH, T, Dh), the attention's strided view
        outs = split(qkv, angles.cos(), angles.sin())
        torch.autograd.backward(outs, out_grads)
        return [o.detach() for o in outs] + [projections.grad.clone(), angles.grad.clone()]

    fused = run(rotate_qk_of_qkv)
    reference = run(lambda qkv, cos, sin: (composed(qkv[0], cos, sin), composed(qkv[1], cos, sin), qkv[2]))
    for ours, ref in zip(fused, reference):
        torch.testing.assert_close(ours, ref)


def test_fused_qk_rotation_numerical_gradients_and_errors():
    qkv = torch.randn(3, 2, 5, 6, dtype=torch.double, requires_grad=True)
    angles = torch.randn(5, 3, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, a: rotate_qk_of_qkv(x, a.cos(), a.sin()), (qkv, angles))
    cos, sin = angles.detach().float().cos(), angles.detach().float().sin()
    low = rotate_qk_of_qkv(qkv.detach().to(torch.bfloat16), cos, sin)
    assert [t.dtype for t in low] == [torch.bfloat16] * 3
    with pytest.raises(ValueError, match="stacked"):
        rotate_qk_of_qkv(qkv[:2], angles.cos(), angles.sin())
    with pytest.raises(ValueError, match="head dim 6"):
        rotate_qk_of_qkv(qkv, angles[:, :2].cos(), angles[:, :2].sin())


def test_slices_cover_the_batch_in_cache_sized_steps(monkeypatch):
    monkeypatch.setattr(rotary, "SLICE_BYTES", 2 * 2 * 7 * 8 * 4)
    cos = torch.ones(2, 7, 4)  # (nH, T, Dh/2): broadcast along q/k and batch, so either can be cut
    q = torch.empty(5, 2, 7, 8)  # (B, nH, T, Dh)
    assert rotary._slicing(q, cos, q) == (0, 2)  # two batch entries per slice
    qk = torch.empty(2, 5, 2, 7, 8)  # (2, B, nH, T, Dh)
    assert rotary._slicing(qk, cos, qk) == (1, 1)  # the larger leading dimension: batch
    assert rotary._slicing(q[:2], cos, q[:2]) == (0, 0)  # small enough for one piece
    per_sample = torch.ones(5, 2, 7, 4)  # angles that differ along the batch: nothing left to cut along
    assert rotary._slicing(q, per_sample, q) == (0, 0)
    on_gpu_like = torch.empty(5, 2, 7, 8, device="meta")  # any device but the CPU: one launch per kernel pays
    assert rotary._slicing(on_gpu_like, cos.to("meta"), on_gpu_like) == (0, 0)


def test_slicing_changes_no_bit(monkeypatch):
    g = torch.Generator().manual_seed(2)
    qkv = torch.randn(6, 9, 3, 2, 8, generator=g).permute(2, 0, 3, 1, 4)  # (3, B, nH, T, Dh), strided
    angles = torch.randn(2, 9, 4, generator=g)
    whole = rotate_qk_of_qkv(qkv, angles.cos(), angles.sin())
    monkeypatch.setattr(rotary, "SLICE_BYTES", 2 * (2 * 2 * 9 * 8 * 4))  # two batch entries of q and k: 2, 2, 2
    assert rotary._slicing(qkv[:2], angles, qkv[:2]) == (1, 2)
    sliced = rotate_qk_of_qkv(qkv, angles.cos(), angles.sin())
    assert all(torch.equal(a, b) for a, b in zip(whole, sliced))  # same kernels per element: results reproduce


def test_per_layer_angles_take_no_zero_filled_gradient_per_layer():
    """RoPE-Mixed's per-layer cos/sin are split once per forward: indexing the (depth, ...) tables per layer would
    make each layer's angle gradient a zero-filled copy of the whole table (select_backward), summed by autograd."""
    def backward_ops(pe: str) -> list[str]:
        torch.manual_seed(0)
        model = ViT(img_size=16, patch_size=4, dim=32, depth=3, heads=2, mlp_ratio=2, pe=pe, pool="mean")
        loss = model(torch.randn(2, 3, 16, 16)).sum()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            loss.backward()
        return [e.name for e in prof.events()]

    mixed, plain = backward_ops("rope_mixed"), backward_ops("none")
    assert any("_RotaryQKBackward" in name for name in mixed)  # the rotation's backward ran
    assert mixed.count("aten::select_backward") == plain.count("aten::select_backward")
    assert mixed.count("aten::zeros") == plain.count("aten::zeros")
