"""The CPU path for a learned attention bias gives SDPA's outputs and gradients, whole or chunk by chunk."""

import pytest
import torch
import torch.nn.functional as F

import vitpe.models.biased_attention as biased
from vitpe.models.biased_attention import biased_attention, chunk_size, takes_fast_path


def run(attend, tokens, per_sample=False, backwards=1):
    g = torch.Generator().manual_seed(0)
    qkv = torch.randn(3, 5, tokens, 2, 8, generator=g).permute(0, 1, 3, 2, 4).requires_grad_()  # (3, B, nH, T, Dh)
    shape = (5, 2, tokens, tokens) if per_sample else (2, tokens, tokens)
    bias = (torch.randn(shape, generator=g) * 2).requires_grad_()  # (B?, nH, T, T)
    grad_out = torch.randn(5, 2, tokens, 8, generator=g)
    q, k, v = qkv.unbind(0)
    out = attend(q, k, v, bias)
    for _ in range(backwards):
        out.backward(grad_out, retain_graph=True)
    return out.detach(), qkv.grad, bias.grad


def sdpa(q, k, v, bias):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)


@pytest.mark.parametrize("per_sample", [False, True], ids=["shared bias", "per-sample bias"])
@pytest.mark.parametrize("samples_per_chunk", [5, 2, 1])
@pytest.mark.parametrize("tokens", [17, 65])
def test_matches_sdpa_and_its_gradients(tokens, samples_per_chunk, per_sample, monkeypatch):
    monkeypatch.setattr(biased, "CHUNK_BYTES", samples_per_chunk * 2 * tokens * tokens * 4)  # 2 heads, float32
    assert chunk_size(5, 2, tokens, tokens, 4) == samples_per_chunk
    ours = run(biased_attention, tokens, per_sample)
    reference = run(sdpa, tokens, per_sample)
    for a, b in zip(ours, reference):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)


def test_a_retained_graph_gives_the_same_gradients_again(monkeypatch):
    monkeypatch.setattr(biased, "CHUNK_BYTES", 2 * 2 * 17 * 17 * 4)  # 3 chunks of at most 2 samples
    once, twice = run(biased_attention, 17), run(biased_attention, 17, backwards=2)
    for a, b in zip(once[1:], twice[1:]):
        torch.testing.assert_close(2 * a, b)


def test_a_chunk_holds_at_least_one_sample():
    assert chunk_size(128, 4, 256, 256, 4) == 1  # 1 MiB of scores per sample at 64 px
    assert chunk_size(128, 4, 1024, 1024, 4) == 1  # more than CHUNK_BYTES per sample: still one
    assert chunk_size(64, 4, 16, 16, 4) == 64  # small grids: the whole batch in one chunk


def test_only_a_learned_float32_bias_in_cpu_training_takes_it():
    q = torch.randn(2, 2, 5, 4)
    learned = torch.zeros(2, 5, 5, requires_grad=True)
    assert takes_fast_path(q, learned)
    assert takes_fast_path(torch.randn(1, 2, 257, 4), torch.zeros(2, 257, 257, requires_grad=True))
    assert takes_fast_path(q, torch.zeros(2, 2, 5, 5, requires_grad=True))  # one bias per sample
    assert not takes_fast_path(q, torch.zeros(1, 2, 5, 5, requires_grad=True))  # broadcasts: SDPA's
    assert not takes_fast_path(q, torch.zeros(2, 1, 5, 5, requires_grad=True))
    assert not takes_fast_path(q, torch.zeros(5, 5, requires_grad=True))
    assert not takes_fast_path(q, learned.detach())
    assert not takes_fast_path(q.double(), learned.double())
    with torch.no_grad():
        assert not takes_fast_path(q, learned)


@pytest.mark.parametrize("per_sample", [False, True], ids=["shared bias", "per-sample bias"])
def test_the_custom_op_is_registered_soundly(per_sample, monkeypatch):
    """torch.library's own check of what torch.compile relies on to run the chunked attention as opaque kernels: the
    schema, the fake (shape-only) forms against the real ops, the gradient registration, and tracing with dynamic
    shapes (the gradients themselves: test_matches_sdpa_and_its_gradients)."""
    monkeypatch.setattr(biased, "CHUNK_BYTES", 2 * 2 * 9 * 9 * 8)  # several chunks of 2 samples (float64)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(5, 2, 9, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    bias = torch.randn((5, 2, 9, 9) if per_sample else (2, 9, 9), generator=g, dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(biased._attend, (q, k, v, bias))
