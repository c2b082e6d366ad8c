"""The hand-written rotary autograd functions against the composed formula and numerical gradients."""

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from vitpe.models.vit import ViT
from vitpe.pe.rotary import rotate_pairs, rotate_qk_of_qkv


def composed(x, cos, sin):
    """x * (cos, cos) + swap(x) * (-sin, sin) per interleaved pair: the textbook form, autograd's own backward."""
    pairs = x.unflatten(-1, (-1, 2))  # (..., Dh/2, 2)
    swapped = torch.stack((-pairs[..., 1], pairs[..., 0]), -1)  # (-x2, x1) per pair
    return (pairs * cos[..., None] + swapped * sin[..., None]).flatten(-2)


def test_matches_the_composed_form_and_its_gradients():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 2, 7, 8, generator=g, requires_grad=True)  # (B, nH, T, Dh)
    angles = torch.randn(2, 7, 4, generator=g, requires_grad=True)  # per head: (nH, T, Dh/2)
    grad = torch.randn(5, 2, 7, 8, generator=g)
    ours = rotate_pairs(x, angles.cos(), angles.sin())
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
    assert torch.autograd.gradcheck(lambda x, a: rotate_pairs(x, a.cos(), a.sin()), (x, angles))


def test_keeps_the_input_dtype_and_checks_the_head_dim():
    x = torch.randn(2, 4, 8, dtype=torch.bfloat16)
    angles = torch.randn(4, 4)
    out = rotate_pairs(x, angles.cos(), angles.sin())
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), composed(x.float(), angles.cos(), angles.sin()), atol=2e-2, rtol=2e-2)
    with pytest.raises(ValueError, match="head dim 8"):
        rotate_pairs(x, angles[:, :3].cos(), angles[:, :3].sin())


@pytest.mark.parametrize("angle_shape", [(2, 7, 4), (7, 4)], ids=["per-head", "shared"])
def test_fused_qk_rotation_matches_two_rotations_and_their_gradients(angle_shape):
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


def test_pairs_are_adjacent_channels():
    """Pair j is channels (2j, 2j + 1): a quarter turn of pair 0 moves channel 0 into channel 1 and leaves the rest."""
    x = torch.arange(1.0, 9.0).reshape(1, 8)  # (T, Dh)
    angles = torch.tensor([[torch.pi / 2, 0.0, 0.0, 0.0]])  # (T, Dh/2)
    out = rotate_pairs(x, angles.cos(), angles.sin())
    torch.testing.assert_close(out, torch.tensor([[-2.0, 1.0, 3, 4, 5, 6, 7, 8]]))


def test_the_fused_rotation_lays_q_k_and_their_gradient_out_like_the_projections():
    """q and k come out of one product laid out like the projections (B, T, 2, nH, Dh); the gradient of qkv is laid
    out like qkv, so the projections' backward takes it without a copy."""
    projections = torch.randn(5, 7, 3, 2, 8, requires_grad=True)  # (B, T, 3, nH, Dh)
    qkv = projections.permute(2, 0, 3, 1, 4)  # (3, B, nH, T, Dh)
    angles = torch.randn(2, 7, 4)
    q, k, _ = rotate_qk_of_qkv(qkv, angles.cos(), angles.sin())
    assert q.stride() == (7 * 2 * 2 * 8, 8, 2 * 2 * 8, 1) and k.data_ptr() == q.data_ptr() + 2 * 8 * q.element_size()
    seen = []
    qkv.register_hook(lambda grad: seen.append(grad.stride()))
    (q.sum() + k.sum()).backward()
    assert seen == [qkv.stride()]


@pytest.mark.parametrize("batch", [1, 5])
@pytest.mark.parametrize("rows", [True, False], ids=["projection rows", "head-major"])
@pytest.mark.parametrize("training", [False, True], ids=["channel form", "pair form"])
@pytest.mark.parametrize("angle_shape", [(2, 7, 4), (7, 4)], ids=["per-head", "shared"])
def test_the_compiled_form_gives_the_same_q_k_token_major(monkeypatch, angle_shape, training, rows, batch):
    """Under torch.compile the rotation is written with real tensors: channel by channel at inference (read straight
    from the projections' rows where q, k and v lie so, padded otherwise) and pair by pair under autograd. Every form
    rotates as the complex product does, with its gradients, and from the projections' rows lays q and k out
    token-major as the eager path does (written head-major, SDPA's CPU kernel reads them slower)."""
    projections = torch.randn(batch, 7, 3, 2, 8)  # (B, T, 3, nH, Dh)
    angles = torch.randn(*angle_shape)

    def rotated(compiling):
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda: compiling)
        leaf = projections.clone().requires_grad_(training)
        qkv = leaf.permute(2, 0, 3, 1, 4)  # (3, B, nH, T, Dh)
        qkv = qkv if rows else qkv.contiguous()
        out = rotate_qk_of_qkv(qkv, angles.cos(), angles.sin())
        grad = torch.autograd.grad(sum(o.square().sum() for o in out), leaf)[0] if training else None
        return out, grad

    (eager, eager_grad), (compiled_form, compiled_grad) = rotated(False), rotated(True)
    for ours, ref in zip(compiled_form, eager):
        torch.testing.assert_close(ours, ref)
    if training:
        torch.testing.assert_close(compiled_grad, eager_grad)
    q = compiled_form[0]
    if rows:
        assert q.stride(-2) > q.stride(-3)  # (B, nH, T, Dh) with the tokens outside the heads in memory


def test_a_strided_last_dimension_is_rotated_too():
    x = torch.randn(3, 8, 6).transpose(1, 2)  # (B, T, Dh) with the channels strided
    angles = torch.randn(6, 4)
    torch.testing.assert_close(rotate_pairs(x, angles.cos(), angles.sin()), composed(x, angles.cos(), angles.sin()))


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


def test_in_place_only_where_no_gradient_is_asked_for():
    g = torch.Generator().manual_seed(3)
    projections = torch.randn(4, 6, 3, 2, 8, generator=g)  # (B, T, 3, nH, Dh)
    angles = torch.randn(2, 6, 4, generator=g)
    cos, sin = angles.cos(), angles.sin()
    expected = rotate_qk_of_qkv(projections.permute(2, 0, 3, 1, 4), cos, sin)
    qkv = projections.clone().permute(2, 0, 3, 1, 4)
    with torch.no_grad():
        q, k, v = rotate_qk_of_qkv(qkv, cos, sin, in_place=True)
    assert q.data_ptr() == qkv.data_ptr() and k.data_ptr() == qkv[1].data_ptr()  # qkv's own memory, rotated
    for ours, ref in zip((q, k, v), expected):
        torch.testing.assert_close(ours, ref)
    torch.testing.assert_close(qkv[0], expected[0])

    trained = projections.clone().requires_grad_()
    q, _, _ = rotate_qk_of_qkv(trained.permute(2, 0, 3, 1, 4), cos, sin, in_place=True)  # a gradient is asked for
    assert q.data_ptr() != trained.data_ptr() and torch.equal(trained, projections)
    q.sum().backward()
    assert trained.grad is not None


def test_per_layer_phases_are_laid_out_token_major():
    """RoPE-Mixed's (nH, T, Dh/2) phases of a layer lie token by token, as q and k do in memory: the rotation's inner
    loop then runs over all heads of a token (0.7x the time of head-major phases at the recipe's dims)."""
    model = ViT(img_size=16, patch_size=4, dim=32, depth=2, heads=2, pe="rope_mixed")  # 1 + 16 tokens, Dh/2 = 8
    cos, sin = model.pe.prepare((4, 4))
    assert cos[0].shape == (2, 17, 8) and cos[0].stride() == (8, 16, 1) and sin[1].stride() == (8, 16, 1)


@pytest.mark.parametrize("pe", ["rope_mixed", "rope_axial"])
def test_the_angles_stay_float32_under_autocast(pe):
    """Autocast rounds products such as RoPE-Mixed's einsum to bfloat16 (cos off by up to 0.09 at a 16 x 16 grid);
    the rotary state is the same, float32, with and without it."""
    model = ViT(img_size=64, patch_size=4, dim=64, depth=2, heads=2, pe=pe)  # a 16 x 16 grid
    want = model.pe.prepare((16, 16))
    model.pe._cache.clear()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = model.pe.prepare((16, 16))
    for got_part, want_part in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
        assert got_part.dtype == torch.float32
        torch.testing.assert_close(got_part, want_part, rtol=0, atol=0)


def test_a_model_on_the_meta_device_infers_shapes():
    """The meta device has no autocast to turn off around the rotary state."""
    model = ViT(img_size=16, patch_size=4, dim=32, depth=2, heads=2, pe="rope_mixed").to("meta")
    assert model(torch.randn(2, 3, 16, 16, device="meta")).shape == (2, 10)


def test_bfloat16_projections_train_through_the_fused_rotation():
    """Under autocast the projections are bfloat16, which has no complex view: the backward rotates in float32 and
    converts into the bfloat16 gradient."""
    g = torch.Generator().manual_seed(4)
    projections = torch.randn(3, 5, 3, 2, 8, generator=g)  # (B, T, 3, nH, Dh)
    angles = torch.randn(2, 5, 4, generator=g)
    low = projections.to(torch.bfloat16).requires_grad_()
    q, k, v = rotate_qk_of_qkv(low.permute(2, 0, 3, 1, 4), angles.cos(), angles.sin())
    (q.float().square().sum() + k.float().sum() + v.float().sum()).backward()
    full = projections.clone().requires_grad_()
    q, k, v = rotate_qk_of_qkv(full.permute(2, 0, 3, 1, 4), angles.cos(), angles.sin())
    (q.square().sum() + k.sum() + v.sum()).backward()
    assert low.grad.dtype == torch.bfloat16
    torch.testing.assert_close(low.grad.float(), full.grad, atol=5e-2, rtol=5e-2)
