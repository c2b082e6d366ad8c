"""``torch.compile`` sees one graph for the ViT with every PE (no graph breaks), and the compiled model computes what
the eager one does, gradients included, and at inference (backend ``aot_eager``: the same graph capture, no C++
compiler needed)."""

import pytest
import torch
import torch._dynamo as dynamo

import vitpe

PES = [name for name in vitpe.pe.available() if 2 in vitpe.pe.get(name).grid_dims] + ["learnable+rope_mixed"]


def small_vit(pe: str) -> vitpe.ViT:
    torch.manual_seed(0)
    return vitpe.ViT(img_size=16, patch_size=4, dim=32, depth=2, heads=2, pe=pe, pool="mean")


@pytest.mark.slow
@pytest.mark.parametrize("pe", PES)
def test_one_graph_and_the_same_numbers(pe):
    model = small_vit(pe)
    dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)  # fullgraph: a graph break is an error
    for size in (16, 24):  # another grid: the PE state is rebuilt inside the graph
        x = torch.randn(2, 3, size, size, requires_grad=True)
        eager_out = model(x)
        eager_grad, = torch.autograd.grad(eager_out.square().sum(), x)
        out = compiled(x)
        grad, = torch.autograd.grad(out.square().sum(), x)
        assert torch.allclose(out, eager_out, atol=1e-5) and torch.allclose(grad, eager_grad, atol=1e-5)
        with torch.inference_mode():  # inference traces other forms (RoPE channel by channel, SDPA for a bias)
            assert torch.allclose(compiled(x), eager_out, atol=1e-5)


@pytest.mark.parametrize("pe", ["rope_mixed", "relbias"])
def test_one_graph_under_autocast_where_dynamo_cannot_ask_whether_a_device_has_it(pe, monkeypatch):
    """torch 2.11's Dynamo cannot trace ``torch.amp.is_autocast_available``: on an H200 the graph break it made inside
    the rotary state's ``with`` recompiled on every call until the recompile limit. Emulated here (the question breaks
    the graph): under bfloat16 autocast the model is still one graph, in training and at inference."""
    available = torch.amp.is_autocast_available

    def untraceable(kind: str) -> bool:
        dynamo.graph_break()
        return available(kind)

    monkeypatch.setattr(torch.amp, "is_autocast_available", untraceable)
    model = small_vit(pe)
    dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    x = torch.randn(2, 3, 16, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        eager_out = model(x)
        compiled(x).sum().backward()
        with torch.inference_mode():
            torch.testing.assert_close(compiled(x), eager_out, atol=0, rtol=0)
