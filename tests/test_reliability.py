"""Nothing lost: one owner per run folder, preemption (SIGTERM / Ctrl-C) with exact resume, also under torchrun,
file-system faults, broken data files, one-line errors."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from PIL import Image

from vitpe.cli import train
from vitpe.loading import checkpoint as checkpoint_module
from vitpe.engine import metrics_file
from vitpe.engine.preemption import PREEMPTED_EXIT, StopRequests
from vitpe.loading.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
TIMING_KEYS = {"img_per_s", "elapsed_s", "finished_at"}
# long enough (64 steps per epoch) to be signalled mid-run; short enough for the suite
ARGS = ["--config", SMOKE, "model.pe=rope_mixed", "data.synthetic_size=2048", "train.epochs=3", "train.batch_size=32",
        "train.checkpoint_every=5", "train.ema=0.9", "model.drop_path=0.1", "--no-progress"]


def cmd(*args) -> list[str]:
    return [sys.executable, str(ROOT / "train.py"), *map(str, args)]


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not path.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the run ended before the test could act"


def records(run: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING_KEYS}
            for line in (run / "metrics.jsonl").read_text().splitlines()]


def assert_same_run(a: Path, b: Path) -> None:
    ca, cb = load_checkpoint(a), load_checkpoint(b)
    for part in ("model", "ema", "optimizer"):
        flat_a, flat_b = (json.dumps(c[part], default=lambda t: t.tolist(), sort_keys=True) for c in (ca, cb))
        assert flat_a == flat_b, part
    assert records(a) == records(b)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reference") / "run"
    # in a process of its own, as the runs compared with it: the test process's torch may run another number of
    # threads (an earlier test's setting), and other threads sum in another order
    subprocess.run(cmd(*ARGS, f"out_dir={out}"), cwd=ROOT, check=True, capture_output=True)
    return out


@pytest.mark.slow
def test_one_owner_then_sigterm_checkpoints_the_step_and_resume_is_exact(reference, tmp_path, capsys):
    out = tmp_path / "run"
    proc = subprocess.Popen(cmd(*ARGS, f"out_dir={out}"), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    wait_for(out / "checkpoint.pt", proc)
    assert json.loads((out / ".lock").read_text())["pid"] == proc.pid
    # a second process on the same folder, and a resume while it trains: one line naming the owner
    assert train.main([*ARGS, f"out_dir={out}"]) == 2
    assert f"is being trained by pid {proc.pid} on {socket.gethostname()}" in capsys.readouterr().err
    assert train.main(["--resume", str(out), "--no-progress"]) == 2
    assert f"pid {proc.pid}" in capsys.readouterr().err

    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == PREEMPTED_EXIT, err
    assert "preempted by SIGTERM" in err and "--resume" in err and "Traceback" not in err
    assert not (out / ".lock").exists()  # released
    assert 0 < load_checkpoint(out)["train_state"]["global_step"] < 3 * 64  # stopped part-way

    assert train.main(["--resume", str(out), "--no-progress"]) == 0
    assert_same_run(reference, out)


def test_a_resumed_run_reports_the_time_of_an_unbroken_one(tmp_path, monkeypatch):
    """``elapsed_s`` keeps the part of an epoch trained before a preemption (a clock that ticks once per step)."""
    clock = {"now": 0.0, "steps": 0, "stop_at": 0}

    def should_stop(self, device, dist_info) -> bool:  # asked after every optimiser step (and at each epoch's end)
        clock["now"] += 1.0
        clock["steps"] += 1
        return clock["steps"] == clock["stop_at"]

    monkeypatch.setattr(StopRequests, "should_stop", should_stop)
    monkeypatch.setattr(train, "time", SimpleNamespace(perf_counter=lambda: clock["now"]))
    args = ["--config", SMOKE, "data.synthetic_size=256", "train.epochs=2", "train.batch_size=32", "--no-progress"]

    def elapsed(run: Path) -> float:
        return json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["elapsed_s"]

    assert train.main([*args, f"out_dir={tmp_path / 'unbroken'}"]) == 0
    clock.update(now=0.0, steps=0, stop_at=3)  # stopped after the third step of the first epoch
    assert train.main([*args, f"out_dir={tmp_path / 'resumed'}"]) == PREEMPTED_EXIT
    assert train.main(["--resume", str(tmp_path / "resumed"), "--no-progress"]) == 0
    assert elapsed(tmp_path / "resumed") == elapsed(tmp_path / "unbroken") > 3


@pytest.mark.slow
def test_ctrl_c_stops_like_sigterm(reference, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(cmd(*ARGS, f"out_dir={out}"), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    wait_for(out / "checkpoint.pt", proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == PREEMPTED_EXIT and "preempted by SIGINT" in err
    assert subprocess.run(cmd("--resume", out, "--no-progress"), cwd=ROOT, capture_output=True).returncode == 0
    assert_same_run(reference, out)


def test_a_stale_lock_is_taken_over_and_a_foreign_one_is_named(tmp_path, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "run"
    out.mkdir()
    (out / ".lock").write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "start": "1",
                                           "since": "2026-01-01T00:00:00"}))
    assert train.main(["--config", SMOKE, f"out_dir={out}", "train.epochs=1", "--no-progress"]) == 0
    assert "took over the lock of pid" in capsys.readouterr().out and not (out / ".lock").exists()
    other = tmp_path / "other"
    other.mkdir()
    (other / ".lock").write_text(json.dumps({"pid": 1, "host": "elsewhere", "start": "1", "since": "today"}))
    assert train.main(["--config", SMOKE, f"out_dir={other}", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "another host" in err and str(other / ".lock") in err


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _rank(pid: int) -> int:
    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return int(next(e for e in env if e.startswith(b"RANK=")).split(b"=")[1])


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc to find torchrun's workers")
def test_under_torchrun_every_rank_stops_at_the_same_step(tmp_path):
    """SIGTERM reaches only rank 1; both ranks stop after the same step, rank 0 writes the checkpoint, and the
    resumed run ends as the uninterrupted one."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = ["--config", SMOKE, "data.synthetic_size=2048", "train.epochs=2", "train.batch_size=16",
            "train.checkpoint_every=4", "--no-progress"]
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    ref, out = tmp_path / "ref", tmp_path / "run"
    done = subprocess.run([*launch, str(ROOT / "train.py"), *args, f"out_dir={ref}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    proc = subprocess.Popen([*launch, str(ROOT / "train.py"), *args, f"out_dir={out}"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(out / "checkpoint.pt", proc)
    rank1 = next(p for p in _children(proc.pid) if _rank(p) == 1)
    os.kill(rank1, signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode != 0 and err.count("preempted by") == 2  # both ranks, one line each
    state = load_checkpoint(out)["train_state"]
    assert state["global_step"] < 2 * 64
    resumed = subprocess.run([*launch, str(ROOT / "train.py"), "--resume", str(out), "--no-progress"], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    a, b = load_checkpoint(ref), load_checkpoint(out)
    assert all(torch.equal(v, b["model"][k]) for k, v in a["model"].items())
    assert records(ref) == records(out)


def test_an_unusable_out_dir_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    for out in (blocker, "/sys/vitpe_cannot_write_here"):
        assert train.main(["--config", SMOKE, f"out_dir={out}", "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: cannot write or read") and err.count("\n") == 1 and "Traceback" not in err


def test_a_full_disk_keeps_the_last_checkpoint_and_a_cut_record_is_tolerated(tmp_path, monkeypatch, capsys):
    base = ["--config", SMOKE, "train.epochs=3", "--no-progress"]
    assert train.main([*base, f"out_dir={tmp_path / 'ref'}"]) == 0

    out = tmp_path / "run"
    real_save, saves = torch.save, []

    def save_until_full(obj, f, *a, **k):  # the disk fills while the epoch-2 checkpoint is written
        saves.append(1)
        if obj["train_state"]["epoch"] == 2:
            f.write(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(obj, f, *a, **k)

    monkeypatch.setattr(checkpoint_module.torch, "save", save_until_full)
    assert train.main([*base, f"out_dir={out}"]) == 2
    assert "no space left" in capsys.readouterr().err.split("free some space, then --resume the run")[0]
    assert load_checkpoint(out)["train_state"]["epoch"] == 1  # the previous checkpoint, intact
    assert not list(out.glob(".checkpoint.pt.*"))  # no temporary file left behind
    monkeypatch.setattr(checkpoint_module.torch, "save", real_save)

    real_append = metrics_file.append_record

    def cut_record(record, path):  # a crash while the epoch-3 record is written leaves half a line
        if record["epoch"] == 3:
            with open(path, "a") as f:
                f.write(json.dumps(record)[:20])
            raise OSError(errno.ENOSPC, "No space left on device")
        real_append(record, path)

    monkeypatch.setattr(train, "append_record", cut_record)
    assert train.main(["--resume", str(out), "--no-progress"]) == 2
    assert not (out / "metrics.jsonl").read_text().endswith("\n")
    monkeypatch.setattr(train, "append_record", real_append)
    assert train.main(["--resume", str(out), "--no-progress"]) == 0
    assert_same_run(tmp_path / "ref", out)


def test_a_damaged_record_before_the_last_is_an_error(tmp_path, capsys):
    out = tmp_path / "run"
    assert train.main(["--config", SMOKE, f"out_dir={out}", "train.epochs=1", "--no-progress"]) == 0
    (out / "metrics.jsonl").write_text("{broken\n" + (out / "metrics.jsonl").read_text())
    ckpt = load_checkpoint(out)
    ckpt["config"]["train"]["epochs"] = 2
    checkpoint_module.save_atomic(ckpt, out / "checkpoint.pt")
    assert train.main(["--resume", str(out), "--no-progress"]) == 2
    assert "line 1, is not a JSON record" in capsys.readouterr().err


def test_a_broken_image_file_is_named_with_its_folder(tmp_path, capsys):
    for split in ("train", "test"):
        for c in ("cat", "dog"):
            folder = tmp_path / split / c
            folder.mkdir(parents=True)
            for i in range(4):
                Image.new("RGB", (20, 20), (60 * i, 0, 0)).save(folder / f"{i}.png")
    (tmp_path / "train" / "dog" / "notes.png").write_text("this is not an image")
    assert train.main(["--config", SMOKE, "data.dataset=imagefolder", f"data.root={tmp_path}",
                       f"out_dir={tmp_path / 'run'}", "train.batch_size=4", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "notes.png is not a readable image" in err and str(tmp_path / "train" / "dog") in err
    assert "Traceback" not in err


def test_debug_shows_the_traceback(tmp_path):
    from vitpe.config import ConfigError
    with pytest.raises(ConfigError):
        train.main(["--config", SMOKE, "train.epoch=3", "--debug"])
