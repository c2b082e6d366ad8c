"""train.py and eval.py on text: synthetic tasks end to end, a short real SST-2 run, length sweeps, errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from vitpe.cli import evaluate as eval_cli
from vitpe.cli import train
from vitpe.config import ConfigError, load_config
from vitpe.data.text import Vocabulary
from vitpe.loading.checkpoint import model_from_checkpoint

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("VITPE_DATA", ROOT / ".." / "shared" / "data"))
TINY = ["model.dim=32", "model.depth=2", "model.heads=2", "data.synthetic_size=768", "data.min_len=8",
        "data.max_len=16", "train.epochs=2", "train.batch_size=64", "train.lr=0.003", "--no-progress"]
RECORD_KEYS = {"run", "pe", "length", "pe_resize", "accuracy", "loss", "n"}


def _train(out: Path, *extra: str, config: str = "order") -> int:
    return train.main(["--config", str(ROOT / "configs" / f"{config}.yaml"), f"out_dir={out}", *TINY, *extra])


@pytest.fixture(scope="module")
def text_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("text_runs")
    for name, pe in (("learnable", "learnable"), ("rope", "rope_axial")):
        assert _train(root / name, f"model.pe={pe}") == 0
    return root


def test_text_run_folder_is_complete_and_rebuilds_from_its_checkpoint(text_runs):
    run = text_runs / "rope"
    for name in ("config.yaml", "metrics.jsonl", "checkpoint.pt", "best.pt", "vocab.json", "data_stats.json"):
        assert (run / name).is_file(), name
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2] and records[-1]["seq_per_s"] > 0
    stats = json.loads((run / "data_stats.json").read_text())
    assert stats["train"]["max"] <= 16 and stats["test"]["n"] == 768 // 4
    model, ckpt = model_from_checkpoint(run / "checkpoint.pt")
    assert ckpt["vocab"] == Vocabulary.load(run / "vocab.json").tokens
    assert type(model).__name__ == "TextClassifier" and model.max_len == 16


def test_text_runs_are_reproducible(text_runs, tmp_path):
    assert _train(tmp_path / "again", "model.pe=rope_axial") == 0
    assert (tmp_path / "again" / "metrics.jsonl").read_text().count("test_acc") == 2
    first = [json.loads(line) for line in (text_runs / "rope" / "metrics.jsonl").read_text().splitlines()]
    again = [json.loads(line) for line in (tmp_path / "again" / "metrics.jsonl").read_text().splitlines()]
    for a, b in zip(first, again):
        assert (a["train_loss"], a["test_acc"], a["test_loss"]) == (b["train_loss"], b["test_acc"], b["test_loss"])


def test_length_sweep_writes_every_file_with_reasons_where_unavailable(text_runs, tmp_path):
    args = [str(text_runs / "learnable"), str(text_runs / "rope"), "--lengths", "12,16,32,64", "--out", str(tmp_path)]
    assert eval_cli.main(args) == 0
    for name in ("length.json", "length.csv", "length.md", "length.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    records = json.loads((tmp_path / "length.json").read_text())
    assert len(records) == 2 * 4 * 2
    for r in records:
        assert RECORD_KEYS <= set(r)
        if r["accuracy"] is None:  # only a learned table asked to extrapolate past max_len
            assert (r["pe"], r["pe_resize"]) == ("learnable", "extrapolate") and r["length"] > 16
            assert "interpolate" in r["reason"]
        else:
            assert 0 <= r["accuracy"] <= 1 and r["n"] == 768 // 4
    for run in ("learnable", "rope"):  # up to max_len both modes are the same model
        for length in (12, 16):
            pair = [r["accuracy"] for r in records if r["run"] == run and r["length"] == length]
            assert pair[0] == pair[1]
    assert eval_cli.main(args) == 0  # rerun: cached, identical
    assert json.loads((tmp_path / "length.json").read_text()) == records


def test_length_sweep_errors(text_runs, tmp_path, capsys):
    run = str(text_runs / "rope")
    assert eval_cli.main([run, "--lengths", "16,abc", "--out", str(tmp_path)]) == 2
    assert "bad --lengths" in capsys.readouterr().err
    assert eval_cli.main([run, "--out", str(tmp_path)]) == 2  # a text run needs --lengths
    assert "--lengths" in capsys.readouterr().err
    assert eval_cli.main([run, "--lengths", "16", "--plot-pe", "--out", str(tmp_path)]) == 2
    assert "--plot-pe" in capsys.readouterr().err


def test_text_config_errors():
    with pytest.raises(ConfigError, match="data.dataset must be a text data set"):
        load_config(None, ["task=text", "data.dataset=cifar10"])
    with pytest.raises(ConfigError, match="data.dataset must be a image data set|one of"):
        load_config(None, ["data.dataset=sst2"])
    with pytest.raises(ConfigError, match="off for text"):
        load_config(None, ["task=text", "data.dataset=order", "data.mixup=0.8"])
    with pytest.raises(ConfigError, match="data.eval_split"):
        load_config(None, ["data.eval_split=dev"])
    with pytest.raises(ConfigError, match="data.word_dropout must be in"):
        load_config(None, ["task=text", "data.dataset=sst2", "data.word_dropout=1.5"])
    with pytest.raises(ConfigError, match="data.word_dropout must be 0 for images"):
        load_config(None, ["data.word_dropout=0.1"])


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "sst2" / "train.tsv").is_file(), reason="SST-2 not in VITPE_DATA")
def test_short_real_sst2_run_learns_above_chance(tmp_path, capsys):
    out = tmp_path / "sst2"
    assert train.main(["--config", str(ROOT / "configs" / "sst2.yaml"), f"out_dir={out}", f"data.root={DATA}",
                       "data.train_limit=12000", "model.dim=64", "model.depth=1", "train.epochs=2",
                       "train.batch_size=64", "train.lr=0.003", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "train: 12000 sequences" in printed and "dev: 872 sequences" in printed
    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert record["test_acc"] > 0.65, record  # dev accuracy; chance is ~0.51
    assert eval_cli.main([str(out), "--lengths", "32", "--out", str(tmp_path / "ev")]) == 2
    assert "SST-2" in capsys.readouterr().err


def test_a_compiled_text_run_pads_its_batches_to_a_few_widths_and_compiles_each_once(tmp_path, monkeypatch):
    """train.compile=true on text: every training batch padded to a multiple of 8 tokens, one graph per width, none
    past dynamo's limit (its lengths, 8 to 16 tokens here, would take one graph each)."""
    import functools

    import torch._dynamo as dynamo
    from torch._dynamo.testing import CompileCounter

    from vitpe.data.text_loader import TextBatchLoader
    from vitpe.engine.compiled import SizeCompiled

    counter, widths = CompileCounter(), set()
    monkeypatch.setattr(train, "missing_compiler", lambda device: None)  # a counting backend needs no C++ compiler
    monkeypatch.setattr(train, "SizeCompiled", functools.partial(SizeCompiled, backend=counter))
    batch = TextBatchLoader.batch

    def recording_batch(self, *args, **kwargs):
        out = batch(self, *args, **kwargs)
        if self.train:
            widths.add(out[0][0].shape[1])
        return out

    monkeypatch.setattr(TextBatchLoader, "batch", recording_batch)
    dynamo.reset()
    try:
        assert _train(tmp_path / "run", "model.pe=alibi", "train.compile=true") == 0
    finally:
        dynamo.reset()
    assert widths == {8, 16} and counter.frame_count == 2
