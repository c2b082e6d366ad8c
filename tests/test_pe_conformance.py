"""One conformance suite over every name in ``vitpe.pe.available()``: a PE is covered the day it is registered.

For each PE: built at 14x14 (and 1D where it works on sequences), the README's own-attention snippet run as written
with its name at 14x14 and at 20x16, forward and backward; the same logits from a host model written with the typed
hooks as from ``vitpe.ViT`` with the same weights; bfloat16 after ``.to``; ``torch.compile(fullgraph=True)`` across
a grid change; a ``state_dict`` round trip; ``copy.deepcopy`` and pickling.
"""

from __future__ import annotations

import copy
import math
import pickle
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import vitpe

ROOT = Path(__file__).resolve().parents[1]
NAMES = vitpe.pe.available()
TWO_D = vitpe.pe.available(dims=2)
ONE_D = vitpe.pe.available(dims=1)
HEADS, HEAD_DIM, DEPTH = 2, 32, 2
GRIDS = ((14, 14), (20, 16))


def readme_snippet() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## A vitpe PE inside your own attention"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def build(name: str, grid: tuple[int, ...] = (14, 14)) -> vitpe.pe.PositionEncoding:
    torch.manual_seed(0)
    return vitpe.pe.build(name, dim=HEADS * HEAD_DIM, heads=HEADS, depth=DEPTH, grid=grid, num_prefix_tokens=1)


def inputs(grid: tuple[int, ...], dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, ...]:
    """Fixed tokens (B, T, D) and q, k, v (B, nH, T, Dh) for ``grid``."""
    tokens = 1 + math.prod(grid)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, tokens, HEADS * HEAD_DIM, generator=g).to(dtype)
    return (x, *torch.randn(3, 2, HEADS, tokens, HEAD_DIM, generator=g).to(dtype))


def run_hooks(pe: vitpe.pe.PositionEncoding, grid: tuple[int, ...], x: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
              v: torch.Tensor, layer: int = 1) -> torch.Tensor:
    """The snippet's three hooks at ``grid``, block ``layer``: attention output (B, nH, T, Dh) plus the tokens."""
    hooks = pe.bind(grid).layer(layer)
    x = hooks.add_to_tokens(x)
    q, k = hooks.rotate_qk(q, k)
    bias = hooks.attention_bias()
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if bias is None else bias.to(q.dtype))
    return out + x.unflatten(-1, (HEADS, HEAD_DIM)).transpose(1, 2)  # the tokens site's effect in the output


def hosted(pe: vitpe.pe.PositionEncoding, grid: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return run_hooks(pe, grid, *inputs(grid, dtype))


@pytest.mark.slow
@pytest.mark.parametrize("name", TWO_D)
def test_the_readme_snippet_runs_as_written_at_two_grids(name: str) -> None:
    code = readme_snippet()
    assert 'name, heads, head_dim = "rope_mixed"' in code and "grid = (20, 16)" in code
    for grid in GRIDS:
        scope: dict = {}
        exec(code.replace('"rope_mixed"', repr(name)).replace("grid = (20, 16)", f"grid = {grid}"), scope)
        out, pe = scope["out"], scope["pe"]
        assert out.shape[:3] == (2, 6, 1 + math.prod(grid)) and torch.isfinite(out).all()
        if any(p.requires_grad for p in pe.parameters()) and out.requires_grad:
            out.square().sum().backward()
            assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in pe.parameters()), name


@pytest.mark.parametrize("name", ONE_D)
def test_every_pe_that_takes_sequences_runs_at_two_lengths(name: str) -> None:
    pe = build(name, grid=(14,))
    for length in ((14,), (20,)):
        out = hosted(pe, length)
        assert out.shape == (2, HEADS, 1 + length[0], out.shape[-1]) and torch.isfinite(out).all()


@pytest.mark.parametrize("name", TWO_D)
def test_a_host_model_with_the_hooks_gives_the_vit_logits(name: str) -> None:
    """A ViT block written with ``pe.bind(grid).layer(i)`` and plain SDPA gives ``vitpe.ViT``'s logits."""
    torch.manual_seed(0)
    model = vitpe.ViT(img_size=(56, 64), patch_size=4, num_classes=5, dim=HEADS * HEAD_DIM, depth=DEPTH, heads=HEADS,
                      pe=name).eval()
    images = torch.randn(2, 3, 56, 64)
    with torch.no_grad():
        expected = model(images)
        x, grid = model.embed(images)  # (B, T, D), grid (14, 16)
        B, T, D = x.shape
        bound = model.pe.bind(grid)
        for i, block in enumerate(model.blocks):
            hooks = bound.layer(i)
            x = hooks.add_to_tokens(x)
            q, k, v = block.attn.qkv(block.norm1(x)).reshape(B, T, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
            q, k = hooks.rotate_qk(q, k)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=hooks.attention_bias())  # (B, nH, T, Dh)
            x = x + block.attn.proj(out.transpose(1, 2).reshape(B, T, D))
            x = x + block.mlp(block.norm2(x))
        logits = model.forward_head(model.norm(x))
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", TWO_D)
def test_bfloat16_after_to(name: str) -> None:
    pe = build(name)
    reference = hosted(pe, GRIDS[1]).detach()
    low = copy.deepcopy(pe).to(torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 for p in low.parameters())
    out = hosted(low, GRIDS[1], torch.bfloat16)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), reference, rtol=0.05, atol=0.08)


@pytest.mark.slow
@pytest.mark.parametrize("name", TWO_D)
def test_compiled_with_fullgraph_across_a_grid_change(name: str) -> None:
    pe = build(name).eval()
    torch._dynamo.reset()  # one compiled run_hooks per PE: the PEs before this one do not count to its recompile limit
    compiled = torch.compile(run_hooks, fullgraph=True, backend="eager", dynamic=False)
    with torch.no_grad():
        for grid in GRIDS:
            torch.testing.assert_close(compiled(pe, grid, *inputs(grid)), hosted(pe, grid), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", TWO_D)
def test_state_dict_deepcopy_and_pickle_keep_the_outputs(name: str) -> None:
    pe = build(name)
    with torch.no_grad():  # move every parameter off its initial value, so a round trip that drops one shows
        for p in pe.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    expected = hosted(pe, GRIDS[1]).detach()
    torch.manual_seed(123)
    fresh = vitpe.pe.build(name, dim=HEADS * HEAD_DIM, heads=HEADS, depth=DEPTH, grid=(14, 14), num_prefix_tokens=1)
    fresh.load_state_dict(pe.state_dict())
    copies = {"state_dict": fresh, "deepcopy": copy.deepcopy(pe), "pickle": pickle.loads(pickle.dumps(pe))}
    for how, other in copies.items():
        torch.testing.assert_close(hosted(other, GRIDS[1]).detach(), expected, rtol=0, atol=0, msg=how)


def test_layered_pes_need_depth_and_the_others_do_not() -> None:
    for name in TWO_D:
        cls = vitpe.pe.get(name)
        if cls.layered:
            with pytest.raises(ValueError, match="give depth="):
                vitpe.pe.build(name, dim=64, heads=2, grid=(4, 4))
        else:
            assert vitpe.pe.build(name, dim=64, heads=2, grid=(4, 4)).depth is None


def test_an_int_grid_is_a_square_for_image_pes_and_a_length_for_sequence_pes() -> None:
    for name in NAMES:
        pe = vitpe.pe.build(name, dim=64, heads=2, depth=1, grid=14)
        assert pe.grid == ((14, 14) if 2 in pe.grid_dims else (14,)), name
    assert vitpe.pe.build("rope_axial", dim=64, heads=2, grid=(14,)).grid == (14,)
    assert vitpe.pe.build("cpb", dim=64, heads=2, depth=1, grid=14).bind(10).grid == (10, 10)


@pytest.mark.parametrize("name", NAMES)
def test_shapes_on_the_meta_device(name: str) -> None:
    """Built and run on ``meta`` (no memory, no values): the shapes a model would have, for shape inference."""
    grid = GRIDS[1] if 2 in vitpe.pe.get(name).grid_dims else (20,)
    with torch.device("meta"):
        if len(grid) == 2:
            out = hosted(build(name), grid)
            model = vitpe.ViT(img_size=32, patch_size=4, num_classes=10, dim=64, depth=2, heads=2, pe=name)
            logits = model(torch.randn(2, 3, 32, 48))
            mixed = model([torch.randn(3, 32, 48), torch.randn(3, 16, 32)])
            assert logits.shape == mixed.shape == (2, 10)
        else:
            out = hosted(build(name, grid=(14,)), grid)
            text = vitpe.TextClassifier(100, 2, max_len=16, dim=64, depth=2, heads=2, pe=name)
            assert text(torch.randint(0, 100, (2, 16))).shape == (2, 2)
    assert out.is_meta and out.shape[:3] == (2, HEADS, 1 + math.prod(grid))


@pytest.mark.parametrize("name", NAMES)
def test_every_name_reaches_its_class_and_its_signature_shows_every_keyword(name: str) -> None:
    import inspect

    cls = vitpe.pe.get(name)
    assert getattr(vitpe.pe, cls.__name__) is cls and cls.__name__ in vitpe.pe.__all__
    params = inspect.signature(cls).parameters
    assert list(params)[:6] == ["dim", "heads", "depth", "grid", "num_prefix_tokens", "resize"]
    assert {k: params[k].default for k in list(params)[6:]} == vitpe.pe.options(name)
    assert all(p.kind is p.KEYWORD_ONLY for p in params.values())


def test_available_names_the_pes_of_each_kind_of_grid() -> None:
    assert "t5bias" in ONE_D and "t5bias" not in TWO_D and "separable" not in ONE_D
    assert sorted(set(ONE_D) | set(TWO_D)) == NAMES
    assert all(2 in vitpe.pe.get(n).grid_dims for n in TWO_D)
    with pytest.raises(ValueError, match="takes 1"):
        vitpe.pe.available(dims=3)
