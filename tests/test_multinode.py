"""Two machines as two torchrun node processes on this one (c10d rendezvous on 127.0.0.1, gloo): they train the model
one process trains with the same global batch; SIGTERM to one node stops both with a checkpoint; the run resumes in
one process, on another number of processes, to the uninterrupted run's weights.

Tolerance: two nodes see the same images of each global batch, with the same views, BatchNorm statistics over the
whole batch and the same averaged gradient -- only float32 sums are grouped otherwise (each rank sums its half, gloo
adds the halves), which moves a weight by about 1e-7 per step. Over the few steps here the weights agree to 2e-5
(measured: 1e-7 to 4e-7); a real difference in what is trained (another image, view or statistic) moves them by 1e-2
(measured with per-rank BatchNorm: 1.5e-2).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from vitpe.cli import train as train_cli
from conftest import photo_folder
from vitpe.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = 2e-5
TINY = """model: {pe: cpb, dim: 32, depth: 2, heads: 2, mlp_ratio: 2.0, patch_size: 4, img_size: 16, pool: mean,
        fc_norm: true, stem: conv}
data: {dataset: imagefolder, img_size: 24, crop_padding: 0, crop_scale: [0.35, 1], hflip: true, cache_dir: 'off'}
train: {epochs: 2, batch_size: 16, lr: 0.002, warmup_epochs: 0.5, img_sizes: [16], threads: 1, device: cpu,
        eval_batch_size: 32}
"""
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="two torchrun nodes on one Linux machine")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def setup(tmp_path):
    data = photo_folder(tmp_path / "data", per_class=12)  # 36 training images: 2 global batches of 16 an epoch
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY)
    return config, data


def nodes(config: Path, data: Path, out: Path, *overrides: str) -> list[subprocess.Popen]:
    """Two torchrun agents, one process each, meeting at a c10d rendezvous on 127.0.0.1."""
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    launch = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1",
              "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", f"--rdzv_id=vitpe-{port}"]
    args = [str(ROOT / "train.py"), "--config", str(config), "--no-progress", f"data.root={data}", f"out_dir={out}",
            "train.batch_size=8", *overrides]  # 8 per node: the global batch of 16
    return [subprocess.Popen([*launch, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True) for _ in range(2)]


def one_process(config: Path, data: Path, out: Path, *overrides: str) -> None:
    assert train_cli.main(["--config", str(config), "--no-progress", f"data.root={data}", f"out_dir={out}",
                           *overrides]) == 0


def weights_gap(a: Path, b: Path) -> float:
    first, second = (torch.load(run / "checkpoint.pt", weights_only=True)["model"] for run in (a, b))
    return max((first[k].double() - second[k].double()).abs().max().item() for k in first)


def losses(run: Path) -> list[float]:
    return [json.loads(line)["train_loss"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def finish(procs: list[subprocess.Popen], timeout: float = 240) -> list[tuple[int, str]]:
    results = []
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        results.append((proc.returncode, err))
    return results


@pytest.mark.slow
@pytest.mark.parametrize("loader", ["memory", "stream"])
def test_two_nodes_train_the_weights_of_one_process_with_the_same_global_batch(setup, tmp_path, loader):
    config, data = setup
    options = [f"data.loader={loader}"] + (["data.workers=1"] if loader == "stream" else [])
    one_process(config, data, tmp_path / "one", *options)
    for code, err in finish(nodes(config, data, tmp_path / "two", *options)):
        assert code == 0, err[-3000:]
    assert weights_gap(tmp_path / "one", tmp_path / "two") < TOLERANCE
    assert losses(tmp_path / "two") == pytest.approx(losses(tmp_path / "one"), rel=1e-5)  # the global batch's loss
    saved = torch.load(tmp_path / "two" / "checkpoint.pt", weights_only=True)
    assert saved["train_state"]["world"] == 2


@pytest.mark.slow
def test_sigterm_to_one_node_stops_both_and_the_run_resumes_in_one_process(setup, tmp_path):
    config, data = setup
    epochs = ["train.epochs=12", "train.checkpoint_every=1"]
    one_process(config, data, tmp_path / "one", *epochs)
    run = tmp_path / "two"
    procs = nodes(config, data, run, *epochs)
    deadline = time.monotonic() + 180
    while not (run / "metrics.jsonl").is_file() or len(losses(run)) < 2:
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "the nodes did not train"
        time.sleep(0.1)
    os.kill(procs[1].pid, signal.SIGTERM)  # the second node's torchrun agent, as a scheduler stops a machine
    results = finish(procs)
    assert all(code != 0 for code, _ in results)
    said = "".join(err for _, err in results)
    assert said.count("preempted by") == 2  # both ranks stopped at one step, each says so in one line
    state = torch.load(run / "checkpoint.pt", weights_only=True)["train_state"]
    assert 2 <= state["epoch"] < 12 and state["world"] == 2
    assert train_cli.main(["--resume", str(run), "--no-progress"]) == 0  # one process: batch 16, the same steps
    assert weights_gap(tmp_path / "one", run) < TOLERANCE
    assert losses(run) == pytest.approx(losses(tmp_path / "one"), rel=1e-5)


def test_a_resume_keeps_the_global_batch_or_says_why_it_cannot(tmp_path):
    config = load_config(str(ROOT / "configs" / "imagenette.yaml"), ["train.batch_size=12"])
    assert train_cli.keep_global_batch(config, 2, 2) == ""
    note = train_cli.keep_global_batch(config, 2, 3)
    assert config.train.batch_size == 8 and "the same global batch of 24" in note
    with pytest.raises(ConfigError, match=r"global batch of 24 \(3 processes x 8\), which 5 processes cannot share "
                                          r"evenly: resume it on a number of processes that divides 24"):
        train_cli.keep_global_batch(config, 3, 5)
