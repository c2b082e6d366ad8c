"""train.py end to end: run folder, real CIFAR-10 subset, kill-and-resume equality, DDP, clear errors."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from vitpe.cli import train
from vitpe.loading.checkpoint import load_checkpoint, model_from_checkpoint

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("VITPE_DATA", ROOT / ".." / "shared" / "data"))
SMOKE = str(ROOT / "configs" / "smoke.yaml")
METRIC_KEYS = {"epoch", "step", "train_loss", "train_acc", "test_loss", "test_acc", "lr", "img_per_s", "elapsed_s",
               "machine", "finished_at"}
TIMING_KEYS = {"img_per_s", "elapsed_s", "finished_at"}


def run_main(*args):
    return train.main([*map(str, args), "--no-progress"])


def test_smoke_run_writes_a_complete_run_folder(tmp_path):
    out = tmp_path / "run"
    assert run_main("--config", SMOKE, f"out_dir={out}", "model.pe=rope_mixed") == 0
    assert {p.name for p in out.iterdir()} >= {"config.yaml", "metrics.jsonl", "checkpoint.pt", "best.pt"}
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2]
    for r in records:
        assert METRIC_KEYS <= set(r) and 0 <= r["test_acc"] <= 1 and 0 <= r["train_acc"] <= 1
    ckpt = torch.load(out / "checkpoint.pt", weights_only=True)  # plain tensors and containers only
    assert ckpt["config"]["model"]["pe"] == "rope_mixed"
    assert ckpt["rotary_pairs"] == "interleaved"  # the layout it was trained in (vitpe.loading.rotary_pairs)
    model, _ = model_from_checkpoint(out / "best.pt")  # the checkpoint alone rebuilds its model
    assert model.pe.name == "rope_mixed" and model(torch.zeros(1, 3, 16, 16)).shape == (1, 10)
    assert "pe: rope_mixed" in (out / "config.yaml").read_text()


def test_same_config_and_seed_give_the_same_numbers(tmp_path):
    for name in ("a", "b"):
        assert run_main("--config", SMOKE, f"out_dir={tmp_path / name}", "model.pe=relbias", "train.epochs=1") == 0
    a, b = ([json.loads(line) for line in (tmp_path / n / "metrics.jsonl").read_text().splitlines()] for n in "ab")
    strip = lambda rs: [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rs]  # noqa: E731
    assert strip(a) == strip(b)


def test_eval_every_skips_evaluations_but_not_the_last_and_trains_the_same_weights(tmp_path):
    common = ("--config", SMOKE, "model.pe=learnable", "train.epochs=3", "train.ema=0.9")
    assert run_main(*common, f"out_dir={tmp_path / 'every'}") == 0
    assert run_main(*common, f"out_dir={tmp_path / 'sparse'}", "train.eval_every=2") == 0
    every, sparse = ([json.loads(line) for line in (tmp_path / n / "metrics.jsonl").read_text().splitlines()]
                     for n in ("every", "sparse"))
    assert ["test_acc" in r for r in sparse] == [False, True, True]  # epoch 2 by the interval, epoch 3 as the last
    assert ["test_acc_ema" in r for r in sparse] == [False, True, True]
    for a, b in zip(every, sparse):  # evaluating draws nothing: training is the same step for step
        assert a["train_loss"] == b["train_loss"]
    assert every[-1]["test_acc"] == sparse[-1]["test_acc"]
    weights = [torch.load(tmp_path / n / "checkpoint.pt", weights_only=True)["model"] for n in ("every", "sparse")]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    best = torch.load(tmp_path / "sparse" / "best.pt", weights_only=True)["train_state"]["epoch"]
    assert best in (2, 3)  # the best checkpoint is an evaluated epoch's


def test_progressive_resizing_records_each_epochs_size(tmp_path):
    out = tmp_path / "progressive"
    assert run_main("--config", SMOKE, f"out_dir={out}", "train.epochs=3", "train.img_sizes=[8,12,16]",
                    "train.img_size_epochs=[1,1,1]", "model.pe=rope_mixed") == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["img_size"] for r in records] == [8, 12, 16]
    model, _ = model_from_checkpoint(out / "checkpoint.pt")
    assert model.grid == (4, 4)  # built for data.img_size (16 px), where the test split is evaluated


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "cifar-10-batches-py").is_dir(), reason="CIFAR-10 not in VITPE_DATA")
def test_short_real_cifar10_run_learns_well_above_chance(tmp_path):
    out = tmp_path / "cifar"
    code = run_main("--config", ROOT / "configs" / "cifar10.yaml", f"out_dir={out}", f"data.root={DATA}",
                    "data.train_limit=4000", "data.test_limit=1000", "train.epochs=3", "train.img_size_epochs=[1,1,1]",
                    "train.img_sizes=[16,24,32]", "model.dim=64",
                    "model.depth=3", "model.heads=2", "train.batch_size=64", "train.lr=3e-3", "model.pe=sincos")
    assert code == 0
    last = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["test_acc"] > 0.25, last  # chance is 0.10


def _cmd(*args):
    return [sys.executable, str(ROOT / "train.py"), *map(str, args), "--no-progress"]


@pytest.mark.slow
def test_killed_run_resumes_to_identical_weights_and_metrics(tmp_path):
    args = ["--config", SMOKE, "model.pe=rope_mixed", "data.img_size=32", "train.img_sizes=[32]",
            "data.synthetic_size=768", "train.epochs=3", "train.batch_size=32", "train.checkpoint_every=3",
            "train.ema=0.9", "model.drop_path=0.1", "data.mixup=0.2"]
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    subprocess.run(_cmd(*args, f"out_dir={reference}"), check=True, cwd=ROOT, capture_output=True)

    proc = subprocess.Popen(_cmd(*args, f"out_dir={killed}"), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (killed / "checkpoint.pt").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    time.sleep(0.3)  # let it run on past the checkpoint, then kill it hard mid-epoch
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    interrupted_at = load_checkpoint(killed)["train_state"]["global_step"]
    assert interrupted_at < 3 * 24
    subprocess.run(_cmd("--resume", killed), check=True, cwd=ROOT, capture_output=True)

    a, b = load_checkpoint(reference), load_checkpoint(killed)
    for part in ("model", "ema"):
        for key, value in a[part].items():
            assert torch.equal(value, b[part][key]), (part, key)
    strip = lambda p: [{k: v for k, v in json.loads(line).items() if k not in TIMING_KEYS}  # noqa: E731
                       for line in (p / "metrics.jsonl").read_text().splitlines()]
    assert strip(reference) == strip(killed)


@pytest.mark.slow
def test_ddp_two_cpu_processes(tmp_path):
    out = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                             str(ROOT / "train.py"), "--config", SMOKE, f"out_dir={out}", "--no-progress"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2]  # written once, by rank 0
    assert records[-1]["machine"].endswith(", 2 processes × 1 thread")  # what ran it: two one-thread ranks
    assert records[-1]["step"] == 2 * (512 // 2 // 64)  # each rank sees half of the 512 images per epoch
    assert result.stdout.count("epoch 2/2") == 1


def test_cli_errors_are_one_clear_line(tmp_path, capsys):
    assert run_main("--config", SMOKE, "train.epoch=3") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown config key 'train.epoch'") and "Traceback" not in err
    assert run_main("--config", SMOKE, "model.pe=rope_axal", f"out_dir={tmp_path / 'x'}") == 2
    assert "unknown position encoding 'rope_axal'" in capsys.readouterr().err
    assert run_main("--config", SMOKE, f"data.root={tmp_path}", "data.dataset=cifar10",
                    f"out_dir={tmp_path / 'y'}") == 2
    assert "cifar-10-batches-py" in capsys.readouterr().err
    assert run_main("--config", SMOKE, "model.pe=learnable", "model.pe_options={fuzzy: -1}",
                    f"out_dir={tmp_path / 'z'}") == 2  # a PE option checked when the model is built
    assert capsys.readouterr().err.startswith("error: learnable: fuzzy must be >= 0, got -1")
    assert not any(tmp_path.iterdir())  # no run folder left behind by a run that never started


def test_compiling_without_a_cpp_compiler_is_one_clear_line_before_anything_runs(tmp_path, capsys, monkeypatch):
    import torch._inductor.config as inductor_config
    from torch._inductor import cpp_builder

    monkeypatch.setattr(inductor_config.cpp, "cxx", ("no-such-c++-compiler",))
    cpp_builder.cpp_compiler_search.cache_clear()  # inductor memoises the search
    try:
        assert run_main("--config", SMOKE, "train.compile=true", f"out_dir={tmp_path / 'run'}") == 2
    finally:
        cpp_builder.cpp_compiler_search.cache_clear()
    err = capsys.readouterr().err
    assert err.startswith("error: train.compile=true on the CPU needs a C++ compiler") and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_resume_errors(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_main("--config", SMOKE, f"out_dir={out}", "train.epochs=1") == 0
    assert run_main("--config", SMOKE, f"out_dir={out}", "train.epochs=1") == 2  # would overwrite a run
    assert "--resume" in capsys.readouterr().err
    assert run_main("--resume", out, "--config", SMOKE, "model.pe=sincos") == 2
    assert "another config (differs in model.pe" in capsys.readouterr().err
    before = (out / "metrics.jsonl").read_text()
    assert run_main("--resume", out) == 0  # a finished run: said, not silently nothing
    assert "has finished its 1 epoch: nothing to resume" in capsys.readouterr().out
    assert (out / "metrics.jsonl").read_text() == before
    (out / "checkpoint.pt").write_bytes(b"garbage")
    assert run_main("--resume", out) == 2
    assert "corrupt" in capsys.readouterr().err
    assert run_main("--resume", tmp_path / "nowhere") == 2
    assert "not found" in capsys.readouterr().err


def test_nan_loss_stops_with_a_clear_message_and_keeps_the_checkpoint(tmp_path, capsys):
    out = tmp_path / "nan"
    assert run_main("--config", SMOKE, f"out_dir={out}", "train.lr=1e30", "train.grad_clip=0",
                    "train.warmup_epochs=0", "train.checkpoint_every=1") == 2
    assert "loss became" in capsys.readouterr().err
    assert (out / "metrics.jsonl").read_text() == ""
    load_checkpoint(out)  # intact and loadable


def test_a_gpu_run_reads_its_loss_every_few_steps_with_the_same_numbers_and_checkpoints(tmp_path, monkeypatch, capsys):
    """On a GPU the host reads the running loss every GPU_SYNC_EVERY steps (each read waits for the device); the
    epoch's metrics are those of reading every step, a non-finite loss still stops the run, naming the steps, and
    train.checkpoint_every still checkpoints though the loop calls back only at the reads. Emulated on the CPU."""
    import vitpe.engine.loop as loop

    common = ["--config", SMOKE, "data.synthetic_size=320", "train.batch_size=32", "train.epochs=1"]
    assert run_main(*common, f"out_dir={tmp_path / 'every'}") == 0
    monkeypatch.setattr(train, "sync_every", lambda device: 4)  # ten steps: reads at steps 3, 7 and 9 (0-based)
    reads, saves = [], []
    read_into, save_atomic = loop.PendingSums.read_into, train.save_atomic
    monkeypatch.setattr(loop.PendingSums, "read_into",
                        lambda self, state, last: reads.append(last) or read_into(self, state, last))
    monkeypatch.setattr(train, "save_atomic", lambda payload, path: saves.append(
        (Path(path).name, payload["train_state"]["step_in_epoch"])) or save_atomic(payload, path))
    assert run_main(*common, f"out_dir={tmp_path / 'fewer'}", "train.checkpoint_every=5") == 0
    assert reads == [3, 7, 9]
    assert ("checkpoint.pt", 8) in saves  # step 5 was crossed by the read after step 8: checkpointed there
    every, fewer = (json.loads((tmp_path / name / "metrics.jsonl").read_text()) for name in ("every", "fewer"))
    assert {k: every[k] for k in ("train_loss", "train_acc", "test_acc")} == \
        {k: fewer[k] for k in ("train_loss", "train_acc", "test_acc")}
    capsys.readouterr()
    assert run_main("--config", SMOKE, f"out_dir={tmp_path / 'nan'}", "train.lr=1e30", "train.grad_clip=0",
                    "train.warmup_epochs=0") == 2
    assert "loss became nan at epoch 1, one of steps 0-3" in capsys.readouterr().err
