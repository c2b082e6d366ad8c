"""The qk-site hooks keep the qkv Linear's memory order: the gradient reaches the Linear without a layout copy."""

import pytest
import torch

import vitpe.pe
from vitpe.pe.layout import memory_order, unbind_in_memory_order

B, T, HEADS, HEAD_DIM = 3, 16, 2, 8


def linear_layout_qkv(requires_grad: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """A (B, T, 3, nH, Dh) tensor as the qkv Linear writes it, and the attention's (3, B, nH, T, Dh) view of it."""
    projections = torch.randn(B, T, 3, HEADS, HEAD_DIM, requires_grad=requires_grad)
    return projections, projections.permute(2, 0, 3, 1, 4)


def test_memory_order_of_the_attention_view():
    _, qkv = linear_layout_qkv(False)
    assert memory_order(qkv) == [1, 3, 0, 2, 4]  # (B, T, 3, nH, Dh) in memory, like the Linear's output


@pytest.mark.parametrize("permutation", [(2, 0, 3, 1, 4), (0, 1, 2, 3, 4), (1, 0, 2, 4, 3)])
def test_unbind_in_memory_order_equals_unbind(permutation):
    x = torch.randn(3, 4, 5, 6, 7).permute(*permutation)
    for ours, ref in zip(unbind_in_memory_order(x), x.unbind(0), strict=True):
        assert ours.shape == ref.shape
        torch.testing.assert_close(ours, ref, rtol=0, atol=0)


@pytest.mark.parametrize("pe_name", ["none", "alibi", "relbias", "rope_axial", "rope_mixed", "rope_mixed+relbias"])
def test_gradient_of_the_projections(pe_name):
    """Through the hooks the gradient of the (B, T, 3, nH, Dh) projections equals the plain-unbind gradient, and it
    arrives contiguous (with ``qkv.unbind(0)`` it arrives permuted, for the Linear's backward to copy): the default hook
    unbinds along the memory order, the fused rotation writes its gradient laid out like ``qkv``."""
    torch.manual_seed(0)
    pe = vitpe.pe.build(pe_name, dim=HEADS * HEAD_DIM, heads=HEADS, depth=1, grid=(4, 4))
    state = pe.prepare((4, 4))  # (cos, sin) for the rotary PEs, the bias for the others
    projections, qkv = linear_layout_qkv()
    seen = []
    projections.register_hook(lambda g: seen.append(g.is_contiguous()))
    q, k, v = pe.rotate_qkv(qkv, state, 0)
    mask = pe.attention_bias(state, 0)
    torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask).square().sum().backward()
    assert seen == [True]
    ours = projections.grad.clone()

    projections.grad = None
    state = pe.prepare((4, 4))  # a learned PE's state is part of the first graph, freed by its backward
    q, k, v = qkv.unbind(0)
    q, k = pe.rotate(q, state, 0), pe.rotate(k, state, 0)
    mask = pe.attention_bias(state, 0)
    torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask).square().sum().backward()
    assert seen[-1] is False  # plain unbind: permuted
    torch.testing.assert_close(ours, projections.grad, rtol=0, atol=0)
