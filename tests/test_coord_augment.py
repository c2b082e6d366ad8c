"""Coordinate augmentation (DINOv3's shift, jitter, rescale): the same draws as timm's ``_apply_coord_augs``, factors
within their ranges, nothing in eval mode, fresh and seeded in training, checked options."""

import math

import pytest
import torch
from timm.layers.pos_embed_sincos import _apply_coord_augs

import vitpe.pe
from vitpe.pe.coord_augment import CoordAugment
from vitpe.pe.rope_dinov3 import centred_coordinates

AUGMENTING_PES = ["learnable", "sincos", "rope_axial", "rope_mixed", "rope_dinov3", "cpb", "alibi"]
OPTIONS = {"shift": 0.2, "jitter": 1.5, "rescale": 2.0}


def build(name: str, **options):
    torch.manual_seed(0)
    return vitpe.pe.build(name, dim=64, heads=2, depth=2, grid=(4, 6), num_prefix_tokens=1, **options)


def flat(state) -> list[torch.Tensor]:
    parts = state if isinstance(state, tuple) else (state,)
    return [t for part in parts for t in (part if isinstance(part, tuple) else (part,))]


def same(a, b) -> bool:
    return all(torch.allclose(x, y, atol=1e-6) for x, y in zip(flat(a), flat(b)))


@pytest.mark.parametrize("options", [OPTIONS, {"rescale": 2.0}, {"shift": 0.5, "jitter": 1.2}, {"jitter": 3.0}])
def test_the_draws_are_timms_in_timms_order(options):
    coords = centred_coordinates((5, 7), "separate")
    torch.manual_seed(11)
    theirs = _apply_coord_augs(coords, options.get("shift"), options.get("jitter"), options.get("rescale"))
    torch.manual_seed(11)
    ours = CoordAugment(**options).centred(coords)
    torch.testing.assert_close(ours, theirs)


def test_the_factors_stay_in_their_ranges():
    augment = CoordAugment(**OPTIONS)
    torch.manual_seed(0)
    shifts, factors = zip(*(augment.draw(2) for _ in range(2000)))
    shifts, factors = torch.stack(shifts), torch.stack(factors)
    assert shifts.abs().max() <= 0.2 and shifts.abs().max() > 0.19  # uniform in [-0.2, 0.2]
    low, high = 1 / (1.5 * 2.0), 1.5 * 2.0  # jitter times rescale
    assert factors.min() >= low and factors.max() <= high
    assert factors.log().mean().abs() < 0.05  # log-uniform: centred on a factor of 1
    only_rescale = CoordAugment(rescale=2.0)
    _, factors = zip(*(only_rescale.draw(2) for _ in range(200)))
    assert all(f[0] == f[1] for f in factors)  # one factor for both axes


@pytest.mark.parametrize("name", AUGMENTING_PES)
def test_nothing_moves_in_eval_mode(name):
    augmented, plain = build(name, **OPTIONS).eval(), build(name).eval()
    for grid in [(4, 6), (8, 8)]:
        assert same(augmented.prepare(grid), plain.prepare(grid))


@pytest.mark.parametrize("name", AUGMENTING_PES)
def test_training_draws_anew_every_forward_from_the_seeded_stream(name):
    pe = build(name, **OPTIONS).train()
    torch.manual_seed(5)
    first = pe.prepare((4, 6))
    second = pe.prepare((4, 6))
    torch.manual_seed(5)
    again = pe.prepare((4, 6))
    assert not same(first, second) and same(first, again)
    assert not same(first, build(name).train().prepare((4, 6)))


def test_positions_move_as_dinov3_moves_its_coordinates():
    """rope_axial's positions, written as DINOv3's centred coordinates, move exactly as rope_dinov3's do."""
    augment = CoordAugment(**OPTIONS)
    positions = torch.stack(torch.meshgrid(torch.arange(4.0), torch.arange(6.0), indexing="ij"), -1).reshape(-1, 2)
    torch.manual_seed(3)
    moved = augment.positions(positions, (4, 6))
    torch.manual_seed(3)
    centred = augment.centred(centred_coordinates((4, 6), "separate"))
    torch.testing.assert_close(2 * (moved + 0.5) / torch.tensor([4.0, 6.0]) - 1, centred)


def test_a_shift_leaves_relative_pes_alone():
    shifted, plain = build("cpb", shift=0.5).train(), build("cpb").train()
    assert same(shifted.prepare((4, 6)), plain.prepare((4, 6)))


@pytest.mark.parametrize("option, value, says", [
    ("jitter", 0.5, "jitter must be a finite number >= 1"),
    ("rescale", math.inf, "rescale must be a finite number >= 1"),
    ("shift", -0.1, "shift must be a finite number >= 0"),
    ("shift", "a lot", "shift must be a finite number >= 0"),
])
def test_options_out_of_range_are_one_clear_error(option, value, says):
    with pytest.raises(ValueError, match=f"^rope_axial: {says}"):
        build("rope_axial", **{option: value})


def test_pes_that_read_no_coordinates_have_no_augmentation():
    for name in ("relbias", "peg", "none", "separable"):
        assert not {"shift", "jitter", "rescale"} & set(vitpe.pe.options(name))
