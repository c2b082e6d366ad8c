"""The PE contract, checked for every registered encoding on every grid it supports."""

import math

import pytest
import torch
from conftest import DEPTH, DIM, HEADS, PREFIX, Encoder, case_id, cases, make_pe, tokens

import vitpe.pe

CASES = cases()
LEARNED_ABSOLUTE = {"learnable", "separable"}


def other_grids(ndim):
    return {1: [(4,), (12,)], 2: [(2, 3), (7, 9), (6, 3), (4, 8)]}[ndim]


def larger(grid, ref):
    return any(g > r for g, r in zip(grid, ref))


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_hook_shapes_match_the_site(case):
    name, ndim = case
    pe = make_pe(name, ndim)
    state = pe.prepare(pe.grid)
    tokens_in = tokens(pe.grid)
    T = tokens_in.shape[1]
    assert pe.add_to_tokens(tokens_in, state, 0).shape == tokens_in.shape
    qk = torch.randn(2, 3, HEADS, T, DIM // HEADS)
    if pe.widens_qk:  # q and k gain channels, the prefix tokens zeros there; v keeps its own
        q, k, v = pe.rotate_qkv(torch.stack([qk, qk, qk]), state, 0)
        assert q.shape == k.shape and q.shape[:-1] == qk.shape[:-1] and q.shape[-1] > qk.shape[-1] and torch.equal(v, qk)
        assert (q[..., :PREFIX, qk.shape[-1]:] == 0).all() and (k[..., :PREFIX, qk.shape[-1]:] == 0).all()
        assert pe.attention_bias(state, 0) is None
        return
    rotated = pe.rotate(qk, state, 0)
    assert rotated.shape == qk.shape
    bias = pe.attention_bias(state, 0)
    if pe.site == "logits":
        assert bias.shape == (HEADS, T, T)
        assert torch.all(bias[:, :PREFIX] == 0) and torch.all(bias[:, :, :PREFIX] == 0)  # prefix gets no bias
    else:
        assert bias is None
    if pe.site == "qk":
        assert torch.equal(rotated[..., :PREFIX, :], qk[..., :PREFIX, :])  # prefix tokens are not rotated
        assert not torch.allclose(rotated, qk)
    else:
        assert torch.equal(rotated, qk)
    if pe.site == "tokens":
        moved = [pe.add_to_tokens(tokens_in, state, layer) for layer in range(pe.depth)]
        assert sum(not torch.equal(m, tokens_in) for m in moved) == 1  # acts before exactly one block
        changed = next(m for m in moved if not torch.equal(m, tokens_in))
        assert torch.equal(changed[:, :PREFIX], tokens_in[:, :PREFIX])  # prefix tokens untouched


@pytest.mark.parametrize("case", [c for c in CASES if c[0] != "none" and vitpe.pe.get(c[0]).site != "logits"],
                         ids=case_id)
def test_a_hook_given_other_tokens_than_its_state_says_why(case):
    """In a model of one's own, a PE built without the class token (num_prefix_tokens=0) meets P + N tokens: the
    error names the count it expected and the option to fix, where broadcasting would say 'size of tensor a'."""
    name, ndim = case
    pe = make_pe(name, ndim, num_prefix_tokens=0)
    state = pe.prepare(pe.grid)
    one_more = tokens(pe.grid)  # the class token in front of the grid's N tokens
    hint = rf"has {one_more.shape[1]} tokens, but the state was prepared for {one_more.shape[1] - 1} .*num_prefix_tokens"
    with pytest.raises(ValueError, match=f"^{name}: .*{hint}"):
        if pe.site == "tokens":
            for layer in range(pe.depth):
                pe.add_to_tokens(one_more, state, layer)
        elif pe.widens_qk:
            pe.rotate_qkv(torch.randn(3, 2, HEADS, one_more.shape[1], DIM // HEADS), state, 0)
        else:
            pe.rotate(torch.randn(2, HEADS, one_more.shape[1], DIM // HEADS), state, 0)
    if pe.site == "qk":
        qkv = torch.randn(3, 2, HEADS, one_more.shape[1], DIM // HEADS)
        with pytest.raises(ValueError, match=hint):
            pe.rotate_qkv(qkv, state, 0)


@pytest.mark.parametrize("name", ["rope_mixed", "relbias", "cpb"])
def test_a_per_block_pe_asked_for_a_block_it_lacks_says_so(name):
    pe = make_pe(name, 2)
    state = pe.prepare(pe.grid)
    with pytest.raises(IndexError, match=f"block {DEPTH} does not exist in a PE built with depth={DEPTH}"):
        if pe.site == "qk":
            pe.rotate(torch.randn(2, HEADS, tokens(pe.grid).shape[1], DIM // HEADS), state, DEPTH)
        else:
            pe.attention_bias(state, DEPTH)


@pytest.mark.parametrize("prefix", [PREFIX, 0], ids=["prefix token", "no prefix"])
@pytest.mark.parametrize("case", [c for c in CASES if vitpe.pe.get(c[0]).site == "logits"], ids=case_id)
def test_an_attention_bias_is_contiguous(case, prefix):
    # a strided bias (a gathered table has its heads innermost) makes SDPA's fused CPU kernel copy the stride-0
    # batch view of it into a whole (B, nH, T, T) mask in the forward and again in the backward
    pe = make_pe(*case, num_prefix_tokens=prefix)
    state = pe.prepare(pe.grid)
    assert all(pe.attention_bias(state, layer).is_contiguous() for layer in range(DEPTH))


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_gradients_reach_every_parameter(case):
    name, ndim = case
    encoder = Encoder(make_pe(name, ndim))
    encoder(tokens(encoder.pe.grid), encoder.pe.grid).square().mean().backward()
    for pname, param in encoder.pe.named_parameters():
        assert param.grad is not None, pname
        assert torch.isfinite(param.grad).all() and param.grad.abs().sum() > 0, pname


def encoding(pe: vitpe.pe.PositionEncoding, grid) -> torch.Tensor:
    """What ``pe`` does at each cell of ``grid``, laid out on the grid: the vector added to a token (tokens site),
    a fixed vector as rotated at each cell (q,k site: (nH, *grid, Dh)), or the bias between every pair of cells
    (logits site: (nH, *grid, *grid)). Block 0; prefix tokens left out."""
    state = pe.prepare(grid)
    cells = math.prod(grid)
    if pe.site == "tokens":
        added = pe.add_to_tokens(torch.zeros(1, PREFIX + cells, DIM), state, 0)[0, PREFIX:]  # (N, D)
        return added.reshape(*grid, DIM)
    if pe.widens_qk:  # the bias the widened q and k carry for one fixed q and k vector, as a logits-site PE's
        vector = torch.randn(DIM // HEADS, generator=torch.Generator().manual_seed(3)).expand(1, HEADS, PREFIX + cells, -1)
        q, k, _ = pe.rotate_qkv(torch.stack([vector] * 3), state, 0)  # (1, nH, P + N, E)
        scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5 - vector @ vector.transpose(-1, -2) / (DIM // HEADS) ** 0.5
        return scores[0, :, PREFIX:, PREFIX:].reshape(HEADS, *grid, *grid)
    if pe.site == "qk":
        vector = torch.randn(DIM // HEADS, generator=torch.Generator().manual_seed(3))
        rotated = pe.rotate(vector.expand(1, HEADS, PREFIX + cells, -1), state, 0)[0, :, PREFIX:]  # (nH, N, Dh)
        return rotated.reshape(HEADS, *grid, -1)
    bias = pe.attention_bias(state, 0)[:, PREFIX:, PREFIX:]  # (nH, N, N)
    return bias.reshape(HEADS, *grid, *grid)


def encoded_site(pe: vitpe.pe.PositionEncoding) -> str:
    """How :func:`encoding` lays out what ``pe`` does: a PE that widens q and k as a bias (logits), else its site."""
    return "logits" if pe.widens_qk else pe.site


def corner(enc: torch.Tensor, site: str, grid) -> torch.Tensor:
    """The part of ``enc`` (:func:`encoding`) that lies on the first cells of each axis, a ``grid`` of them."""
    cells = tuple(slice(0, g) for g in grid)
    if site == "tokens":
        return enc[cells]
    if site == "qk":
        return enc[(slice(None), *cells)]
    return enc[(slice(None), *cells, *cells)]


GEOMETRIC = [c for c in CASES if c[0] not in ("none", "peg")]  # none has no positions, peg reads the tokens


@pytest.mark.parametrize("case", GEOMETRIC, ids=case_id)
def test_extrapolating_to_a_smaller_grid_is_the_reference_encoding_cut_to_it(case):
    name, ndim = case
    pe = make_pe(name, ndim, resize="extrapolate")
    reference = encoding(pe, pe.grid)
    for grid in other_grids(ndim):
        if not larger(grid, pe.grid):
            torch.testing.assert_close(encoding(pe, grid), corner(reference, encoded_site(pe), grid), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", GEOMETRIC, ids=case_id)
def test_extrapolating_to_a_larger_grid_keeps_the_reference_encoding_in_its_corner(case):
    name, ndim = case
    pe = make_pe(name, ndim, resize="extrapolate")
    reference = encoding(pe, pe.grid)
    for grid in other_grids(ndim):
        if not larger(grid, pe.grid):
            continue
        if name in LEARNED_ABSOLUTE:  # no learned positions beyond the table: the error names the mode that works
            with pytest.raises(vitpe.pe.ResizeError, match="interpolate"):
                pe.prepare(grid)
            continue
        grown = grid if all(g >= r for g, r in zip(grid, pe.grid)) else tuple(map(max, grid, pe.grid))
        torch.testing.assert_close(corner(encoding(pe, grown), encoded_site(pe), pe.grid), reference, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["interpolate", "extrapolate"])
@pytest.mark.parametrize("case", [c for c in GEOMETRIC if vitpe.pe.get(c[0]).site == "logits"], ids=case_id)
def test_a_bias_depends_only_on_the_offset_at_every_grid_in_both_modes(case, mode):
    name, ndim = case
    pe = make_pe(name, ndim, resize=mode)
    for grid in [pe.grid, *other_grids(ndim)]:
        bias = pe.attention_bias(pe.prepare(grid), 0)[:, PREFIX:, PREFIX:]  # (nH, N, N)
        coords = torch.stack(torch.meshgrid(*[torch.arange(g) for g in grid], indexing="ij"), -1).reshape(-1, ndim)
        offsets = (coords[:, None] - coords[None]).reshape(-1, ndim)  # (N * N, ndim), query minus key
        flat = bias.reshape(HEADS, -1)
        for offset in offsets.unique(dim=0):
            same = flat[:, (offsets == offset).all(-1)]  # every pair of cells at this offset
            torch.testing.assert_close(same, same[:, :1].expand_as(same), rtol=1e-5, atol=1e-6)
        assert torch.isfinite(bias).all()


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_the_encoder_runs_at_other_grids_in_interpolate_mode(case):
    name, ndim = case
    encoder = Encoder(make_pe(name, ndim, resize="interpolate"))
    for grid in other_grids(ndim):
        x = tokens(grid)
        out = encoder(x, grid)
        assert out.shape == x.shape and torch.isfinite(out).all(), grid


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_both_modes_are_the_untouched_pe_at_the_reference_grid(case):
    name, ndim = case
    encoder = Encoder(make_pe(name, ndim, resize="interpolate"))
    x = tokens(encoder.pe.grid)
    first = encoder(x, encoder.pe.grid)
    encoder.pe.resize = "extrapolate"
    assert torch.equal(first, encoder(x, encoder.pe.grid))


@pytest.mark.parametrize("case", [c for c in CASES if c[0] not in ("none", "peg")], ids=case_id)
def test_modes_differ_away_from_the_reference_grid(case):
    name, ndim = case  # none and peg have no position geometry to resize
    grid = other_grids(ndim)[0]  # smaller: every PE can do both modes there
    encoder = Encoder(make_pe(name, ndim))
    x = tokens(grid)
    interpolated = encoder(x, grid)
    encoder.pe.resize = "extrapolate"
    assert not torch.allclose(interpolated, encoder(x, grid))


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_state_dict_round_trip(case):
    name, ndim = case
    source, target = make_pe(name, ndim, seed=1), make_pe(name, ndim, seed=2)
    target.load_state_dict(source.state_dict())
    for key, value in source.state_dict().items():
        assert torch.equal(value, target.state_dict()[key]), key
    x = tokens(source.grid)
    assert torch.equal(Encoder(source)(x, source.grid), Encoder(target)(x, target.grid))


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_state_dict_loads_across_grids(case):
    name, ndim = case
    new_grid = other_grids(ndim)[1]
    source = make_pe(name, ndim, seed=1)
    target = make_pe(name, ndim, grid=new_grid, seed=2)
    target.load_state_dict(source.state_dict())  # strict: every tensor fits after resampling
    assert tuple(target.reference_grid.tolist()) == new_grid
    # learned tables arrive resampled exactly as interpolate mode resamples them on the fly
    expected, got = source.prepare(new_grid), target.prepare(new_grid)
    if name in LEARNED_ABSOLUTE | {"relbias"}:  # relbias's state: a bias per layer
        assert torch.allclose(*(torch.stack(s) if name == "relbias" else s for s in (expected, got)), atol=1e-6)
    for key, value in source.state_dict().items():  # parameters that do not live on a grid arrive unchanged
        if key != "reference_grid" and value.shape == target.state_dict()[key].shape and \
                name not in LEARNED_ABSOLUTE | {"relbias"}:
            assert torch.equal(value, target.state_dict()[key]), key


def test_loading_a_1d_state_into_a_2d_encoding_is_an_error():
    source, target = make_pe("learnable", 1), make_pe("learnable", 2)
    with pytest.raises(RuntimeError, match="1D grid"):
        target.load_state_dict(source.state_dict())


@pytest.mark.parametrize("name", ["sincos", "rope_axial", "alibi"])
def test_fixed_tables_are_cached_per_grid_and_follow_the_device(name):
    pe = make_pe(name, 2)
    assert pe.prepare((4, 5)) is pe.prepare((4, 5))  # built once
    assert pe.prepare((6, 3)) is not pe.prepare((4, 5))
    pe.to("meta")
    state = pe.prepare((4, 5))
    tensors = state if isinstance(state, tuple) else (state,)
    assert all(t.device.type == "meta" for t in tensors)


@pytest.mark.parametrize("name", ["relbias", "cpb", "rope_mixed", "learnable"])
def test_learned_state_is_recomputed_every_forward(name):
    pe = make_pe(name, 2)
    before = pe.prepare(pe.grid)
    with torch.no_grad():
        for p in pe.parameters():
            p.add_(0.5)
    after = pe.prepare(pe.grid)
    while isinstance(before, tuple):  # a state may be a tuple (rotary: cos, sin), of tuples (per layer)
        before, after = before[0], after[0]
    assert not torch.allclose(before, after)


def test_no_weight_decay_names_exist():
    for name, ndim in CASES:
        pe = make_pe(name, ndim)
        params = dict(pe.named_parameters())
        assert pe.no_weight_decay() <= set(params), name
    assert make_pe("rope_mixed", 2).no_weight_decay() == {"freqs"}
    assert math.prod(make_pe("relbias", 2).relative_bias_table.shape[1:2]) == 7 * 9


def test_relbias_class_entries_fill_the_class_row_and_column():
    pe = make_pe("relbias", 2, class_bias=True)
    with torch.no_grad():
        pe.class_bias_table.copy_(torch.arange(3 * 3 * HEADS, dtype=torch.float32).view(3, 3, HEADS))
    plain = make_pe("relbias", 2)
    plain.load_state_dict({k: v for k, v in pe.state_dict().items() if k != "class_bias_table"})
    for layer in range(3):
        bias, patches = pe.attention_bias(pe.prepare((4, 5)), layer), plain.attention_bias(plain.prepare((4, 5)), layer)
        entries = pe.class_bias_table[layer]  # (3, nH)
        assert torch.equal(bias[:, 0, 1:], entries[0, :, None].expand(-1, 20))  # class query -> patch keys
        assert torch.equal(bias[:, 1:, 0], entries[1, :, None].expand(-1, 20))  # patch queries -> class key
        assert torch.equal(bias[:, 0, 0], entries[2])
        assert torch.equal(bias[:, 1:, 1:], patches[:, 1:, 1:])  # the offsets' bias is untouched
    encoder = Encoder(pe)
    encoder(tokens((4, 5)), (4, 5)).square().mean().backward()
    assert pe.class_bias_table.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="exactly one prefix token"):
        vitpe.pe.build("relbias", dim=DIM, heads=HEADS, depth=3, grid=(4, 5), num_prefix_tokens=2, class_bias=True)
