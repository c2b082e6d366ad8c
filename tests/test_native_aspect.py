"""Native aspect and many resolutions to a batch (data.native_aspect): grids sized by tokens, a token budget per step,
the same batches for a seed, exact resume, training and evaluation end to end."""

from __future__ import annotations

import json
import math
import os
import signal
from pathlib import Path

import pytest
import torch

from vitpe.cli import train as train_cli
from conftest import photo_folder
from vitpe.data.native_aspect import NativeAspectView, TokenBudgetLoader, grid_at_short_side, grid_within
from vitpe.data.stream_index import FolderIndex

ROOT = Path(__file__).resolve().parents[1]
PATCH = 4


@pytest.mark.parametrize("tokens", [1, 4, 16, 36, 64, 144])
@pytest.mark.parametrize("height,width", [(30, 90), (90, 30), (48, 64), (64, 48), (40, 40), (33, 71), (10, 400)])
def test_a_grid_is_the_photographs_shape_scaled_to_the_tokens(height, width, tokens):
    gh, gw = grid_within(height, width, tokens)
    assert 1 <= gh * gw <= tokens
    aspect = width / height
    if gh > 1 and gw > 1:  # within half a cell of the shape on one side
        assert abs(gw - gh * aspect) <= 0.5 + 1e-9 or abs(gh - gw / aspect) <= 0.5 + 1e-9
    bigger = [(h, w) for h in range(1, tokens + 1) for w in range(1, tokens + 1)
              if h * w <= tokens and (w == max(1, round(h * aspect)) or h == max(1, round(w / aspect)))] or [(1, 1)]
    assert gh * gw == max(h * w for h, w in bigger)  # no scaled-and-rounded shape holds more cells


def test_a_grid_at_a_short_side_keeps_the_aspect():
    assert grid_at_short_side(300, 400, 64, 8) == (8, 11)  # 8 x 10.67 -> 11
    assert grid_at_short_side(400, 300, 64, 8) == (11, 8)
    assert grid_at_short_side(320, 320, 320, 8) == (40, 40)
    with pytest.raises(ValueError, match="not a multiple of the patch size 8"):
        grid_at_short_side(300, 400, 60, 8)


def loader(index, **options) -> TokenBudgetLoader:
    settings = dict(train=True, mean=[0.5] * 3, std=[0.25] * 3, seed=3, seq_lens=[4, 9, 16], token_budget=32,
                    view=NativeAspectView(PATCH, train=True, crop_scale=(0.5, 1)))
    return TokenBudgetLoader(index, **{**settings, **options})


def test_batches_fill_the_token_budget_at_each_photographs_aspect(tmp_path):
    index = FolderIndex(photo_folder(tmp_path, per_class=12), "train")  # 36 photographs, aspects 1:3 to 3:1
    plan = loader(index)
    assert plan.batch_sizes == [8, 3, 2] and plan.rounds == 36 // 13 and len(plan) == 6
    seen = []
    for images, labels in plan.epoch(0):
        assert isinstance(images, list) and len(images) == len(labels)
        grids = [(x.shape[1] // PATCH, x.shape[2] // PATCH) for x in images]
        length = {8: 4, 3: 9, 2: 16}[len(images)]
        assert all(gh * gw <= length for gh, gw in grids) and sum(gh * gw for gh, gw in grids) <= plan.token_budget
        assert all(x.dtype == torch.float32 and x.shape[1] % PATCH == 0 == x.shape[2] % PATCH for x in images)
        seen += labels.tolist()
    assert sorted(plan.lengths_of(0).tolist()) == [4, 4, 9, 9, 16, 16]
    assert len(seen) == 26  # two rounds of 8 + 3 + 2; the 10 left over are dropped, as a partial batch is
    wide = {(x.shape[1] < x.shape[2]) for images, _ in plan.epoch(1) for x in images}
    assert wide == {True, False}  # wide and tall views in one epoch: the aspect survives


def test_the_same_seed_gives_the_same_batches_and_a_resume_continues_them(tmp_path):
    index = FolderIndex(photo_folder(tmp_path, per_class=12), "train")
    whole = list(loader(index).epoch(1))
    again = list(loader(index, workers=2).epoch(1))
    resumed = list(loader(index).epoch(1, 4))
    for (a, la), (b, lb) in zip(whole, again):
        assert torch.equal(la, lb) and all(torch.equal(x, y) for x, y in zip(a, b))
    for (a, la), (b, lb) in zip(whole[4:], resumed):
        assert torch.equal(la, lb) and all(torch.equal(x, y) for x, y in zip(a, b))
    other = list(loader(index, seed=4).epoch(1))
    assert any(not torch.equal(la, lb) for (_, la), (_, lb) in zip(whole, other))


def test_two_ranks_draw_the_global_batch_of_one_process(tmp_path):
    """Two ranks, each half the budget, take between them the images and views one process takes in each step."""
    index = FolderIndex(photo_folder(tmp_path, per_class=12), "train")
    one = loader(index, seq_lens=[4, 16], token_budget=64)  # 16 and 4 images a step
    ranks = [loader(index, seq_lens=[4, 16], token_budget=32, rank=r, world=2) for r in range(2)]  # 8 and 2 each
    assert len(one) == len(ranks[0]) == len(ranks[1]) == 2
    assert one.lengths_of(0).tolist() == ranks[0].lengths_of(0).tolist() == ranks[1].lengths_of(0).tolist()

    def views(images, labels):  # each view by its label, shape and pixels, in a fixed order
        return sorted((int(y), tuple(x.shape), round(float(x.sum()), 3)) for x, y in zip(images, labels))

    for whole, part0, part1 in zip(one.epoch(0), ranks[0].epoch(0), ranks[1].epoch(0)):
        assert len(part0[1]) == len(part1[1]) == len(whole[1]) // 2
        assert views(*whole) == views(part0[0] + part1[0], torch.cat([part0[1], part1[1]]))


def test_evaluation_is_every_photograph_at_its_aspect_at_the_short_side(tmp_path):
    index = FolderIndex(photo_folder(tmp_path), "val")
    evaluated = loader(index).as_evaluated(16, batch_size=5)
    shapes, count = set(), 0
    for images, labels in evaluated.epoch(0):
        count += len(labels)
        shapes |= {tuple(x.shape[1:]) for x in images}
    assert count == 18
    assert shapes == {(16, 48), (48, 16), (16, 20), (20, 16), (16, 16), (16, 36)}  # short side 16, long side rounded


def native_run(tmp_path, folder, *extra):
    return ["--config", str(ROOT / "configs" / "imagenette.yaml"), "data.dataset=imagefolder", f"data.root={folder}",
            "data.loader=stream", "data.native_aspect=true", "data.crop_padding=0", "data.crop_scale=[0.5,1]",
            "data.mixup=0", "data.cutmix=0", "data.seq_lens=[4,9,16]", "data.token_budget=32", "model.dim=32",
            "model.depth=1", "model.heads=2", "model.patch_size=4", "model.img_size=16", "train.img_sizes=[16]",
            "train.img_size_epochs=[]", "train.batch_size=4", "train.compile=false", "--no-progress", *extra]


@pytest.mark.parametrize("pe", ["cpb"])  # a learned bias: per-image biases and their gradients through a resume
def test_a_native_aspect_run_trains_resumes_exactly_and_evaluates(tmp_path, monkeypatch, pe):
    from vitpe.cli import evaluate as eval_cli

    folder = photo_folder(tmp_path / "data", per_class=12)
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert train_cli.main(native_run(tmp_path, folder, f"model.pe={pe}", "train.epochs=2", f"out_dir={whole}")) == 0
    epoch = TokenBudgetLoader.epoch

    def signalled_mid_epoch(self, number=0, start_step=0):  # SIGTERM after the second epoch's second batch
        for step, batch in enumerate(epoch(self, number, start_step)):
            if self.train and number == 1 and step == 2:
                os.kill(os.getpid(), signal.SIGTERM)
            yield batch

    monkeypatch.setattr(TokenBudgetLoader, "epoch", signalled_mid_epoch)
    assert train_cli.main(native_run(tmp_path, folder, f"model.pe={pe}", "train.epochs=2", f"out_dir={cut}")) == 75
    assert torch.load(cut / "checkpoint.pt", weights_only=True)["train_state"]["step_in_epoch"] == 3
    monkeypatch.setattr(TokenBudgetLoader, "epoch", epoch)
    assert train_cli.main(["--resume", str(cut), "--no-progress"]) == 0
    a, b = (torch.load(run / "checkpoint.pt", weights_only=True)["model"] for run in (whole, cut))
    assert all(torch.equal(a[k], b[k]) for k in a)
    final = json.loads((whole / "metrics.jsonl").read_text().splitlines()[-1])
    assert math.isfinite(final["train_loss"])
    out = tmp_path / "sweep"
    assert eval_cli.main([str(whole), "--resolutions", "16,32", "--pe-resize", "interpolate", "--out", str(out)]) == 0
    records = json.loads((out / "resolution.json").read_text())
    at_16 = next(r for r in records if r["resolution"] == 16)
    assert at_16["accuracy"] == pytest.approx(final["test_acc"]) and at_16["n"] == 36


@pytest.mark.parametrize("override,message", [
    ("data.loader=memory", "data.native_aspect must be false unless data.loader=stream"),
    ("data.mixup=0.8", "data.mixup/cutmix must be 0 with data.native_aspect"),
    ("data.crop_padding=4", "data.crop_padding must be 0 with data"),
    ("data.token_budget=8", "data.token_budget must be 0 .* or at least the longest of data.seq_lens"),
    ("data.seq_lens=[]", "data.seq_lens must be a non-empty list"),
    ("train.compile=true", "train.compile must be false with data.native_aspect"),
])
def test_a_native_aspect_config_that_cannot_work_is_refused_in_one_line(tmp_path, capsys, override, message):
    folder = photo_folder(tmp_path / "data", per_class=2)
    code = train_cli.main(native_run(tmp_path, folder, override, f"out_dir={tmp_path / 'run'}"))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert __import__("re").search(message, err), err


def test_a_square_run_is_evaluated_at_native_aspect_when_asked(tmp_path, capsys):
    """eval.py --aspect native: a run trained on centred squares in memory, tested on the whole photographs."""
    from vitpe.cli import evaluate as eval_cli

    folder = photo_folder(tmp_path / "data", per_class=4)
    run = tmp_path / "square"
    assert train_cli.main(["--config", str(ROOT / "configs" / "imagenette.yaml"), "data.dataset=imagefolder",
                           f"data.root={folder}", "data.img_size=32", "model.dim=32", "model.depth=1", "model.heads=2",
                           "model.patch_size=4", "model.img_size=16", "train.img_sizes=[16]",
                           "train.img_size_epochs=[]",
                           "train.epochs=1", "train.batch_size=4", "train.compile=false", f"out_dir={run}",
                           "--no-progress"]) == 0
    records = {}
    for aspect in ("square", "native"):
        out = tmp_path / aspect
        assert eval_cli.main([str(run), "--resolutions", "16,18", "--pe-resize", "interpolate", "--aspect", aspect,
                              "--out", str(out)]) == 0
        records[aspect] = {r["resolution"]: r for r in json.loads((out / "resolution.json").read_text())}
    assert records["native"][16]["aspect"] == "native" and records["square"][16]["aspect"] == "square"
    assert records["native"][16]["n"] == records["square"][16]["n"] == 12
    assert records["native"][18]["accuracy"] is None
    assert "divisible by the patch size 4" in records["native"][18]["reason"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        eval_cli.main([str(run), "--aspect", "sideways", "--out", str(tmp_path / "x")])
    assert stopped.value.code == 2 and "--aspect: invalid choice: 'sideways'" in capsys.readouterr().err
