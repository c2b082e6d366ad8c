"""The stream loader (data.loader=stream): image folders and shards read image by image in worker processes, the same
batches for a seed whatever the workers or ranks, exact resume mid-epoch, progressive sizes, bad input in one line."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from vitpe.cli import train as train_cli
from conftest import CLASSES, photo_folder
from vitpe.config import load_config
from vitpe.data import DataError
from vitpe.data.from_config import build_run_data
from vitpe.data.stream_index import FolderIndex, ShardIndex, open_index
from vitpe.data.stream_loader import Selection, StreamLoader, stream_channel_stats
from vitpe.data.datasets import decode
from vitpe.data.stream_views import EvalView, TrainView
from vitpe.data.shards import write_shards

ROOT = Path(__file__).resolve().parents[1]


def loader(index, **options) -> StreamLoader:
    settings = dict(train=True, mean=[0.5] * 3, std=[0.25] * 3, seed=3, img_sizes=[16],
                    view=TrainView(crop_scale=(0.35, 1), hflip=True))
    return StreamLoader(index, 4, **{**settings, **options})


def batches(loader: StreamLoader, epoch: int = 0, start: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return list(loader.epoch(epoch, start))


def test_a_folder_of_any_aspect_and_extension_is_indexed_without_an_object_per_image(tmp_path):
    index = FolderIndex(photo_folder(tmp_path), "train")
    assert len(index) == 18 and index.classes == list(CLASSES)
    assert index.labels.tolist() == [0] * 6 + [1] * 6 + [2] * 6
    assert isinstance(index.paths.buffer, np.ndarray) and index.paths[7] == "dog/1.png"
    image = decode(index.read(1), index.name(1))
    assert image.size == (30, 90)  # (w, h): native aspect until a view crops it
    test = FolderIndex(tmp_path, "test")  # test/ is val/ where there is no test/
    assert len(test) == 18 and test.folder.name == "val"


def test_the_eval_view_is_the_centred_square_and_a_train_view_keeps_the_aspect_until_cropped(tmp_path):
    from PIL import Image

    wide = Image.new("RGB", (90, 30), (0, 0, 0))
    wide.paste(Image.new("RGB", (30, 30), (255, 0, 0)), (30, 0))  # red in the centred square, black around it
    square = EvalView()(wide, (12, 12), seed=0)
    assert square.shape == (3, 12, 12) and square[0].float().mean() > 250 and square[1:].float().max() < 5
    views = {TrainView(crop_scale=(0.9, 1))(wide, (8, 16), seed=s).shape for s in range(4)}
    assert views == {(3, 8, 16)}
    black = [TrainView(crop_scale=(0.9, 1), hflip=False)(wide, (8, 8), seed=s)[0].float().mean() for s in range(8)]
    assert min(black) < 250  # a crop of 90 % of the area reaches past the centred square: the sides are there


def test_the_same_seed_gives_the_same_batches_whatever_the_workers(tmp_path):
    index = open_index(photo_folder(tmp_path), "train")
    in_process, two_workers = batches(loader(index)), batches(loader(index, workers=2))
    assert len(in_process) == 4  # 18 images, batches of 4: the last partial batch is dropped
    for (x, y), (x2, y2) in zip(in_process, two_workers, strict=True):
        assert torch.equal(x, x2) and torch.equal(y, y2)
    other_epoch = batches(loader(index), epoch=1)
    assert not torch.equal(in_process[0][0], other_epoch[0][0])
    other_seed = batches(loader(index, seed=4))
    assert not torch.equal(in_process[0][0], other_seed[0][0])


def test_resuming_mid_epoch_draws_the_batches_it_would_have_drawn(tmp_path):
    index = open_index(photo_folder(tmp_path), "train")
    whole = batches(loader(index), epoch=2)
    resumed = batches(loader(index), epoch=2, start=2)
    assert len(resumed) == 2
    for (x, y), (x2, y2) in zip(whole[2:], resumed, strict=True):
        assert torch.equal(x, x2) and torch.equal(y, y2)


def test_two_ranks_draw_the_global_batch_of_one_process_each_its_share(tmp_path):
    index = open_index(photo_folder(tmp_path), "train")
    one = batches(loader(index, img_sizes=[8, 16]), epoch=1)  # a size drawn per step: the same on every rank
    ranks = [batches(StreamLoader(index, 2, train=True, mean=[0.5] * 3, std=[0.25] * 3, seed=3, img_sizes=[8, 16],
                                  view=TrainView(crop_scale=(0.35, 1), hflip=True), rank=r, world=2), epoch=1)
             for r in range(2)]
    assert len(ranks[0]) == len(ranks[1]) == len(one)
    for step, (x, y) in enumerate(one):
        x0, y0 = ranks[0][step]
        x1, y1 = ranks[1][step]
        assert torch.equal(x[0::2], x0) and torch.equal(x[1::2], x1)  # rank r: the global batch's places r::world
        assert torch.equal(y[0::2], y0) and torch.equal(y[1::2], y1)
    assert {tuple(x.shape[-2:]) for x, _ in one} == {(8, 8), (16, 16)}


def test_progressive_sizes_follow_the_epochs(tmp_path):
    index = open_index(photo_folder(tmp_path), "train")
    stream = loader(index, img_sizes=[8, 12, 16], size_epochs=[1, 1, 1])
    assert [batches(stream, epoch=e)[0][0].shape[-1] for e in range(4)] == [8, 12, 16, 16]


def test_evaluation_keeps_every_image_in_order_on_its_rank(tmp_path):
    index = open_index(photo_folder(tmp_path), "test")
    test = StreamLoader(index, 5, train=False, mean=[0.5] * 3, std=[0.25] * 3, img_sizes=[16])
    labels = torch.cat([y for _, y in batches(test)])
    assert labels.tolist() == index.labels.tolist()
    shares = [StreamLoader(index, 5, train=False, mean=[0.5] * 3, std=[0.25] * 3, img_sizes=[16], rank=r, world=2)
              for r in range(2)]
    assert sorted(sum((torch.cat([y for _, y in batches(s)]).tolist() for s in shares), [])) == sorted(
        labels.tolist())


def test_statistics_come_from_a_seeded_sample_of_views(tmp_path):
    index = open_index(photo_folder(tmp_path), "train")
    mean, std = stream_channel_stats(index, 16, workers=0, sample=10)
    assert stream_channel_stats(index, 16, workers=2, sample=10) == (mean, std)
    views = torch.stack([EvalView()(decode(index.read(i), ""), (16, 16), 0) for i in range(len(index))])
    everything = stream_channel_stats(index, 16, workers=0, sample=100)
    expected = views.double().div(255).transpose(0, 1).reshape(3, -1)
    assert np.allclose(everything[0], expected.mean(1).tolist(), atol=1e-6)
    assert np.allclose(everything[1], expected.std(1).tolist(), atol=1e-6)


def test_an_unreadable_image_is_named_in_one_line_or_skipped_with_a_count(tmp_path, capsys):
    folder = photo_folder(tmp_path)
    (folder / "train" / "dog" / "9.jpg").write_bytes(b"not an image")
    truncated = (folder / "train" / "fox" / "0.JPEG").read_bytes()
    (folder / "train" / "fox" / "0.JPEG").write_bytes(truncated[: len(truncated) // 2])
    index = open_index(folder, "train")
    with pytest.raises(DataError, match=r"(9\.jpg|0\.JPEG) is not a readable image .*data\.skip_unreadable=true"):
        batches(loader(index, workers=1))
    kept = batches(loader(index, skip_unreadable=True, workers=1))
    assert sum(len(y) for _, y in kept) == 4 * 4 - 2  # 19 images, 4 steps of 4; two left out of their batches
    assert "skipped 2 unreadable image(s)" in capsys.readouterr().err


def test_a_worker_that_dies_is_named_never_a_hang(tmp_path):
    index = open_index(photo_folder(tmp_path, per_class=40), "train")
    stream = loader(index, workers=1)
    batches_seen = stream.epoch(0)
    next(batches_seen)
    workers = stream_worker_pids()
    assert workers, "no live worker process"
    stopper = threading.Timer(60, lambda: os._exit(3))  # a hang would fail the whole run, not only this test
    stopper.start()
    try:  # torch learns of the death by SIGCHLD and raises wherever this process is; the loader names it either way
        with pytest.raises((DataError, RuntimeError), match=r"DataLoader worker( \(pid| broke off)"):
            for worker in workers:
                os.kill(worker, signal.SIGKILL)
            list(batches_seen)
    finally:
        stopper.cancel()


def test_a_dead_worker_ends_a_command_in_one_line(capsys):
    from vitpe.cli.exits import run_cli

    def body():
        raise RuntimeError("DataLoader worker (pid 123) is killed by signal: Killed. ")

    assert run_cli(body, debug=False, interrupted="", go_on="") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a data-loading worker stopped: DataLoader worker (pid 123)" in err
    assert "--resume continues" in err


def stream_worker_pids() -> list[int]:
    """The pids of this process's live children (the DataLoader's workers)."""
    return children_of(os.getpid())


def children_of(me: int) -> list[int]:
    """The pids of the live children of process ``me``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                state, parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
                if int(parent) == me and state != "Z":  # alive (a worker of an earlier test may wait to be reaped)
                    pids.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return pids


def test_a_missing_folder_or_a_class_missing_from_val_is_one_line(tmp_path):
    with pytest.raises(DataError, match=r"data\.root .* is not a folder"):
        open_index(tmp_path / "nowhere", "train")
    folder = photo_folder(tmp_path / "data")
    for path in (folder / "val" / "fox").iterdir():
        path.unlink()
    (folder / "val" / "fox").rmdir()
    with pytest.raises(DataError, match=r"only in .*train: \['fox'\]"):
        open_index(folder, "test")


def stream_config(tmp_path: Path, root: Path, *overrides: str):
    return load_config(str(ROOT / "configs" / "imagenette.yaml"), [
        f"data.root={root}", "data.dataset=imagefolder", "data.loader=stream", "data.workers=0", "model.dim=32",
        "model.depth=1", "model.heads=2", "train.img_sizes=[8,16]", "train.img_size_epochs=[1,1]", "train.epochs=2",
        "train.batch_size=4", "model.img_size=16", "train.compile=false", f"out_dir={tmp_path / 'run'}", *overrides])


def test_limits_and_a_validation_split_take_a_seeded_sample_of_every_class(tmp_path):
    folder = photo_folder(tmp_path / "data")
    config = stream_config(tmp_path, folder, "data.train_limit=12", "data.val_split=3")
    data = build_run_data(config, None, torch.device("cpu"))
    assert len(data.train.index) == 9 and len(data.val.index) == 3 and len(data.test.index) == 18
    assert len(set(data.train.index.labels.tolist())) == 3  # not the first class alone
    assert set(data.train.index.numbers.tolist()).isdisjoint(data.val.index.numbers.tolist())
    assert data.classes == list(CLASSES)


def test_a_stream_run_trains_resumes_and_reads_shards_alike(tmp_path):
    folder = photo_folder(tmp_path / "data")
    args = ["--config", str(ROOT / "configs" / "imagenette.yaml"), "data.dataset=imagefolder", "data.loader=stream",
            "data.workers=1", "model.dim=32", "model.depth=1", "model.heads=2", "train.img_sizes=[8,16]",
            "train.img_size_epochs=[1,1]", "train.epochs=2", "train.batch_size=4", "model.img_size=16",
            "train.compile=false", "--no-progress"]
    assert train_cli.main([*args, f"data.root={folder}", f"out_dir={tmp_path / 'folder_run'}"]) == 0
    write_shards(folder, tmp_path / "shards", shard_size=5, progress=False)
    assert train_cli.main([*args, f"data.root={tmp_path / 'shards'}", f"out_dir={tmp_path / 'shard_run'}"]) == 0
    records = [(tmp_path / run / "metrics.jsonl").read_text().splitlines() for run in ("folder_run", "shard_run")]
    losses = [[line.split('"train_loss": ')[1].split(",")[0] for line in run] for run in records]
    assert losses[0] != losses[1]  # the shards hold the images in another order: other batches, the same pipeline
    a = torch.load(tmp_path / "shard_run" / "checkpoint.pt", weights_only=True)
    assert a["classes"] == list(CLASSES) and a["train_state"]["epoch"] == 2


def test_the_stream_loader_is_refused_for_data_it_cannot_read(tmp_path):
    from vitpe.config import ConfigError

    with pytest.raises(ConfigError, match=r"data\.loader must be memory for data\.dataset=cifar10"):
        load_config(str(ROOT / "configs" / "cifar10.yaml"), ["data.loader=stream"])
    with pytest.raises(ConfigError, match=r"data\.loader must be one of \['memory', 'stream'\]"):
        load_config(str(ROOT / "configs" / "imagenette.yaml"), ["data.loader=disk"])


def test_a_selection_reads_through_to_its_index(tmp_path):
    index = open_index(photo_folder(tmp_path), "train")
    picked = Selection(index, np.array([17, 0]))
    assert picked.labels.tolist() == [2, 0] and picked.read(0) == index.read(17) and picked.name(1) == index.name(0)
    assert isinstance(open_index(tmp_path, "train"), FolderIndex)
    write_shards(tmp_path, tmp_path / "s", 7, progress=False)
    assert isinstance(open_index(tmp_path / "s", "train"), ShardIndex)


def test_a_jpeg_draft_decodes_at_a_smaller_scale_and_gives_nearly_the_same_view(tmp_path):
    from PIL import Image

    from vitpe.data.datasets import open_image
    from vitpe.data.stream_views import loaded

    ramp = np.linspace(0, 255, 320)[None, :, None] * np.ones((240, 1, 3))
    Image.fromarray(ramp.astype(np.uint8)).save(tmp_path / "a.jpg", quality=95)
    data = (tmp_path / "a.jpg").read_bytes()
    image, box = loaded(open_image(data), (0, 0, 240, 240), (32, 32), draft=True)
    assert image.size == (80, 60) and box == (0, 0, 60, 60)  # 1/4: the box holds 60 >= 32 pixels, 1/8 would not
    whole, drafted = (EvalView(draft=d)(open_image(data), (32, 32), 0).float() for d in (False, True))
    assert (whole - drafted).abs().mean() < 2 and (whole - drafted).abs().max() < 12
    large, _ = loaded(open_image(data), (0, 0, 240, 240), (160, 160), draft=True)
    assert large.size == (320, 240)  # a view near the photograph's size is decoded whole


@pytest.mark.slow
def test_sigterm_to_the_whole_process_group_checkpoints_at_the_step_and_resumes_exactly(tmp_path):
    """A scheduler (or Ctrl-C) signals every process of the job: the workers ignore it, the training process stops
    after its step with a checkpoint, and the resumed run ends as the uninterrupted one."""
    import json
    import subprocess
    import sys
    import time

    folder = photo_folder(tmp_path / "data", per_class=40)  # 120 images: 30 steps an epoch
    args = [sys.executable, str(ROOT / "train.py"), "--config", str(ROOT / "configs" / "imagenette.yaml"),
            f"data.root={folder}", "data.dataset=imagefolder", "data.loader=stream", "data.workers=1",
            "model.dim=32", "model.depth=1", "model.heads=2", "train.img_sizes=[16]", "train.img_size_epochs=[]",
            "train.epochs=3", "train.batch_size=4", "model.img_size=16", "train.compile=false", "train.threads=1",
            "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    reference = subprocess.run([*args, f"out_dir={tmp_path / 'whole'}"], env=env, capture_output=True, text=True)
    assert reference.returncode == 0, reference.stderr[-2000:]
    run = tmp_path / "stopped"
    proc = subprocess.Popen([*args, f"out_dir={run}"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not (run / "metrics.jsonl").is_file():
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else "no epoch"
        time.sleep(0.05)
    while not children_of(proc.pid):  # the next epoch's worker is up
        assert time.monotonic() < deadline and proc.poll() is None, "no worker"
        time.sleep(0.02)
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGTERM)  # the training process and its worker alike
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 75, err[-2000:]
    assert "preempted by SIGTERM" in err and "worker" not in err
    resumed = subprocess.run([*args[:2], "--resume", str(run), "--no-progress"], env=env, capture_output=True,
                             text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    a, b = (torch.load(r / "checkpoint.pt", weights_only=True)["model"] for r in (tmp_path / "whole", run))
    assert all(torch.equal(v, b[k]) for k, v in a.items())
    timing = {"img_per_s", "elapsed_s", "finished_at"}
    records = [[{k: v for k, v in json.loads(line).items() if k not in timing}
                for line in (r / "metrics.jsonl").read_text().splitlines()] for r in (tmp_path / "whole", run)]
    assert records[0] == records[1]


def test_eval_py_evaluates_a_stream_run_from_the_photographs_at_each_size(tmp_path):
    import json

    from vitpe.cli import evaluate as eval_cli

    folder = photo_folder(tmp_path / "data", per_class=4)
    run = tmp_path / "run"
    assert train_cli.main(["--config", str(ROOT / "configs" / "imagenette.yaml"), "data.dataset=imagefolder",
                           f"data.root={folder}", "data.loader=stream", "model.dim=32", "model.depth=1",
                           "model.heads=2", "train.img_sizes=[16]", "train.img_size_epochs=[]", "train.epochs=1",
                           "train.batch_size=4", "model.img_size=16", "train.compile=false", f"out_dir={run}",
                           "--no-progress"]) == 0
    out = tmp_path / "sweep"
    assert eval_cli.main([str(run), "--resolutions", "16,32", "--pe-resize", "interpolate", "--out", str(out)]) == 0
    records = json.loads((out / "resolution.json").read_text())
    at_16 = next(r for r in records if r["resolution"] == 16)
    final = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert at_16["accuracy"] == pytest.approx(final["test_acc"])  # the training's own test: the same views
    assert {r["resolution"] for r in records} == {16, 32} and at_16["n"] == 12


def test_the_cuda_prefetcher_yields_every_batch_in_order(monkeypatch):
    """The side-stream prefetch (CUDA only) keeps one batch ahead and loses none: its control flow checked on the
    CPU with torch.cuda's stream calls stood in for."""
    import contextlib

    from vitpe.data import stream_loader

    class Stream:
        waited = 0

        def __init__(self, device=None):
            pass

        def wait_stream(self, other):
            Stream.waited += 1

    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Stream())
    monkeypatch.setattr(torch.Tensor, "record_stream", lambda self, stream: None)
    pulled = []

    def batches():
        for i in range(5):
            pulled.append(i)
            yield torch.full((2,), i), torch.tensor([i])

    seen = []
    for x, y in stream_loader._prefetched(batches(), torch.device("cpu")):
        seen.append(int(y))
        assert pulled[-1] == min(int(y) + 1, 4)  # the next batch is already queued while this one is used
    assert seen == [0, 1, 2, 3, 4] and Stream.waited == 5
