"""model.init=run:DIR: a vitpe run fine-tuned at another size or length, its PE mapped by the chosen resize mode;
what the new run records; the mistakes that stop it before any training, in one line."""

import json

import pytest
import torch

from vitpe.cli import train
from vitpe.loading.checkpoint import load_checkpoint, model_from_checkpoint
from vitpe.resolution.sweep import evaluate_run, find_run

SOURCE = ["--config", "configs/smoke.yaml", "data.synthetic_size=128", "train.epochs=1", "--no-progress"]
TEXT = ["--config", "configs/order.yaml", "data.synthetic_size=256", "train.epochs=1", "model.dim=32", "--no-progress"]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A 16 px run (patch 4: a 4 x 4 grid) with a learned table."""
    out = tmp_path_factory.mktemp("source") / "run"
    assert train.main([*SOURCE, f"out_dir={out}"]) == 0
    return out


def finetune(source, out, *extra):
    return train.main([*SOURCE, f"out_dir={out}", f"model.init=run:{source}", "train.img_sizes=[24]", *extra])


def test_a_run_fine_tuned_at_a_larger_size_keeps_its_reference_grid_and_records_its_origin(source, tmp_path, capsys):
    out = tmp_path / "ft"
    assert finetune(source, out) == 0
    log = capsys.readouterr().out
    assert f"architecture from run:{source}" in log and "reference img_size stays 16" in log
    origin = json.loads((out / "init.json").read_text())
    assert origin["run"] == str(source) and origin["checkpoint"].endswith("checkpoint.pt") and origin["epoch"] == 1
    assert origin["step"] == json.loads((source / "metrics.jsonl").read_text().splitlines()[-1])["step"]
    model, ckpt = model_from_checkpoint(out)
    assert ckpt["config"]["model"]["img_size"] == 16 and model.pe.grid == (4, 4)  # positions interpolated to 6 x 6
    assert ckpt["normalization"] == load_checkpoint(source)["normalization"]
    assert json.loads((out / "metrics.jsonl").read_text().splitlines()[0])["step"] > 0  # a fresh schedule from 0


def test_the_weights_start_where_the_source_ended(source, tmp_path):
    out = tmp_path / "ft0"
    assert finetune(source, out, "train.lr=1e-12", "train.min_lr=0", "train.warmup_epochs=0") == 0
    tuned, _ = model_from_checkpoint(out, use_ema=False)
    original, _ = model_from_checkpoint(source, use_ema=False)
    for (name, a), (_, b) in zip(tuned.state_dict().items(), original.state_dict().items()):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0, msg=name)  # a learning rate of 1e-12 moved nothing
    # The in-training test runs at the size the run trains at (24 px), not at the inherited 16 px reference
    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    at_24 = evaluate_run(find_run(out), [(24, 24)], ["interpolate"])[0]
    assert record["test_img_size"] == 24 and record["test_acc"] == pytest.approx(at_24["accuracy"], abs=1e-9)
    assert json.loads((source / "metrics.jsonl").read_text().splitlines()[-1])["test_img_size"] == 16


def test_a_new_reference_size_resamples_the_table_once(source, tmp_path, capsys):
    out = tmp_path / "moved"
    assert finetune(source, out, "model.img_size=24") == 0
    assert "reference img_size 16 -> 24" in capsys.readouterr().out
    model, _ = model_from_checkpoint(out)
    assert model.pe.grid == (6, 6) and model.pe.pos_embed.shape[-2] == 36


def test_a_patch_2_run_fine_tunes_from_a_config_that_names_no_patch_size(tmp_path):
    source = tmp_path / "patch2"
    assert train.main([*SOURCE, f"out_dir={source}", "model.patch_size=2"]) == 0
    out = tmp_path / "ft"
    assert train.main(["--config", "configs/finetune_res.yaml", f"out_dir={out}", f"model.init=run:{source}",
                       "data.dataset=synthetic", "data.synthetic_size=128", "data.img_size=16", "train.img_sizes=[24]",
                       "--no-progress"]) == 0
    model, _ = model_from_checkpoint(out)
    assert model.patch_size == 2 and model.pe.grid == (8, 8)


@pytest.mark.parametrize("extra, says", [
    (["model.pe_resize=extrapolate"], "cannot work at the training grid (6, 6) in the extrapolate mode"),
    (["model.patch_size=2"], "was trained with patch 4; fine-tuning keeps the patch size"),
    (["model.pe_resize=ntk"], "learnable has no frequencies to scale"),
])
def test_a_pe_that_cannot_be_mapped_so_is_refused_before_training(source, tmp_path, capsys, extra, says):
    out = tmp_path / "refused"
    assert finetune(source, out, *extra) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert not (out / "checkpoint.pt").exists()


@pytest.mark.parametrize("spec, says", [
    ("run:{tmp}/nothing", "is not a vitpe run folder (no config.yaml)"),
    ("run:{source}@missing.pt", "no checkpoint at"),
    ("run:@best.pt", "expected run:RUN_DIR or run:RUN_DIR@CHECKPOINT"),
    ("bert:base", "model.init must be timm:NAME[@WEIGHTS_FILE] (a pretrained timm model) or run:RUN_DIR"),
])
def test_bad_specs_are_one_line(source, tmp_path, capsys, spec, says):
    (tmp_path / "nothing").mkdir()
    code = train.main([*SOURCE, f"out_dir={tmp_path / 'x'}", f"model.init={spec.format(tmp=tmp_path, source=source)}"])
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err


def test_a_corrupt_checkpoint_is_one_line(source, tmp_path, capsys):
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    assert train.main([*SOURCE, f"out_dir={tmp_path / 'x'}", f"model.init=run:{source}@{tmp_path / 'bad.pt'}"]) == 2
    assert "corrupt or not a vitpe checkpoint" in capsys.readouterr().err


def test_a_text_run_fine_tuned_at_a_longer_length_keeps_its_vocabulary_and_reference(tmp_path, capsys):
    src = tmp_path / "text"
    assert train.main([*TEXT, f"out_dir={src}", "model.pe=rope_axial"]) == 0
    out = tmp_path / "longer"
    assert train.main([*TEXT, f"out_dir={out}", f"model.init=run:{src}", "data.max_len=32", "data.min_len=24",
                       "model.pe_resize=yarn"]) == 0
    assert "reference max_len stays 16" in capsys.readouterr().out
    model, ckpt = model_from_checkpoint(out)
    assert ckpt["vocab"] == load_checkpoint(src)["vocab"] and model.pe.grid == (16,) and model.pe.resize == "yarn"


def test_a_fine_tuning_run_resumes_from_its_own_checkpoint(source, tmp_path):
    out = tmp_path / "ft2"
    assert finetune(source, out, "train.epochs=2") == 0
    assert train.main(["--resume", str(out), "--no-progress"]) == 0  # finished: nothing to do, no init again
