"""ViTAR's fuzzy positions for ``learnable``: the table read between its cells in training (each position moved by its
own offset within ``fuzzy`` cells, after DINOv3's moves of the whole grid), the table as it is in eval mode, the same
draws after a reseed, a gradient for every cell read, and the table's limits kept."""

import pytest
import torch

import vitpe.pe
from vitpe.pe.base import ResizeError
from vitpe.pe.resample import sample_table


def position_table(grid: tuple[int, ...]) -> torch.Tensor:
    """A table whose channels are the cell's own coordinates: (*grid, ndim)."""
    axes = torch.meshgrid(*[torch.arange(float(n)) for n in grid], indexing="ij")
    return torch.stack(axes, dim=-1)


@pytest.mark.parametrize("grid", [(5,), (4, 6)])
def test_a_table_read_at_positions_gives_the_positions_inside_it_and_its_edge_beyond(grid):
    table = position_table(grid)
    cells = table.reshape(-1, len(grid))
    torch.testing.assert_close(sample_table(table, cells), cells)  # at the cells: the cells' entries
    between = cells[(cells < torch.tensor(grid) - 1).all(-1)] + 0.25  # inside the last cell centres
    torch.testing.assert_close(sample_table(table, between), between)  # linear along each axis
    beyond = torch.tensor([[-3.0] * len(grid), [n + 4.0 for n in grid]])
    edges = torch.tensor([[0.0] * len(grid), [n - 1.0 for n in grid]])
    torch.testing.assert_close(sample_table(table, beyond), edges)


def test_a_read_sends_the_gradient_to_the_two_neighbouring_cells():
    table = torch.zeros(5, 3, requires_grad=True)
    sample_table(table, torch.tensor([[1.25]])).sum().backward()
    torch.testing.assert_close(table.grad[:, 0], torch.tensor([0.0, 0.75, 0.25, 0.0, 0.0]))


def test_a_table_read_at_positions_of_the_wrong_shape_is_one_clear_error():
    with pytest.raises(ValueError, match="a 1D or 2D table and one column per axis"):
        sample_table(torch.zeros(4, 6, 8), torch.zeros(3, 1))


def build(grid=(4, 6), **options):
    torch.manual_seed(0)
    pe = vitpe.pe.build("learnable", dim=2, heads=1, depth=1, grid=grid, num_prefix_tokens=0, **options)
    with torch.no_grad():
        pe.pos_embed.copy_(position_table(grid).reshape(-1, len(grid)))  # each entry its own cell: (N, 2)
    return pe


def test_fuzzy_positions_move_each_cell_by_at_most_fuzzy_in_training_only():
    pe, cells = build(fuzzy=0.5), position_table((4, 6)).reshape(-1, 2)
    torch.testing.assert_close(pe.eval().prepare((4, 6)), cells)
    read = torch.stack([pe.train().prepare((4, 6)) for _ in range(200)])  # (draws, N, 2)
    moved = read - cells
    assert moved.abs().max() <= 0.5 + 1e-6  # clamped at the edges, so never more than the offset
    inner = (cells[:, 0] > 0) & (cells[:, 0] < 3) & (cells[:, 1] > 0) & (cells[:, 1] < 5)
    assert moved[:, inner].abs().max() > 0.45 and moved[:, inner].mean().abs() < 0.05  # uniform in [-0.5, 0.5]
    own = moved[:, inner]  # (draws, inner cells, 2): no clamping there, so the offsets as drawn
    assert own.std(dim=1).mean() > 0.2  # within one draw the cells move apart: not one offset for the grid
    assert (own[..., 0] - own[..., 1]).abs().mean() > 0.2  # nor one offset for both axes of a cell
    assert (own.std(dim=0) > 0.2).all()  # each cell moves anew with each draw (uniform: std 0.29)


def test_fuzzy_positions_are_seeded_and_reach_every_cell_with_a_gradient():
    pe = build(fuzzy=0.5).train()
    torch.manual_seed(7)
    first = pe.prepare((4, 6))
    torch.manual_seed(7)
    assert torch.equal(first, pe.prepare((4, 6)))
    first.sum().backward()
    assert (pe.pos_embed.grad != 0).all()


def test_a_smaller_training_grid_is_read_where_the_resize_mode_puts_it():
    interpolated = build(fuzzy=1e-9).train().prepare((2, 3))  # the reference's extent, stretched
    torch.testing.assert_close(interpolated, build().eval().prepare((2, 3)), atol=0.2, rtol=0)
    extrapolated = build(fuzzy=1e-9, resize="extrapolate").train().prepare((2, 3))  # the top-left cells
    torch.testing.assert_close(extrapolated, position_table((2, 3)).reshape(-1, 2), atol=1e-6, rtol=0)


def test_fuzzy_positions_do_not_let_a_table_extrapolate():
    with pytest.raises(ResizeError, match="cannot extrapolate"):
        build(fuzzy=0.5, resize="extrapolate").train().prepare((6, 6))


@pytest.mark.parametrize("value", [-0.5, float("nan"), "half"])
def test_a_fuzzy_offset_out_of_range_is_one_clear_error(value):
    with pytest.raises(ValueError, match="^learnable: fuzzy must be >= 0"):
        build(fuzzy=value)
