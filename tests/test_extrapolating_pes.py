"""The PEs built to extrapolate, each against a plain implementation of its paper's formula written here, cell by
cell: LookHere's fields of view and slopes, FIRE's normalised offsets."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

import vitpe.pe
from vitpe.pe.lookhere import head_slopes

# LookHere's fields of view as the reference code defines them, with v = key - query (rows grow downwards):
# halves see one side of a line, quadrants two, the axis-centred 90-degree wedges |v_side| <= v_forward, and the
# 45-degree wedges an axis-centred wedge cut by one half; boundaries included.
UP, DOWN, LEFT, RIGHT = (lambda v: v[0] <= 0), (lambda v: v[0] >= 0), (lambda v: v[1] <= 0), (lambda v: v[1] >= 0)
TRI_UP, TRI_DOWN = (lambda v: abs(v[1]) <= -v[0]), (lambda v: abs(v[1]) <= v[0])
TRI_LEFT, TRI_RIGHT = (lambda v: abs(v[0]) <= -v[1]), (lambda v: abs(v[0]) <= v[1])


def both(a, b):
    return lambda v: a(v) and b(v)


REFERENCE_VIEWS = {
    "180": [UP, DOWN, LEFT, RIGHT],
    "90": [both(UP, LEFT), both(UP, RIGHT), both(DOWN, LEFT), both(DOWN, RIGHT), TRI_UP, TRI_DOWN, TRI_LEFT, TRI_RIGHT],
    "45": [both(TRI_UP, LEFT), both(TRI_DOWN, LEFT), both(TRI_LEFT, UP), both(TRI_RIGHT, UP),
           both(TRI_UP, RIGHT), both(TRI_DOWN, RIGHT), both(TRI_LEFT, DOWN), both(TRI_RIGHT, DOWN)],
}


def lookhere_by_hand(layout: str, grid, heads: int, undirected: int, depth: int, layer: int, g: float = 1.0):
    """LookHere's bias for block ``layer``, one (head, query, key) at a time: (nH, N, N), masked keys None."""
    views = REFERENCE_VIEWS[layout]
    directed = heads - undirected
    layer_slope = 1.5 + (0.5 - 1.5) * layer / (depth - 1)
    head_slopes = [0.5 * 0.5 ** (h // len(views)) for h in range(directed)] + \
        [0.25 ** (1 + k // max(undirected // 4, 1)) for k in range(undirected)]
    cells = list(itertools.product(range(grid[0]), range(grid[1])))
    out = []
    for h in range(heads):
        rows = []
        for q in cells:
            row = []
            for k in cells:
                v = (k[0] - q[0], k[1] - q[1])
                seen = h >= directed or v == (0, 0) or views[h % len(views)](v)
                row.append(-g * layer_slope * head_slopes[h] * math.dist(q, k) if seen else None)
            rows.append(row)
        out.append(rows)
    return out


@pytest.mark.parametrize("layout", ["180", "90", "45"])
def test_lookhere_is_the_reference_formula_at_a_non_square_grid(layout):
    grid, heads, depth = (3, 5), 12, 3
    pe = vitpe.pe.build("lookhere", dim=12 * 4, heads=heads, depth=depth, grid=grid, num_prefix_tokens=1,
                        layout=layout)
    state = pe.prepare(grid)
    for layer in range(depth):
        bias = pe.attention_bias(state, layer)  # (nH, 1 + N, 1 + N)
        assert (bias[:, 0] == 0).all() and (bias[:, :, 0] == 0).all()  # the class token: unbiased, unmasked
        expected = lookhere_by_hand(layout, grid, heads, heads // 3, depth, layer)
        for h, q, k in itertools.product(range(heads), range(15), range(15)):
            value = bias[h, 1 + q, 1 + k].item()
            if expected[h][q][k] is None:
                assert value < -1e30, (h, q, k)
            else:
                assert value == pytest.approx(expected[h][q][k], rel=1e-6, abs=1e-6), (h, q, k)


def test_a_lookhere_head_sees_exactly_its_field_of_view():
    pe = vitpe.pe.build("lookhere", dim=32, heads=8, depth=1, grid=(5, 7), layout="90", undirected=0)
    seen = pe.visible((5, 7))  # (nH, N, N)
    centre = 2 * 7 + 3  # row 2, column 3
    up_left = seen[0, centre].reshape(5, 7)
    assert up_left.sum() == 3 * 4 and up_left[:3, :4].all()  # rows 0-2, columns 0-3: the quadrant, edges included
    up = seen[4, centre].reshape(5, 7)  # the 90-degree wedge around "up": row 2 sees itself, row 1 three, row 0 five
    assert up.sum(dim=1).tolist() == [5, 3, 1, 0, 0]
    eighths = vitpe.pe.build("lookhere", dim=32, heads=8, depth=1, grid=(5, 7), layout="45", undirected=0)
    wedges = eighths.visible((5, 7))[:, centre]  # (8, N): together they cover the grid, overlapping on their edges
    assert wedges.any(dim=0).all() and (wedges.sum(dim=0) >= 1).all()
    assert wedges[0].reshape(5, 7)[2].tolist() == [False, False, False, True, False, False, False]


def test_lookhere_lowers_its_global_slope_only_at_larger_grids_and_refuses_bad_options():
    pe = vitpe.pe.build("lookhere", dim=32, heads=4, depth=2, grid=(4, 4), undirected=1, large_grid_slope=0.6,
                        resize="extrapolate")
    plain = vitpe.pe.build("lookhere", dim=32, heads=4, depth=2, grid=(4, 4), undirected=1, resize="extrapolate")
    torch.testing.assert_close(pe.attention_bias(pe.prepare((4, 4)), 1), plain.attention_bias(plain.prepare((4, 4)), 1))
    large, reference = pe.attention_bias(pe.prepare((6, 6)), 1), plain.attention_bias(plain.prepare((6, 6)), 1)
    finite = reference > -1e30
    torch.testing.assert_close(large[finite], 0.6 * reference[finite])
    for grid in [(4, 6), (3, 6)]:  # larger along one side is larger: the lower slope there too
        wide, reference = pe.attention_bias(pe.prepare(grid), 0), plain.attention_bias(plain.prepare(grid), 0)
        finite = reference > -1e30
        torch.testing.assert_close(wide[finite], 0.6 * reference[finite])
    torch.testing.assert_close(pe.attention_bias(pe.prepare((3, 3)), 0), plain.attention_bias(plain.prepare((3, 3)), 0))
    for options, message in [({"layout": "60"}, "layout must be one of"), ({"undirected": 5}, "from 0 to 4"),
                             ({"global_slope": -1}, "global_slope must be a positive number"),
                             ({"layer_slopes": [1.0]}, "layer_slopes must be two numbers")]:
        with pytest.raises(ValueError, match=message):
            vitpe.pe.build("lookhere", dim=32, heads=4, depth=2, grid=(4, 4), **options)


@pytest.mark.parametrize("directed, undirected, views, expected", [
    # the reference's tables (get_slopes, get_none_slopes): a second pass through four directions at half the slope;
    # undirected heads 1/4, 1/16, 1/64, 1/256, in groups of heads // 4 beyond four
    (8, 4, 4, [0.5] * 4 + [0.25] * 4 + [0.25, 0.0625, 0.015625, 0.00390625]),
    (8, 8, 8, [0.5] * 8 + [0.25, 0.25, 0.0625, 0.0625, 0.015625, 0.015625, 0.00390625, 0.00390625]),
    (4, 2, 4, [0.5] * 4 + [0.25, 0.0625]),
])
def test_lookhere_head_slopes_are_the_reference_tables(directed, undirected, views, expected):
    assert head_slopes(directed, undirected, views).tolist() == expected


def fire_by_hand(pe, grid, ranges, layer: int):
    """FIRE's bias for block ``layer``, one (query, key) pair at a time from the paper's formula: (nH, N, N)."""
    c, threshold = torch.nn.functional.softplus(pe.c_raw).item(), torch.nn.functional.softplus(pe.threshold_raw).item()
    psi = lambda x: math.log(c * x + 1)  # noqa: E731
    W1, b1, W2, b2 = (p[layer].detach() for p in (pe.first_weight, pe.first_bias, pe.last_weight, pe.last_bias))

    def mlp(u: torch.Tensor) -> torch.Tensor:
        return torch.relu(u @ W1 + b1[0]) @ W2 + b2[0]  # (ndim,) -> (nH,)
    cells = list(itertools.product(*[range(n) for n in grid]))
    out = torch.zeros(pe.heads, len(cells), len(cells))
    for (i, q), (j, k) in itertools.product(enumerate(cells), repeat=2):
        u = []
        for a, n in enumerate(ranges):
            d = q[a] - k[a]
            smooth_max = math.log(math.exp(threshold) + math.exp(n - 1))
            u.append(math.copysign(psi(abs(d)), d) / psi(smooth_max) if d else 0.0)
        out[:, i, j] = mlp(torch.tensor(u))
    return out


@pytest.mark.parametrize("mode", ["interpolate", "extrapolate"])
def test_fire_is_the_paper_formula_per_axis_at_any_grid(mode):
    torch.manual_seed(0)
    pe = vitpe.pe.build("fire", dim=16, heads=2, depth=2, grid=(3, 4), resize=mode, c=0.7, threshold=2.5)
    for grid in [(3, 4), (5, 7), (2, 2)]:
        ranges = grid if mode == "interpolate" else (3, 4)  # interpolate: normalised by this grid's range
        for layer in range(2):
            torch.testing.assert_close(pe.attention_bias(pe.prepare(grid), layer), fire_by_hand(pe, grid, ranges, layer),
                                       rtol=1e-5, atol=1e-5)


def test_fire_interpolating_maps_a_larger_grid_into_the_trained_range_and_refuses_bad_options():
    pe = vitpe.pe.build("fire", dim=16, heads=2, depth=1, grid=(4,), threshold=1.0)
    with torch.no_grad():
        pe.first_weight.fill_(1.0), pe.first_bias.zero_(), pe.last_weight.fill_(1.0), pe.last_bias.zero_()
    corner = pe.attention_bias(pe.prepare((4,)), 0)[0, -1, 0].item()  # the farthest offset at the trained length
    longer = pe.attention_bias(pe.prepare((16,)), 0)[0, -1, 0].item()  # ... and at 4x that length, interpolated
    assert corner > 0 and longer == pytest.approx(corner, rel=0.15)  # mapped back near the trained range
    pe.resize = "extrapolate"
    assert pe.attention_bias(pe.prepare((16,)), 0)[0, -1, 0].item() > 1.5 * longer
    for options, message in [({"hidden": 0}, "hidden must be a whole number"), ({"c": 0}, "c must be a positive"),
                             ({"threshold": -2}, "threshold must be a positive")]:
        with pytest.raises(ValueError, match=message):
            vitpe.pe.build("fire", dim=16, heads=2, depth=1, grid=(4, 4), **options)


def dense_generators(pe) -> torch.Tensor:
    """A generator RoPE's generators as dense (depth, nH, ndim, Dh, Dh) matrices, assembled block by block here."""
    A = pe.generators().detach()  # (depth, nH, ndim, Dh/b, b, b)
    depth, heads, ndim, blocks, b, _ = A.shape
    dense = torch.zeros(depth, heads, ndim, blocks * b, blocks * b)
    for k in range(blocks):
        dense[..., k * b:(k + 1) * b, k * b:(k + 1) * b] = A[:, :, :, k]
    return dense


def rotated_by_hand(pe, x: torch.Tensor, grid, layer: int) -> torch.Tensor:
    """``x`` (nH, P + N, Dh) rotated by ``exp(sum_a p_a A_a)`` computed densely, one cell at a time."""
    A = dense_generators(pe)[layer]  # (nH, ndim, Dh, Dh)
    cells = list(itertools.product(*[range(n) for n in grid]))
    out = x.clone()
    for h in range(pe.heads):
        for i, cell in enumerate(cells):
            exponent = sum(cell[a] / pe.grid[a] * A[h, a] for a in range(len(grid)))
            out[h, pe.num_prefix_tokens + i] = torch.linalg.matrix_exp(exponent) @ x[h, pe.num_prefix_tokens + i]
    return out


@pytest.mark.parametrize("name, options", [("liere", {}), ("comrope", {"form": "ap"}), ("comrope", {"form": "ld"}),
                                           ("liere", {"block_size": 16})])
def test_generator_ropes_rotate_by_the_exponential_of_their_skew_symmetric_generators(name, options):
    torch.manual_seed(0)
    pe = vitpe.pe.build(name, dim=64, heads=2, depth=2, grid=(3, 4), num_prefix_tokens=1, init_std=0.5, **options)
    A = dense_generators(pe)
    torch.testing.assert_close(A, -A.transpose(-1, -2))  # skew-symmetric, so every rotation is orthogonal
    x = torch.randn(2, 1 + 12, 32)
    state = pe.prepare((3, 4))
    for layer in range(2):
        rotated = pe.rotate(x, state, layer)
        torch.testing.assert_close(rotated, rotated_by_hand(pe, x, (3, 4), layer), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1), rtol=1e-5, atol=1e-5)  # orthogonal
        assert torch.equal(rotated[:, 0], x[:, 0])  # the class token is not rotated
    commute = A[..., 0, :, :] @ A[..., 1, :, :] - A[..., 1, :, :] @ A[..., 0, :, :]
    assert (commute.abs().max() < 1e-5) == (name == "comrope")  # ComRoPE's generators commute, LieRE's do not


def shifted_scores(pe, shift: tuple[float, float]) -> torch.Tensor:
    """Block 0's scores q_i . k_j over a 3 x 4 grid, with every position moved by ``shift`` (in cells)."""
    torch.manual_seed(1)
    q, k = torch.randn(2, pe.heads, 12, pe.head_dim)
    positions = torch.tensor(list(itertools.product(range(3), range(4))), dtype=torch.float32) + torch.tensor(shift)
    side = torch.tensor(pe.grid, dtype=torch.float32)
    R = pe.rotations(positions / side)[0]  # (nH, N, Dh/b, b, b)
    from vitpe.pe.generator_rope import rotate_blocks

    return rotate_blocks(q, R) @ rotate_blocks(k, R).transpose(-1, -2)


@pytest.mark.parametrize("form", ["ap", "ld"])
def test_comrope_is_relative_and_liere_is_not(form):
    torch.manual_seed(0)
    comrope = vitpe.pe.build("comrope", dim=64, heads=2, depth=1, grid=(3, 4), form=form)
    torch.testing.assert_close(shifted_scores(comrope, (0.0, 0.0)), shifted_scores(comrope, (2.5, -1.0)),
                               rtol=1e-4, atol=1e-4)
    liere = vitpe.pe.build("liere", dim=64, heads=2, depth=1, grid=(3, 4))
    assert not torch.allclose(shifted_scores(liere, (0.0, 0.0)), shifted_scores(liere, (2.5, -1.0)), atol=1e-2)


def test_generator_ropes_refuse_bad_options():
    for name, options, message in [("liere", {"block_size": 3}, "block_size must be a whole number >= 2 dividing"),
                                   ("comrope", {"form": "xy"}, "form must be 'ap'"),
                                   ("comrope", {"form": "ap", "block_size": 32}, "divisible by 2"),
                                   ("liere", {"init_std": -1}, "init_std must be >= 0")]:
        with pytest.raises(ValueError, match=message):
            vitpe.pe.build(name, dim=64, heads=2, depth=1, grid=(3, 4), **options)


def test_string_is_rope_after_a_cayley_orthogonal_change_of_basis():
    torch.manual_seed(0)
    string = vitpe.pe.build("string", dim=64, heads=2, depth=2, grid=(3, 4), num_prefix_tokens=1)
    axial = vitpe.pe.build("rope_axial", dim=64, heads=2, depth=2, grid=(3, 4), num_prefix_tokens=1)
    x = torch.randn(2, 13, 32)
    torch.testing.assert_close(string.rotate(x, string.prepare((3, 4)), 1), axial.rotate(x, axial.prepare((3, 4)), 1))
    with torch.no_grad():
        string.weight.normal_(0, 0.3)  # as if trained
    state = string.prepare((3, 4))
    W = string.weight[1].detach()
    S = W - W.transpose(-1, -2)
    eye = torch.eye(32)
    P = torch.linalg.inv(eye + S) @ (eye - S)  # (nH, Dh, Dh), the Cayley transform written out
    torch.testing.assert_close(P @ P.transpose(-1, -2), eye.expand(2, 32, 32), rtol=1e-5, atol=1e-5)
    expected = axial.rotate((P[:, None] @ x.unsqueeze(-1)).squeeze(-1), axial.prepare((3, 4)), 1)
    torch.testing.assert_close(string.rotate(x, state, 1), expected, rtol=1e-5, atol=1e-5)
    q, k = string.rotate(x, state, 1)[:, 1:], string.rotate(x.flip(1), state, 1)[:, 1:]
    scores = q @ k.transpose(-1, -2)  # relative: the same offset gives the same score for the same q, k vectors
    Pq, Pk = (P[:, None] @ x[:, 1:].unsqueeze(-1)).squeeze(-1), (P[:, None] @ x.flip(1)[:, 1:].unsqueeze(-1)).squeeze(-1)
    plain = axial.rotate(torch.cat([x[:, :1], Pq], 1), axial.prepare((3, 4)), 1)[:, 1:] @ \
        axial.rotate(torch.cat([x[:, :1], Pk], 1), axial.prepare((3, 4)), 1)[:, 1:].transpose(-1, -2)
    torch.testing.assert_close(scores, plain, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["interpolate", "extrapolate"])
def test_pape_adds_its_parabolas_to_the_logits_through_wider_q_and_k(mode):
    torch.manual_seed(0)
    pe = vitpe.pe.build("pape", dim=32, heads=2, depth=2, grid=(3, 4), num_prefix_tokens=1, parabolas=5, resize=mode)
    with torch.no_grad():
        pe.curvature.normal_(0, 0.3), pe.slope.normal_(0, 0.3)  # as if trained: content matters
    grid, layer = (4, 6), 1
    cells = list(itertools.product(range(grid[0]), range(grid[1])))
    q, k, v = torch.randn(3, 2, 2, 1 + len(cells), 16)  # (B, nH, T, Dh)
    wide_q, wide_k, same_v = pe.rotate_qkv(torch.stack([q, k, v]), pe.prepare(grid), layer)
    logits = wide_q @ wide_k.transpose(-1, -2) / wide_q.shape[-1] ** 0.5  # what attention computes
    scale = [3 / 4, 4 / 6] if mode == "interpolate" else [1.0, 1.0]  # cells to reference cells
    pos = [None] + [((r + 0.5) * scale[0] - 0.5 if mode == "interpolate" else r,
                     (c + 0.5) * scale[1] - 0.5 if mode == "interpolate" else c) for r, c in cells]
    W, U, V = pe.directions[layer].detach(), pe.curvature[layer].detach(), pe.slope[layer].detach()
    for b, h in itertools.product(range(2), range(2)):
        for i, j in itertools.product(range(1 + len(cells)), repeat=2):
            expected = (q[b, h, i] @ k[b, h, j]).item() / 4  # sqrt(Dh) = 4
            if i and j:
                a = torch.nn.functional.softplus(q[b, h, i] @ U[h])  # (M,)
                slope = q[b, h, i] @ V[h]
                d = torch.tensor([(pos[i][0] - pos[j][0]) / 3, (pos[i][1] - pos[j][1]) / 4])  # reference-side units
                along = W[h] @ d  # (M,): w_m . d
                expected += (-(a * along ** 2) + slope * along).sum().item()
            assert logits[b, h, i, j].item() == pytest.approx(expected, abs=2e-4), (b, h, i, j)
    assert torch.equal(same_v, v)
    with pytest.raises(ValueError, match="parabolas must be a whole number"):
        vitpe.pe.build("pape", dim=32, heads=2, depth=1, grid=(3, 4), parabolas=0)
    with pytest.raises(NotImplementedError, match=r"call rotate_qk\(q, k, state, layer\)"):
        pe.rotate(q, pe.prepare(grid), 0)
    composed = vitpe.pe.build("rope_axial+pape", dim=32, heads=2, depth=2, grid=(3, 4), num_prefix_tokens=1)
    axial, alone = composed.members["rope_axial"], composed.members["pape"]
    state = composed.prepare(grid)
    rotated = [axial.rotate(t, state[0], layer) for t in (q, k)]  # RoPE first, then PaPE's channels on top
    for ours, theirs in zip(composed.rotate_qkv(torch.stack([q, k, v]), state, layer),
                            alone.rotate_qkv(torch.stack([*rotated, v]), state[1], layer)):
        torch.testing.assert_close(ours, theirs)


def test_generator_rotations_are_computed_once_per_grid_in_evaluation_and_again_after_a_step():
    pe = vitpe.pe.build("comrope", dim=64, heads=2, depth=1, grid=(3, 4)).eval()
    with torch.no_grad():
        first = pe.prepare((3, 4))
        assert pe.prepare((3, 4)) is first  # cached
        pe.weight.add_(0.1)  # an optimiser step: the version counter moves
        moved = pe.prepare((3, 4))
    assert moved is not first and not torch.allclose(moved[0], first[0])
    torch.testing.assert_close(moved[0], pe.train().prepare((3, 4))[0].detach())  # the same rotations as training's


@pytest.mark.parametrize("form", ["ap", "ld"])
def test_comrope_factored_by_axis_equals_the_exponential_of_the_sum_with_its_gradient(form):
    """ComRoPE takes an exponential per distinct coordinate of an axis and multiplies them: at jittered, off-grid
    positions (coordinate augmentation) its rotations and their gradients equal exp(sum_a p_a A_a) taken per cell."""
    from vitpe.pe.generator_rope import GeneratorRope

    torch.manual_seed(0)
    pe = vitpe.pe.build("comrope", dim=64, heads=2, depth=2, grid=(3, 4), form=form, init_std=0.7)
    grid = torch.tensor(list(itertools.product(range(3), range(4))), dtype=torch.float32) / torch.tensor([3.0, 4.0])
    positions = grid * 1.3 + torch.tensor([0.2, -0.1])  # a rescaled, shifted grid: 3 + 4 distinct coordinates
    weights = torch.randn(2, 2, 12, pe.blocks, pe.block_size, pe.block_size)
    factored = pe.rotations(positions)
    (grad_factored,) = torch.autograd.grad((factored * weights).sum(), pe.weight)
    direct = GeneratorRope.rotations(pe, positions)
    (grad_direct,) = torch.autograd.grad((direct * weights).sum(), pe.weight)
    torch.testing.assert_close(factored, direct, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad_factored, grad_direct, rtol=1e-4, atol=1e-4)
