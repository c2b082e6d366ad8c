"""The CPU paths for a learned attention bias give SDPA's outputs and gradients."""

import pytest
import torch
import torch.nn.functional as F

from vitpe.models.biased_attention import EXPLICIT_UP_TO, biased_attention, takes_fast_path


def run(attend, tokens, generator_seed=0):
    g = torch.Generator().manual_seed(generator_seed)
    qkv = torch.randn(3, 3, tokens, 2, 8, generator=g).permute(0, 1, 3, 2, 4).requires_grad_()  # (3, B, nH, T, Dh)
    bias = (torch.randn(2, tokens, tokens, generator=g) * 2).requires_grad_()  # (nH, T, T)
    grad_out = torch.randn(3, 2, tokens, 8, generator=g)
    q, k, v = qkv.unbind(0)
    out = attend(q, k, v, bias)
    out.backward(grad_out)
    return out.detach(), qkv.grad, bias.grad


@pytest.mark.parametrize("tokens", [17, 65])
def test_matches_sdpa_and_its_gradients(tokens):
    ours = run(biased_attention, tokens)
    reference = run(lambda q, k, v, b: F.scaled_dot_product_attention(q, k, v, attn_mask=b), tokens)
    for a, b in zip(ours, reference):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)


def test_only_a_learned_float32_bias_in_eager_cpu_training_takes_it():
    q = torch.randn(2, 2, 5, 4)
    learned = torch.zeros(2, 5, 5, requires_grad=True)
    assert takes_fast_path(q, learned)
    assert not takes_fast_path(q, learned.detach())
    assert not takes_fast_path(q.double(), learned.double())
    long = torch.randn(1, 2, EXPLICIT_UP_TO + 1, 4)
    assert not takes_fast_path(long, torch.zeros(2, EXPLICIT_UP_TO + 1, EXPLICIT_UP_TO + 1, requires_grad=True))
    with torch.no_grad():
        assert not takes_fast_path(q, learned)
