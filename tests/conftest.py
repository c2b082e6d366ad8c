"""Shared helpers: small PEs on 1D and 2D grids, and a two-block encoder to run them in; the test order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import vitpe.pe
from vitpe.models.attention import Block

DIM, HEADS, DEPTH, PREFIX = 32, 2, 3, 1
GRIDS = {1: (7,), 2: (4, 5)}
#: The longest tests (0.5-2.5 minutes each on two cores), longest first, then the files whose tests train in
#: subprocesses: collected first, so that with one test process per core (pytest-xdist) the long ones are shared
#: out at the start instead of ending the run with one core busy and the other idle.
LONGEST = ("test_compare_script_trains_picks_and_evaluates", "test_timm_baseline_resumes_to_the_uninterrupted_numbers",
           "test_transfer_script_trains_augments_fine_tunes_and_evaluates_in_every_mode",
           "test_quick_mode_writes_valid_json", "test_text_experiments_script_trains_every_seed_and_averages_them",
           "test_under_torchrun_every_rank_stops_at_the_same_step",
           "test_recipe_vs_timm_runs_both_side_by_side_and_tabulates",
           "test_gpu_check_fits_the_recipe_to_its_time_and_summarises", "test_ctrl_c_stops_like_sigterm",
           "test_short_real_sst2_run_learns_above_chance", "test_short_real_cifar10_run_learns_well_above_chance",
           "test_killed_run_resumes_to_identical_weights_and_metrics")
LONG_FILES = ("test_scripts.py", "test_reliability.py", "test_train.py", "test_bench.py", "test_benchmarks.py",
              "test_multinode.py", "test_memory_budget.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.name.split("[")[0]
        return LONGEST.index(name) if name in LONGEST else len(LONGEST) + (item.path.name not in LONG_FILES)

    items.sort(key=rank)  # stable: otherwise each file keeps its own order


@pytest.fixture(autouse=True)
def _torch_threads_restored():
    """A test that sets torch's thread count (the benchmark's --threads) leaves the next one in the same process as
    it found it: other threads sum floats in another order."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def cases() -> list[tuple[str, int]]:
    """Every (PE name, grid dimensionality) the registry supports."""
    return [(name, d) for name in vitpe.pe.available() for d in vitpe.pe.get(name).grid_dims]


def case_id(case: tuple[str, int]) -> str:
    return f"{case[0]}-{case[1]}d"


def make_pe(name: str, ndim: int, grid=None, seed: int = 0, **kwargs) -> vitpe.pe.PositionEncoding:
    torch.manual_seed(seed)
    return vitpe.pe.build(name, dim=DIM, heads=HEADS, depth=DEPTH, grid=grid or GRIDS[ndim],
                          **{"num_prefix_tokens": PREFIX, **kwargs})


class Encoder(torch.nn.Module):
    """A minimal host: prefix + grid tokens through ``DEPTH`` PE-aware blocks."""

    def __init__(self, pe: vitpe.pe.PositionEncoding, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.pe = pe
        self.blocks = torch.nn.ModuleList(Block(DIM, HEADS, mlp_ratio=2.0) for _ in range(DEPTH))

    def forward(self, x: torch.Tensor, grid) -> torch.Tensor:
        state = self.pe.prepare(grid)
        for layer, block in enumerate(self.blocks):
            x = block(self.pe.add_to_tokens(x, state, layer), self.pe, state, layer)
        return x


def tokens(grid, batch: int = 2, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    n = 1
    for s in grid:
        n *= s
    return torch.randn(batch, PREFIX + n, DIM, generator=g)


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    yield


@pytest.fixture(autouse=True, scope="session")
def _decoded_images_cached_in_a_temporary_folder(tmp_path_factory):
    """Image folders are decoded into a cache ($VITPE_CACHE, else ~/.cache/vitpe): the tests, and the trainings they
    start in subprocesses, keep theirs in a temporary folder instead of the user's home."""
    import os

    os.environ["VITPE_CACHE"] = str(tmp_path_factory.mktemp("vitpe-cache"))
    yield


CLASSES = ("cat", "dog", "fox")


def photo_folder(root: Path, per_class: int = 6, splits=("train", "val")) -> Path:
    """An image folder of photographs of many aspects (1:3 to 3:1) and formats; each image's colour tells its class
    and a gradient across it tells left from right."""
    from PIL import Image

    rng = np.random.default_rng(0)
    shapes = [(30, 90), (90, 30), (48, 64), (64, 48), (40, 40), (33, 71)]
    for split in splits:
        for c, name in enumerate(CLASSES):
            (root / split / name).mkdir(parents=True)
            for i in range(per_class):
                h, w = shapes[i % len(shapes)]
                ramp = np.linspace(0, 120, w)[None, :, None]
                pixels = np.clip(ramp + 60 * c + rng.normal(0, 8, (h, w, 3)), 0, 255).astype(np.uint8)
                suffix = (".JPEG", ".png", ".webp")[i % 3]
                Image.fromarray(pixels).save(root / split / name / f"{i}{suffix}")
    return root
