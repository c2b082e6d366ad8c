"""rope_dinov3 against timm's RotaryEmbeddingDinoV3 (DINOv3's RoPE as timm ports it): the same angles to 1e-6 at
square and non-square grids, for each normalisation; the resize modes around DINOv3's own behaviour."""

import pytest
import torch
from timm.layers.pos_embed_sincos import RotaryEmbeddingDinoV3

import vitpe.pe
from vitpe.pe.rope_dinov3 import centred_coordinates

HEAD_DIM = 64


def build(**options):
    return vitpe.pe.build("rope_dinov3", dim=3 * HEAD_DIM, heads=3, depth=1, grid=(8, 8), num_prefix_tokens=1,
                          **options).eval()


def timm_angles_sin_cos(grid, **options) -> tuple[torch.Tensor, torch.Tensor]:
    """timm's (sin, cos) of every pair, (N, Dh/2): its embedding is [sin | cos], each in the half layout (pair j =
    channels j and j + Dh/2), so the first Dh/2 columns of each are the pairs."""
    embed = RotaryEmbeddingDinoV3(dim=HEAD_DIM, **options).eval().get_embed(list(grid))  # (N, 2 Dh)
    return embed[:, : HEAD_DIM // 2], embed[:, HEAD_DIM: HEAD_DIM + HEAD_DIM // 2]


@pytest.mark.parametrize("grid", [(8, 8), (14, 14), (6, 10), (12, 5)])
@pytest.mark.parametrize("normalize", ["separate", "min", "max"])
def test_the_angles_are_timms(grid, normalize):
    phases = build(normalize=normalize).phases(grid)  # (N, Dh/2)
    sin, cos = timm_angles_sin_cos(grid, normalize_coords=normalize)
    torch.testing.assert_close(phases.sin(), sin, atol=1e-6, rtol=0)
    torch.testing.assert_close(phases.cos(), cos, atol=1e-6, rtol=0)


def test_another_base_is_timms_temperature():
    sin, cos = timm_angles_sin_cos((6, 10), temperature=10000.0)
    torch.testing.assert_close(build(base=10000.0).phases((6, 10)).sin(), sin, atol=1e-6, rtol=0)


def test_a_perturbed_period_breaks_the_equality():
    sin, _ = timm_angles_sin_cos((8, 8), temperature=101.0)
    assert (build().phases((8, 8)).sin() - sin).abs().max() > 1e-3


def test_coordinates_span_minus_one_to_one_in_every_grid_when_interpolating():
    for grid in [(8, 8), (16, 4)]:
        coords = build().coordinates(grid)
        assert torch.allclose(coords.amin(0), torch.tensor([-1 + 1 / grid[0], -1 + 1 / grid[1]]))
        assert torch.allclose(coords.amax(0), torch.tensor([1 - 1 / grid[0], 1 - 1 / grid[1]]))


def test_extrapolating_continues_the_reference_spacing_past_one():
    pe = build(resize="extrapolate")
    coords = pe.coordinates((16, 8)).reshape(16, 8, 2)
    reference = centred_coordinates((8, 8), "separate").reshape(8, 8, 2)
    torch.testing.assert_close(coords[:8], reference)  # the reference grid in the corner
    assert coords[-1, 0, 0] == pytest.approx(-1 + (2 * 15 + 1) / 8)  # 15 cells on, at the reference step 2/8


def test_it_is_2d_only_and_checks_its_options():
    with pytest.raises(ValueError, match="2D grids only"):
        vitpe.pe.build("rope_dinov3", dim=64, heads=1, depth=1, grid=(9,))
    with pytest.raises(ValueError, match="normalize must be one of"):
        build(normalize="mean")
    with pytest.raises(ValueError, match="base must be a positive number"):
        build(base=0)
