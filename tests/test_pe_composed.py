"""Composed PEs (``"learnable+rope_mixed"``): every member's hooks run, options are keyed by member, a member may pin
its resize mode, and everything a single PE supports (gradients, state dicts across grids, configs, text) works."""

import json
from pathlib import Path

import pytest
import torch
from conftest import DIM, HEADS, PREFIX, Encoder, make_pe, tokens

from vitpe.cli import train
import vitpe.pe

SMOKE = str(Path(__file__).resolve().parents[1] / "configs" / "smoke.yaml")


def members_alike(name: str, grid=None, seed: int = 0, **options):
    """The composed PE and, built with the same seed in the same order, its members on their own."""
    composed = make_pe(name, 2, grid=grid, seed=seed, **options)
    torch.manual_seed(seed)
    parts = [vitpe.pe.build(m, dim=DIM, heads=HEADS, depth=3, grid=grid or (4, 5), num_prefix_tokens=PREFIX,
                            **options.get(m, {})) for m in name.split("+")]
    return composed, parts


def test_each_hook_runs_every_member_in_order():
    composed, (table, axial, mixed, rel, alibi) = members_alike("learnable+rope_axial+rope_mixed+relbias+alibi")
    grid = (4, 5)
    state, states = composed.prepare(grid), [p.prepare(grid) for p in (table, axial, mixed, rel, alibi)]
    x = tokens(grid)
    assert torch.equal(composed.add_to_tokens(x, state, 0), table.add_to_tokens(x, states[0], 0))
    q = torch.randn(2, HEADS, x.shape[1], DIM // HEADS)
    for layer in (0, 2):
        expected = mixed.rotate(axial.rotate(q, states[1], layer), states[2], layer)  # two rotations compose
        assert torch.allclose(composed.rotate(q, state, layer), expected)
        qkv = torch.stack((q, q.flip(0), q + 1))  # (3, B, nH, T, Dh)
        rotated = composed.rotate_qkv(qkv, state, layer)
        assert torch.allclose(rotated[1], mixed.rotate(axial.rotate(q.flip(0), states[1], layer), states[2], layer))
        assert torch.equal(rotated[2], q + 1)
        bias = rel.attention_bias(states[3], layer) + alibi.attention_bias(states[4], layer)
        assert torch.allclose(composed.attention_bias(state, layer), bias)
    assert composed.sites == {"tokens", "qk", "logits"} and composed.site == "tokens+qk+logits"


def test_one_rotating_member_takes_its_fused_path():
    composed, (table, mixed) = members_alike("learnable+rope_mixed")
    grid = (4, 5)
    state = composed.prepare(grid)
    qkv = torch.randn(3, 2, HEADS, 1 + 20, DIM // HEADS)  # (3, B, nH, P + N, Dh)
    for ours, ref in zip(composed.rotate_qkv(qkv, state, 1), mixed.rotate_qkv(qkv, mixed.prepare(grid), 1)):
        torch.testing.assert_close(ours, ref)


def test_options_are_keyed_by_member():
    composed, (_, rope) = members_alike("learnable+rope_axial", rope_axial={"theta": 7.0})
    assert composed.members["rope_axial"].theta == 7.0 == rope.theta
    assert vitpe.pe.options("learnable+rope_axial") == {"learnable": vitpe.pe.options("learnable"),
                                                         "rope_axial": vitpe.pe.options("rope_axial")}
    with pytest.raises(ValueError, match="keyed by member"):
        make_pe("learnable+rope_axial", 2, theta=7.0)
    with pytest.raises(ValueError, match="must be a mapping"):
        make_pe("learnable+rope_axial", 2, rope_axial=7.0)
    with pytest.raises(ValueError, match="unknown option.*'thetta'.*rope_axial"):
        make_pe("learnable+rope_axial", 2, rope_axial={"thetta": 7.0})
    with pytest.raises(ValueError, match="unknown position encoding 'rope_axail'"):
        make_pe("learnable+rope_axail", 2)
    with pytest.raises(ValueError, match="distinct names"):
        make_pe("learnable+learnable", 2)


def test_a_member_can_pin_its_resize_mode():
    pe = make_pe("learnable+rope_mixed", 2, rope_mixed={"resize": "extrapolate"})
    assert pe.members["rope_mixed"].resize == "extrapolate" and pe.members["learnable"].resize == "interpolate"
    pe.resize = "extrapolate"
    pe.resize = "interpolate"
    assert pe.members["rope_mixed"].resize == "extrapolate"  # pinned: the model's mode does not move it
    with pe.resize_mode("extrapolate"):
        assert pe.members["learnable"].resize == "extrapolate"
    assert pe.members["learnable"].resize == "interpolate"
    with pytest.raises(ValueError, match="pe_resize mode"):
        make_pe("learnable+rope_mixed", 2, rope_mixed={"resize": "stretch"})


def test_a_member_can_have_a_reference_grid_of_its_own():
    pe = make_pe("learnable+rope_axial", 2, grid=(8, 6), rope_axial={"grid": [4, 3], "anchor": "first"})
    table, rope = pe.members["learnable"], pe.members["rope_axial"]
    assert table.grid == (8, 6) and rope.grid == (4, 3)
    # at the model's grid the rotation sits on its own 4 x 3 grid: cell i of 8 at i * 4 / 8 (anchor "first")
    alone = make_pe("rope_axial", 2, grid=(4, 3), anchor="first")
    assert torch.allclose(rope.phases((8, 6)), alone.phases((8, 6)))
    assert torch.allclose(rope.phases((8, 6))[12], alone.phases((4, 3))[3])  # row 2 of 8 sits at row 1 of 4
    for bad in ([4], [4, 0], "4x3", [4.5, 3]):
        with pytest.raises(ValueError, match="grid option of 'rope_axial' must be 2 positive whole numbers"):
            make_pe("learnable+rope_axial", 2, grid=(8, 6), rope_axial={"grid": bad})


def test_the_first_cell_anchor_keeps_position_zero():
    centre = make_pe("rope_axial", 2, grid=(4, 4))
    first = make_pe("rope_axial", 2, grid=(4, 4), anchor="first")
    assert torch.equal(centre.phases((4, 4)), first.phases((4, 4)))  # the reference grid: the same integers
    assert first.phases((8, 8))[0].abs().max() == 0 and centre.phases((8, 8))[0].abs().max() > 0
    # patch-to-patch offsets agree; the absolute angles differ by a constant
    shift_first = first.phases((8, 8)) - first.phases((8, 8))[:1]
    shift_centre = centre.phases((8, 8)) - centre.phases((8, 8))[:1]
    assert torch.allclose(shift_first, shift_centre, atol=1e-5)
    with pytest.raises(ValueError, match=r"anchor must be one of \['centre', 'first'\]"):
        make_pe("rope_axial", 2, anchor="corner")


def test_gradients_state_dicts_and_weight_decay_names():
    name = "separable+rope_mixed+cpb"
    encoder = Encoder(make_pe(name, 2))
    encoder(tokens(encoder.pe.grid), encoder.pe.grid).square().mean().backward()
    params = dict(encoder.pe.named_parameters())
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in params.values())
    assert encoder.pe.no_weight_decay() <= set(params) and "members.rope_mixed.freqs" in encoder.pe.no_weight_decay()
    source, target = make_pe(name, 2, seed=1), make_pe(name, 2, grid=(7, 9), seed=2)
    target.load_state_dict(source.state_dict())  # each member resamples its own tables
    assert torch.allclose(source.members["separable"].embedding((7, 9)),
                          target.members["separable"].embedding((7, 9)), atol=1e-6)


def test_configs_text_and_eval_take_composed_pes(tmp_path):
    out = tmp_path / "run"
    assert train.main(["--config", SMOKE, f"out_dir={out}", "model.pe=learnable+rope_mixed",
                       "model.pe_options={rope_mixed: {resize: extrapolate}}", "train.epochs=1", "--no-progress"]) == 0
    assert "rope_mixed" in json.dumps((out / "config.yaml").read_text())
    from vitpe.cli import evaluate as eval_cli
    assert eval_cli.main([str(out), "--resolutions", "12,16,24", "--out", str(tmp_path / "sweep")]) == 0
    records = json.loads((tmp_path / "sweep" / "resolution.json").read_text())
    assert {r["pe"] for r in records} == {"learnable+rope_mixed"} and len(records) == 6
    text = vitpe.TextClassifier(50, 2, max_len=8, dim=32, heads=2, depth=1, pe="learnable+rope_axial")
    assert text.pe.members["learnable"].pos_embed.std() > 0.5  # learned tables start at the words' unit scale
    ids = torch.randint(3, 50, (2, 8))
    assert text(ids, torch.ones(2, 8, dtype=torch.bool)).shape == (2, 2)
