"""The ntk and yarn resize modes, against the formulas written out here independently (NTK-aware base scaling; YaRN's
ramp over wavelengths), and as the PEs use them: identity at the reference grid, high frequencies extrapolated and
low ones interpolated, per axis, YaRN's temperature on q and k."""

import math

import pytest
import torch

import vitpe
import vitpe.pe
from vitpe.pe import ResizeError
from vitpe.pe.frequency_scaling import ntk_frequencies, yarn_frequencies, yarn_temperature

FREQUENCY_PES = ["sincos", "rope_axial", "rope_mixed", "rope_dinov3"]


def ladder(base: float, dim: int) -> torch.Tensor:
    return torch.tensor([base ** (-2 * k / dim) for k in range(dim // 2)])


@pytest.mark.parametrize("base, dim, scale", [(100.0, 16, 2.0), (10000.0, 64, 4.0), (10.0, 8, 1.5)])
def test_ntk_is_the_ladder_of_the_raised_base(base, dim, scale):
    raised = base * scale ** (dim / (dim - 2))  # bloc97's NTK-aware base
    torch.testing.assert_close(ntk_frequencies(ladder(base, dim), scale, base, dim), ladder(raised, dim))


def test_ntk_keeps_the_highest_frequency_and_interpolates_the_lowest():
    freqs = ladder(100.0, 16)
    scaled = ntk_frequencies(freqs, 3.0, 100.0, 16)
    assert scaled[0] == freqs[0]
    torch.testing.assert_close(scaled[-1], freqs[-1] / 3.0)
    assert torch.all(scaled <= freqs) and torch.all(scaled >= freqs / 3.0 - 1e-9)


def yarn_reference(freq: float, scale: float, length: float, alpha: float, beta: float) -> float:
    """YaRN's NTK-by-parts for one frequency, from wavelengths (Peng et al. 2023, eq. 17-18)."""
    wavelength = 2 * math.pi / freq
    r = length / wavelength
    gamma = 0.0 if r < alpha else 1.0 if r > beta else (r - alpha) / (beta - alpha)
    return (1 - gamma) * freq / scale + gamma * freq


@pytest.mark.parametrize("alpha, beta", [(0.25, 1.0), (1.0, 32.0)])
def test_yarn_ramps_from_interpolated_to_kept_by_turns_over_the_extent(alpha, beta):
    freqs = torch.logspace(-3, 1.5, 40)
    scaled = yarn_frequencies(freqs, 2.5, 8.0, alpha, beta)
    expected = torch.tensor([yarn_reference(f, 2.5, 8.0, alpha, beta) for f in freqs.tolist()])
    torch.testing.assert_close(scaled, expected)
    turns = 8.0 * freqs / (2 * math.pi)
    assert torch.equal(scaled[turns > beta], freqs[turns > beta])  # high frequencies extrapolated
    torch.testing.assert_close(scaled[turns < alpha], freqs[turns < alpha] / 2.5)  # low ones interpolated
    assert torch.equal(yarn_frequencies(-freqs, 2.5, 8.0, alpha, beta), -scaled)  # a sign is kept


def test_both_are_the_identity_at_scale_one():
    freqs = ladder(100.0, 16)
    assert torch.equal(ntk_frequencies(freqs, 1.0, 100.0, 16), freqs)
    assert torch.equal(yarn_frequencies(freqs, 1.0, 8.0), freqs)


def build(name: str, resize: str, grid=(4, 4), **options):
    torch.manual_seed(0)
    return vitpe.pe.build(name, dim=64, heads=2, depth=2, grid=grid, num_prefix_tokens=1, resize=resize, **options)


def states_equal(a, b) -> bool:
    flat = lambda s: [t for part in (s if isinstance(s, tuple) else (s,)) for t in  # noqa: E731
                      (part if isinstance(part, tuple) else (part,))]
    return all(torch.allclose(x, y, atol=1e-6) for x, y in zip(flat(a), flat(b)))


@pytest.mark.parametrize("name", FREQUENCY_PES)
@pytest.mark.parametrize("mode", ["ntk", "yarn"])
def test_at_the_reference_grid_and_below_the_modes_are_extrapolate(name, mode):
    scaled, plain = build(name, mode), build(name, "extrapolate")
    for grid in [(4, 4), (3, 4), (2, 3)]:
        assert states_equal(scaled.prepare(grid), plain.prepare(grid)), grid


@pytest.mark.parametrize("name", FREQUENCY_PES)
@pytest.mark.parametrize("mode", ["ntk", "yarn"])
def test_above_it_they_lie_between_extrapolate_and_interpolate(name, mode):
    grid = (8, 8)
    modes = {m: build(name, m).prepare(grid) for m in ("interpolate", "extrapolate", mode)}
    assert not states_equal(modes[mode], modes["extrapolate"]) and not states_equal(modes[mode], modes["interpolate"])


@pytest.mark.parametrize("name, base_option, pairs", [("sincos", "base", 16), ("rope_axial", "theta", 8),
                                                      ("rope_dinov3", "base", 8)])
def test_ntk_at_twice_the_grid_is_the_pe_with_its_base_raised_as_bloc97_raises_it(name, base_option, pairs):
    """At an 8 x 8 grid (twice the 4 x 4 reference on both axes) ntk is the same PE extrapolated with its base raised
    to ``base * 2^(d / (d - 2))``, d = 2 x the pairs per axis: the scale enters exactly, not only "somewhere between"."""
    ntk = build(name, "ntk")
    base = getattr(ntk, base_option)
    raised = build(name, "extrapolate", **{base_option: base * 2.0 ** (2 * pairs / (2 * pairs - 2))})
    a, b = ntk.prepare((8, 8)), raised.prepare((8, 8))
    flat = lambda s: [t for part in (s if isinstance(s, tuple) else (s,)) for t in  # noqa: E731
                      (part if isinstance(part, tuple) else (part,))]
    for x, y in zip(flat(a), flat(b), strict=True):
        torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-5)


def test_each_axis_is_scaled_by_its_own_factor():
    """rope_axial's x pairs (the first half) rotate with the columns: a grid wider than the reference changes only
    them, a taller one only the y pairs."""
    plain, scaled = build("rope_axial", "extrapolate"), build("rope_axial", "ntk")
    wide = scaled.phases((4, 8)), plain.phases((4, 8))
    assert not torch.allclose(wide[0][:, :8], wide[1][:, :8]) and torch.equal(wide[0][:, 8:], wide[1][:, 8:])
    step_scaled, step_plain = (phases[1, :8] - phases[0, :8] for phases in wide)  # one column right: x's frequencies
    torch.testing.assert_close(step_scaled, ntk_frequencies(step_plain, 2.0, plain.theta, 16))  # x's own scale, 8 / 4
    tall = scaled.phases((8, 4)), plain.phases((8, 4))
    assert torch.equal(tall[0][:, :8], tall[1][:, :8]) and not torch.allclose(tall[0][:, 8:], tall[1][:, 8:])


def test_rope_axial_ntk_is_rope_axial_with_the_raised_base_per_axis():
    pe = build("rope_axial", "ntk")
    count, scale = 8, 2.0  # head dim 32: 8 pairs per axis; the 8 x 8 grid is twice the 4 x 4 reference
    raised = build("rope_axial", "extrapolate", theta=100.0 * scale ** (2 * count / (2 * count - 2)))
    torch.testing.assert_close(pe.phases((8, 8)), raised.phases((8, 8)))


def test_rope_mixed_scales_each_component_of_its_learned_frequencies():
    pe = build("rope_mixed", "ntk")
    freqs = pe.freqs.detach().float()  # (depth, nH, Dh/2, 2): components (x, y)
    grid = (4, 12)  # x three times the reference, y unchanged
    x = ntk_frequencies(freqs[..., 0], 3.0, pe.theta, 16)
    expected = torch.einsum("na,lhja->lhnj", torch.stack(torch.meshgrid(torch.arange(4.0), torch.arange(12.0),
                                                                        indexing="ij"), -1).reshape(-1, 2).flip(-1),
                            torch.stack((x, freqs[..., 1]), -1))
    torch.testing.assert_close(pe.phases(grid).detach(), expected)


@pytest.mark.parametrize("name", ["rope_axial", "rope_mixed", "rope_dinov3"])
def test_yarn_scales_q_and_k_by_its_temperature(name):
    grid = (8, 6)
    t = yarn_temperature(grid, (4, 4))
    assert t == pytest.approx(0.1 * math.log(48 / 16) + 1)
    cos, sin = build(name, "yarn").prepare(grid)
    cos, sin = (cos[0], sin[0]) if isinstance(cos, tuple) else (cos, sin)
    torch.testing.assert_close(cos ** 2 + sin ** 2, torch.full_like(cos, t * t))  # every token, prefix included
    cos, sin = build(name, "ntk").prepare(grid)
    cos, sin = (cos[0], sin[0]) if isinstance(cos, tuple) else (cos, sin)
    torch.testing.assert_close(cos ** 2 + sin ** 2, torch.ones_like(cos))


@pytest.mark.parametrize("name", ["learnable", "cpb", "alibi", "relbias", "peg", "none", "separable"])
def test_a_pe_without_frequencies_refuses_them_in_one_line(name):
    with pytest.raises(ResizeError, match=f"{name} has no frequencies to scale: the ntk resize mode applies to "
                                          "sinusoidal and rotary PEs"):
        build(name, "ntk")
    model = vitpe.ViT(img_size=16, patch_size=4, num_classes=3, dim=32, depth=2, heads=2, pe=name)
    with pytest.raises(ResizeError, match="use interpolate or extrapolate"):
        model.set_pe_resize("yarn")


def test_the_text_model_scales_its_1d_rope_and_sincos():
    for pe in ("rope_axial", "sincos"):
        torch.manual_seed(0)
        model = vitpe.TextClassifier(50, 2, max_len=8, dim=32, depth=1, heads=2, pe=pe).eval()
        tokens, mask = torch.randint(3, 50, (2, 32)), torch.ones(2, 32, dtype=torch.bool)
        outputs = {}
        for mode in ("extrapolate", "ntk", "yarn", "interpolate"):
            model.set_pe_resize(mode)
            outputs[mode] = model(tokens, mask)
        assert all(torch.isfinite(o).all() for o in outputs.values())
        assert not torch.allclose(outputs["ntk"], outputs["extrapolate"])
        assert not torch.allclose(outputs["yarn"], outputs["interpolate"])
        option = {"rope_axial": "theta", "sincos": "base"}[pe]  # 32 tokens are 4x the 8 trained: ntk raises the base
        base = getattr(model.pe, option)
        pairs = model.pe.dim // 2 if pe == "sincos" else model.pe.head_dim // 2
        torch.manual_seed(0)
        raised = vitpe.TextClassifier(50, 2, max_len=8, dim=32, depth=1, heads=2, pe=pe, pe_resize="extrapolate",
                                      pe_options={option: base * 4.0 ** (2 * pairs / (2 * pairs - 2))}).eval()
        raised.load_state_dict(model.state_dict())
        torch.testing.assert_close(raised(tokens, mask), outputs["ntk"], atol=1e-5, rtol=1e-5)


def test_yarn_ramp_options_are_checked():
    with pytest.raises(ValueError, match="yarn_alpha and yarn_beta must satisfy"):
        build("rope_axial", "yarn", yarn_alpha=2.0, yarn_beta=1.0)
    assert build("rope_axial", "yarn", yarn_alpha=1.0, yarn_beta=32.0).yarn_beta == 32.0
