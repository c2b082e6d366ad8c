"""Reference tests: each PE against an independent oracle (timm, Swin's construction, formulas written out here)."""

import itertools
import math

import pytest
import torch
from timm.layers import resample_abs_pos_embed
from timm.layers.pos_embed_rel import gen_relative_position_index

import vitpe.pe
from vitpe.pe.alibi import alibi_slopes
from vitpe.pe.grid import relative_index
from vitpe.pe.t5bias import t5_buckets


def build(name, grid, dim=32, heads=2, depth=2, prefix=0, **kw):
    return vitpe.pe.build(name, dim=dim, heads=heads, depth=depth, grid=grid, num_prefix_tokens=prefix, **kw)


# ------------------------------------------------------------------------------------------------------ sincos
def test_sincos_1d_is_vaswani():
    D, L = 16, 9
    table = build("sincos", (L,), dim=D).prepare((L,))
    for pos, i in itertools.product(range(L), range(D // 2)):
        angle = pos / 10000 ** (2 * i / D)
        assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
        assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


def test_sincos_2d_is_mae_layout_first_half_columns():
    D, gh, gw = 16, 3, 5
    table = build("sincos", (gh, gw), dim=D).prepare((gh, gw))
    q = D // 4
    for (r, c), i in itertools.product(itertools.product(range(gh), range(gw)), range(q)):
        row = table[r * gw + c]
        w = 1 / 10000 ** (i / q)
        assert row[i].item() == pytest.approx(math.sin(c * w), abs=1e-5)  # column (x): sin
        assert row[q + i].item() == pytest.approx(math.cos(c * w), abs=1e-5)  # column (x): cos
        assert row[2 * q + i].item() == pytest.approx(math.sin(r * w), abs=1e-5)  # row (y): sin
        assert row[3 * q + i].item() == pytest.approx(math.cos(r * w), abs=1e-5)  # row (y): cos


def test_sincos_interpolate_samples_the_reference_range_at_cell_centres():
    pe = build("sincos", (4,), dim=8)
    table = pe.prepare((8,))  # twice as many cells: positions (i + 0.5) / 2 - 0.5
    w = 1.0
    assert table[0, 0].item() == pytest.approx(math.sin(-0.25 * w), abs=1e-6)
    assert table[7, 0].item() == pytest.approx(math.sin(3.25 * w), abs=1e-6)


# -------------------------------------------------------------------------------------------- learned tables
@pytest.mark.parametrize("new_grid", [(12, 12), (5, 5), (6, 10), (16, 8)])
def test_learnable_interpolation_matches_timm(new_grid):
    torch.manual_seed(0)
    ref = (8, 8)
    pe = build("learnable", ref, dim=24, prefix=1)
    ours = pe.prepare(new_grid)  # (1 + N, D) with a zero row for the prefix token
    theirs = resample_abs_pos_embed(
        torch.cat([torch.zeros(1, 24), pe.pos_embed.detach()])[None], list(new_grid), list(ref), num_prefix_tokens=1
    )[0]
    assert torch.allclose(ours, theirs, atol=1e-6)


def test_learnable_1d_interpolation_is_linear():
    pe = build("learnable", (4,), dim=2)
    with torch.no_grad():
        pe.pos_embed.copy_(torch.tensor([[0.0, 1.0], [1.0, 1.0], [2.0, 1.0], [3.0, 1.0]]))
    out = pe.prepare((8,))
    # a linear ramp resampled with half-pixel centres stays a ramp inside, clamped at the borders
    expected = torch.tensor([0.0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3.0])
    assert torch.allclose(out[:, 0], expected) and torch.allclose(out[:, 1], torch.ones(8))


def test_learnable_extrapolate_crops_a_smaller_grid():
    pe = build("learnable", (4, 5), resize="extrapolate")
    table = pe.pos_embed.reshape(4, 5, -1)
    assert torch.equal(pe.prepare((2, 3)), table[:2, :3].reshape(6, -1))


def test_separable_sums_row_and_column_tables():
    pe = build("separable", (3, 4))
    table = pe.prepare((3, 4))
    assert torch.allclose(table[1 * 4 + 2], pe.row_embed[1] + pe.col_embed[2])


# ------------------------------------------------------------------------------------------------ relative
@pytest.mark.parametrize("grid", [(4, 4), (3, 5), (7, 2)])
def test_relative_index_matches_swin_and_timm(grid):
    gh, gw = grid
    ours = relative_index(grid)
    assert torch.equal(ours, gen_relative_position_index(grid))
    coords = [(r, c) for r in range(gh) for c in range(gw)]  # Swin's formula, written out
    for i, (ri, ci) in enumerate(coords):
        for j, (rj, cj) in enumerate(coords):
            assert ours[i, j] == (ri - rj + gh - 1) * (2 * gw - 1) + (ci - cj + gw - 1)


def test_relbias_extrapolate_clamps_offsets_to_the_table_edge():
    pe = build("relbias", (3,), resize="extrapolate", depth=1)
    bias = pe.prepare((6,))[0]  # (nH, 6, 6)
    table = pe.relative_bias_table[0]  # (5, nH): offsets -2..2
    assert torch.equal(bias[:, 5, 0], table[4])  # offset +5 clamps to +2
    assert torch.equal(bias[:, 0, 5], table[0])  # offset -5 clamps to -2
    assert torch.equal(bias[:, 3, 2], table[3])  # offset +1 is exact


def test_relbias_scale_keeps_the_initial_bias_and_speeds_up_adam():
    """scale s: the same bias at init (table std init_std / s), then one Adam step moves every bias entry by s * lr."""
    grid, lr = (4, 4), 1e-3
    moves = {}
    for scale in (1.0, 8.0):
        torch.manual_seed(0)
        pe = build("relbias", grid, depth=1, scale=scale)
        before = torch.stack(pe.prepare(grid)).detach()  # (1, nH, 16, 16): the state is a bias per layer
        if scale == 1.0:
            reference = before
        torch.testing.assert_close(before, reference, rtol=1e-5, atol=1e-7)
        optimiser = torch.optim.Adam(pe.parameters(), lr=lr)
        (torch.stack(pe.prepare(grid)) * torch.randn_like(before)).sum().backward()
        optimiser.step()
        moves[scale] = (torch.stack(pe.prepare(grid)).detach() - before).abs().amax().item()
    assert moves[1.0] == pytest.approx(lr, rel=1e-3) and moves[8.0] == pytest.approx(8 * lr, rel=1e-3)
    with pytest.raises(ValueError, match="scale must be positive"):
        build("relbias", grid, depth=1, scale=0)

# ---------------------------------------------------------------------------------------------------- RoPE
def _scores_depend_only_on_offsets(pe, grid):
    torch.manual_seed(0)
    N = math.prod(grid)
    state = pe.prepare(grid)
    q = torch.randn(pe.heads, 1, pe.head_dim).expand(-1, N, -1)  # the same query content at every position
    k = torch.randn(pe.heads, 1, pe.head_dim).expand(-1, N, -1)
    scores = pe.rotate(q, state, 0) @ pe.rotate(k, state, 0).transpose(-1, -2)  # (nH, N, N)
    coords = torch.stack(torch.meshgrid(*[torch.arange(g) for g in grid], indexing="ij"), -1).reshape(N, -1)
    groups = {}
    for i in range(N):
        for j in range(N):
            groups.setdefault(tuple((coords[i] - coords[j]).tolist()), []).append(scores[:, i, j])
    spread = max((torch.stack(v).max(0).values - torch.stack(v).min(0).values).max().item() for v in groups.values())
    distinct = len({round(torch.stack(v)[0, 0].item(), 4) for v in groups.values()})
    return spread, distinct


@pytest.mark.parametrize("name", ["rope_axial", "rope_mixed"])
@pytest.mark.parametrize("grid,ref,mode", [((4, 5), (4, 5), "interpolate"), ((6, 7), (4, 5), "extrapolate"),
                                           ((6, 7), (4, 5), "interpolate"), ((9,), (9,), "interpolate")])
def test_rope_scores_depend_only_on_offsets(name, grid, ref, mode):
    pe = build(name, ref, resize=mode)
    spread, distinct = _scores_depend_only_on_offsets(pe, grid)
    assert spread < 1e-4
    assert distinct > 0.9 * math.prod(2 * g - 1 for g in grid)  # and they do depend on the offset, in every axis


def test_rope_axial_uses_theta_100_in_2d_and_10000_in_1d():
    assert build("rope_axial", (4, 4)).theta == 100.0
    assert build("rope_axial", (16,)).theta == 10000.0
    pe = build("rope_axial", (16,), dim=8, heads=1)  # Dh = 8, 1D: angle of pair k at pos p = p * 10000^(-2k/8)
    state = pe.prepare((16,))
    angle = 3 * 10000 ** (-2 / 8)
    assert state[0][3, 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    x = torch.zeros(1, 1, 16, 8)
    x[..., 2] = 1.0  # the first channel of pair 1, whose partner is channel 3 (interleaved pairs)
    out = pe.rotate(x, state, 0)[0, 0, 3]
    assert out[2].item() == pytest.approx(math.cos(angle), abs=1e-6)
    assert out[3].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert out.abs().sum().item() == pytest.approx(abs(math.cos(angle)) + abs(math.sin(angle)), abs=1e-6)


def test_rope_mixed_init_follows_heo_et_al():
    pe = build("rope_mixed", (4, 4), dim=64, heads=2, depth=3)  # Dh = 32: 16 pairs, 8 magnitudes
    freqs = pe.freqs.detach()  # (depth, nH, Dh/2, 2)
    mags = freqs.norm(dim=-1)
    expected = torch.tensor([10 ** (-4 * k / 32) for k in range(8)])
    assert torch.allclose(mags, torch.cat([expected, expected]).expand_as(mags), atol=1e-6)
    first, second = freqs[..., :8, :], freqs[..., 8:, :]
    assert torch.allclose((first * second).sum(-1), torch.zeros(()), atol=1e-6)  # the two groups are orthogonal
    angles = torch.atan2(freqs[..., 0, 1], freqs[..., 0, 0])  # one random angle per layer and head
    assert angles.unique().numel() == 6


# --------------------------------------------------------------------------------------------------- ALiBi
def test_alibi_slopes_for_8_and_12_heads():
    assert torch.allclose(alibi_slopes(8), torch.tensor([2.0 ** -i for i in range(1, 9)]))
    twelve = [2.0 ** -i for i in range(1, 9)] + [2.0 ** -0.5, 2.0 ** -1.5, 2.0 ** -2.5, 2.0 ** -3.5]
    assert torch.allclose(alibi_slopes(12), torch.tensor(twelve))


def test_alibi_2d_bias_is_minus_slope_times_euclidean_distance():
    pe = build("alibi", (4, 5), dim=16, heads=4)
    bias = pe.prepare((4, 5))
    i, j = 0 * 5 + 0, 3 * 5 + 4  # (0, 0) and (3, 4): distance 5
    assert torch.allclose(bias[:, i, j], -5 * alibi_slopes(4))
    assert torch.equal(bias, bias.transpose(-1, -2))


# ------------------------------------------------------------------------------------------------------ T5
def _t5_oracle(query_minus_key: int, num_buckets=32, max_distance=128) -> int:
    relative_position = -query_minus_key  # T5 measures key minus query
    num_buckets //= 2
    bucket = num_buckets if relative_position > 0 else 0
    n = abs(relative_position)
    max_exact = num_buckets // 2
    if n < max_exact:
        return bucket + n
    large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return bucket + min(large, num_buckets - 1)


def test_t5_bucket_values():
    offsets = torch.arange(-300, 301)
    ours = t5_buckets(offsets)
    assert ours.tolist() == [_t5_oracle(o) for o in offsets.tolist()]
    known = {0: 0, 1: 1, 7: 7, 8: 8, 20: 10, 127: 15, 128: 15, 1000: 15, -1: 17, -8: 24, -1000: 31}
    assert {o: t5_buckets(torch.tensor(o)).item() for o in known} == known


def test_t5_bias_is_shared_across_layers_and_looks_up_buckets():
    pe = build("t5bias", (20,), depth=3)
    state = pe.prepare((20,))
    assert pe.attention_bias(state, 0) is pe.attention_bias(state, 2)
    assert torch.equal(state[:, 15, 3], pe.bucket_bias[t5_buckets(torch.tensor(12))])


# ---------------------------------------------------------------------------------------------------- CPB
def _cpb_log(offset: float, ref: int) -> float:
    u = 8 * offset / (ref - 1)
    return math.copysign(math.log2(1 + abs(u)) / 3, u)


def test_cpb_coordinates_are_log_spaced_and_bias_bounded():
    pe = build("cpb", (8, 8))
    coords = pe.log_coordinates((8, 8)).reshape(15, 15, 2)  # every offset (dy, dx) in [-7, 7]^2
    for dy, dx in [(0, 0), (7, 7), (-3, 5), (1, -7)]:
        assert coords[dy + 7, dx + 7, 0].item() == pytest.approx(_cpb_log(dy, 8), abs=1e-6)
        assert coords[dy + 7, dx + 7, 1].item() == pytest.approx(_cpb_log(dx, 8), abs=1e-6)
    bias = torch.stack(pe.prepare((8, 8)))  # (depth, nH, N, N) from the state's bias per layer
    assert bias.min() >= 0 and bias.max() <= 16


def test_cpb_bias_is_sixteen_sigmoid_of_the_layers_mlp_at_each_pair_of_a_non_square_grid():
    grid = (3, 4)  # the reference grid: u = 8 d / (g - 1) per axis
    pe = build("cpb", grid, depth=2, prefix=1)
    state = pe.prepare(grid)
    cells = list(itertools.product(range(3), range(4)))
    for layer in range(2):
        bias = pe.attention_bias(state, layer)  # (nH, 1 + N, 1 + N)
        assert (bias[:, 0] == 0).all() and (bias[:, :, 0] == 0).all()  # the class token: no bias
        for i, j in [(0, 11), (5, 2), (7, 7), (9, 1)]:
            q, k = cells[i], cells[j]
            v = torch.tensor([_cpb_log(q[a] - k[a], grid[a]) for a in range(2)])  # query minus key
            expected = 16 * torch.sigmoid(pe.mlps[layer](v))  # (nH,)
            torch.testing.assert_close(bias[:, 1 + i, 1 + j], expected, rtol=1e-5, atol=1e-6)


def test_cpb_tables_are_each_layers_mlp():
    """The batched products over the layers compute what each layer's MLP module computes, and train its weights."""
    pe = build("cpb", (4, 4), depth=3)
    coords = pe.log_coordinates((4, 4))  # (T, 2)
    batched = pe.tables(coords)  # (depth, T, nH)
    one_by_one = torch.stack([mlp(coords) for mlp in pe.mlps])
    torch.testing.assert_close(batched, one_by_one, rtol=1e-6, atol=1e-6)
    weights = torch.randn_like(batched)
    grads = torch.autograd.grad((batched * weights).sum(), list(pe.parameters()))
    want = torch.autograd.grad((one_by_one * weights).sum(), list(pe.parameters()))
    for got, expected in zip(grads, want):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_cpb_offsets_in_each_mode():
    pe = build("cpb", (8, 8), resize="extrapolate")
    assert pe.log_coordinates((16, 16)).max().item() == pytest.approx(_cpb_log(15, 8), abs=1e-6)
    pe.resize = "interpolate"  # 16 cells squeezed into 8: offsets shrink by 8 / 16
    assert pe.log_coordinates((16, 16)).max().item() == pytest.approx(_cpb_log(7.5, 8), abs=1e-6)


# ---------------------------------------------------------------------------------------------------- PEG
def test_peg_is_a_depthwise_convolution_on_the_grid():
    pe = build("peg", (3, 4), dim=4, heads=1, prefix=1)
    x = torch.randn(2, 13, 4)
    out = pe.add_to_tokens(x, pe.prepare((3, 4)), 1)
    grid = x[:, 1:].transpose(1, 2).reshape(2, 4, 3, 4)
    expected = torch.nn.functional.conv2d(grid, pe.proj.weight, pe.proj.bias, padding=1, groups=4)
    assert torch.allclose(out[:, 1:], x[:, 1:] + expected.flatten(2).transpose(1, 2), atol=1e-6)
    assert torch.equal(out[:, :1], x[:, :1])


# ---------------------------------------------------------------------------------------------------- bias state
@pytest.mark.parametrize("name", ["relbias", "cpb"])
def test_a_per_layer_bias_state_is_split_once_and_gathers_its_gradient_in_one_stack(name):
    """Indexing a (depth, ...) bias per layer gave each layer's gradient a zero-filled (depth, ...) copy, summed by
    autograd; split once per forward, the layers' gradients meet in one stack."""
    pe = build(name, (4, 4), depth=3)
    state = pe.prepare((4, 4))
    assert isinstance(state, tuple) and len(state) == 3
    assert all(pe.attention_bias(state, layer) is state[layer] for layer in range(3))
    loss = sum((pe.attention_bias(state, layer) * (layer + 1)).sum() for layer in range(3))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        loss.backward()
    names = {event.name for event in prof.events()}
    assert "aten::select_backward" not in names and "aten::stack" in names


@pytest.mark.parametrize("name", ["relbias", "alibi"])
def test_under_autocast_the_bias_is_cast_once_for_every_layer(name):
    pe = build(name, (4, 4), depth=2)
    want = pe.prepare((4, 4))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = pe.prepare((4, 4))
    for layer in range(2):
        bias = pe.attention_bias(got, layer)
        assert bias.dtype == torch.bfloat16
        assert torch.equal(bias, pe.attention_bias(want, layer).to(torch.bfloat16))  # what the attention cast
    assert pe.attention_bias(pe.prepare((4, 4)), 0).dtype == torch.float32  # a cached state stays float32


def test_a_fixed_bias_is_cast_for_autocast_once_not_every_forward():
    pe = build("alibi", (4, 4), depth=2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        first, second = pe.prepare((4, 4)), pe.prepare((4, 4))
    assert first.dtype == torch.bfloat16 and first is second
