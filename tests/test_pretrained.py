"""Pretrained timm models in vitpe's workflows: ``train.py ... model.init=timm:NAME@FILE`` and
``eval.py timm:NAME@FILE --data imagefolder:DIR``. Weights come from local files (never the network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import timm
import torch
from PIL import Image

from vitpe.cli import evaluate as eval_cli
from vitpe.cli import train
from vitpe.loading.checkpoint import model_from_checkpoint

ROOT = Path(__file__).resolve().parents[1]
FINETUNE = str(ROOT / "configs" / "finetune.yaml")
SYNTHETIC = ["data.dataset=synthetic", "data.synthetic_size=128", "data.img_size=32", "train.img_sizes=[32]",
             "train.epochs=1", "train.batch_size=32", "--no-progress"]


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    """A randomly initialised vit_tiny_patch16_224 saved as a weights file, its class token and table moved."""
    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    path = tmp_path_factory.mktemp("weights") / "vit_tiny.pth"
    torch.save(model.state_dict(), path)
    return path


def spec(weights: Path) -> str:
    return f"timm:vit_tiny_patch16_224@{weights}"


@pytest.mark.slow
def test_a_run_starts_from_converted_weights(weights, tmp_path, capsys):
    out = tmp_path / "run"
    assert train.main(["--config", FINETUNE, f"out_dir={out}", f"model.init={spec(weights)}", *SYNTHETIC]) == 0
    printed = capsys.readouterr().out
    assert "architecture from" in printed and "new head for 10 classes" in printed
    model, ckpt = model_from_checkpoint(out / "checkpoint.pt")  # the checkpoint alone rebuilds it
    assert (model.embed_dim, len(model.blocks), model.patch_size, model.grid) == (192, 12, 16, (2, 2))
    assert ckpt["normalization"] == {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}  # timm's data config
    assert ckpt["config"]["model"]["norm_eps"] == 1e-6 and model.pe.name == "learnable"


def test_retrofit_a_rotation_onto_an_absolute_pe_model(weights, tmp_path, capsys):
    out = tmp_path / "rope"
    assert train.main(["--config", FINETUNE, f"out_dir={out}", f"model.init={spec(weights)}", "model.pe=rope_mixed",
                       "train.lr=1e-12", "train.min_lr=0", *SYNTHETIC]) == 0
    assert "replaced by rope_mixed" in capsys.readouterr().out
    model, _ = model_from_checkpoint(out / "checkpoint.pt")
    source = timm.create_model("vit_tiny_patch16_224", pretrained=True, pretrained_cfg_overlay={"file": str(weights)})
    assert model.pe.name == "rope_mixed" and "pe.pos_embed" not in model.state_dict()
    assert torch.allclose(model.blocks[3].mlp.fc1.weight, source.blocks[3].mlp.fc1.weight, atol=1e-6)


def test_conflicts_and_bad_specs_are_one_line(weights, tmp_path, capsys):
    assert train.main(["--config", FINETUNE, f"out_dir={tmp_path / 'a'}", f"model.init={spec(weights)}",
                       "model.dim=64", *SYNTHETIC]) == 2
    assert "model.dim=64 but" in capsys.readouterr().err
    assert train.main(["--config", FINETUNE, f"out_dir={tmp_path / 'b'}", "model.init=hub:vit", *SYNTHETIC]) == 2
    assert "timm:NAME" in capsys.readouterr().err
    assert train.main(["--config", FINETUNE, f"out_dir={tmp_path / 'c'}",
                       f"model.init=timm:vit_tiny_patch16_224@{tmp_path / 'missing.pth'}", *SYNTHETIC]) == 2
    assert "no weights file at" in capsys.readouterr().err


class _WritesAFile:
    """Pickled, it would create ``path`` when unpickled: the code a weights file may bring."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def test_a_weights_file_that_brings_code_is_refused_whatever_timm_does(tmp_path, monkeypatch, capsys):
    marker = tmp_path / "code_ran"
    evil = tmp_path / "vit_tiny.pth"
    torch.save({"pos_embed": torch.zeros(1), "payload": _WritesAFile(marker)}, evil)

    def old_timm(name, pretrained=False, pretrained_cfg_overlay=None, **kwargs):  # reads files with pickle, in full
        torch.load(pretrained_cfg_overlay["file"], weights_only=False)
        raise AssertionError("unreachable: vitpe must refuse the file before timm reads it")

    monkeypatch.setattr(timm, "create_model", old_timm)
    assert train.main(["--config", FINETUNE, f"out_dir={tmp_path / 'run'}", f"model.init={spec(evil)}",
                       *SYNTHETIC]) == 2
    err = capsys.readouterr().err
    assert "is not a plain weights file that can be read safely" in err and "nothing in it was run" in err
    assert "weights_only` set to `False`" not in err  # torch's own advice to load it unsafely is not passed on
    assert not marker.exists()


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("val")
    g = torch.Generator().manual_seed(0)
    for c in range(3):
        (root / f"n0{c}").mkdir()
        for i in range(3):
            pixels = torch.randint(0, 256, (70 + 10 * i, 90, 3), generator=g, dtype=torch.uint8).numpy()
            Image.fromarray(pixels).save(root / f"n0{c}" / f"{i}.png")
    return root


@pytest.mark.slow
def test_eval_sweeps_a_pretrained_model_as_timm_feeds_it(weights, folder, tmp_path):
    out = tmp_path / "sweep"
    assert eval_cli.main([spec(weights), "--data", f"imagefolder:{folder}", "--resolutions", "224,160x192,256",
                          "--out", str(out), "--workers", "0"]) == 0
    records = json.loads((out / "resolution.json").read_text())
    assert len(records) == 6 and {r["run"] for r in records} == {"vit_tiny_patch16_224"}
    at_native = [r for r in records if r["resolution"] == 224]
    assert all(r["n"] == 9 for r in at_native)
    extrapolated = next(r for r in records if r["resolution"] == 256 and r["pe_resize"] == "extrapolate")
    assert extrapolated["accuracy"] is None and "interpolate" in extrapolated["reason"]  # a learned table
    # at 224 px the converted model gives timm's own loss on timm's own preprocessing
    from timm.data import create_transform, resolve_data_config
    from torchvision.datasets import ImageFolder
    model = timm.create_model("vit_tiny_patch16_224", pretrained=True, pretrained_cfg_overlay={"file": str(weights)})
    data = ImageFolder(str(folder), transform=create_transform(**resolve_data_config({}, model=model)))
    x, y = torch.stack([data[i][0] for i in range(len(data))]), torch.tensor(data.targets)
    with torch.no_grad():
        loss = torch.nn.functional.cross_entropy(model.eval()(x), y).item()
    assert at_native[0]["loss"] == pytest.approx(loss, rel=1e-5)


def test_eval_argument_errors(weights, folder, tmp_path, capsys):
    assert eval_cli.main([spec(weights), "--out", str(tmp_path)]) == 2
    assert "--data imagefolder:DIR" in capsys.readouterr().err
    assert eval_cli.main([spec(weights), "--data", f"imagefolder:{tmp_path / 'none'}", "--out", str(tmp_path)]) == 2
    assert "is not a folder" in capsys.readouterr().err
    missing = f"timm:vit_tiny_patch16_224@{tmp_path / 'missing.pth'}"  # once: "No such file or directory" alone
    assert eval_cli.main([missing, "--data", f"imagefolder:{folder}", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no weights file at" in err and err.startswith(f"error: eval.py {missing!r}")  # not a model.init never set


@pytest.mark.slow
@pytest.mark.parametrize("name, size, resolutions", [("eva02_tiny_patch14_224", 28, "224,140x168"),
                                                     ("vit_tiny_patch16_dinov3_qkvb", 32, "224,160x192")])
def test_todays_rope_vits_fine_tune_and_evaluate_from_a_weights_file(name, size, resolutions, folder, tmp_path):
    torch.manual_seed(0)
    path = tmp_path / f"{name}.pth"
    torch.save(timm.create_model(name, pretrained=False).state_dict(), path)
    out = tmp_path / "run"
    assert train.main(["--config", FINETUNE, f"out_dir={out}", f"model.init=timm:{name}@{path}", *SYNTHETIC,
                       f"data.img_size={size}", f"train.img_sizes=[{size}]"]) == 0
    model, _ = model_from_checkpoint(out / "checkpoint.pt")
    assert model.pe.name == ("rope_dinov3" if "dinov3" in name else "learnable+rope_axial")
    assert model.grid == (2, 2) and type(model.blocks[0].mlp).__name__ == ("Mlp" if "dinov3" in name else "SwiGLU")
    assert eval_cli.main([f"timm:{name}@{path}", "--data", f"imagefolder:{folder}", "--resolutions", resolutions,
                          "--out", str(tmp_path / "sweep"), "--workers", "0"]) == 0
    records = json.loads((tmp_path / "sweep" / "resolution.json").read_text())
    assert {r["resolution"] for r in records if r["accuracy"] is not None} == {224, "160x192" if "dinov3" in name
                                                                               else "140x168"}


def test_weights_that_cannot_be_fetched_name_the_command_that_asked_for_them(monkeypatch):
    """A download that fails (no network) is one line starting with the key or command given the spec."""
    from vitpe.config import ConfigError
    from vitpe.loading.pretrained import load_pretrained

    def offline(*args, **kwargs):
        raise OSError("could not reach the hub")

    monkeypatch.setattr(timm, "create_model", offline)
    monkeypatch.setattr("vitpe.loading.pretrained.offline_weights", lambda *args: None)  # as if the hub resolved
    for where in ("model.init", "eval.py"):
        with pytest.raises(ConfigError) as err:
            load_pretrained("timm:vit_tiny_patch16_224", where)
        assert str(err.value).startswith(f"{where} 'timm:vit_tiny_patch16_224': the weights could not be loaded "
                                         "(no network, or not downloadable here?): could not reach the hub")


def test_without_the_hub_cached_weights_load_at_once_and_missing_ones_stop_at_once(monkeypatch, tmp_path):
    """No network: timm would retry the hub for a minute; vitpe loads the cached file, or says what to do, at once."""
    import socket

    from safetensors.torch import save_file

    from vitpe.config import ConfigError
    from vitpe.loading import hub_reach
    from vitpe.loading.pretrained import load_pretrained

    def no_dns(*args, **kwargs):
        raise socket.gaierror("Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    assert not hub_reach.hub_reachable()
    name = "vit_tiny_patch16_224.augreg_in21k_ft_in1k"

    def no_download(*args, **kwargs):
        raise AssertionError("the hub was asked")

    monkeypatch.setattr("timm.models._hub.hf_hub_download", no_download)
    monkeypatch.setattr(hub_reach, "cached_weights", lambda model, cache_dir=None: None)
    with pytest.raises(ConfigError, match=f"cannot be reached from here .* {name}'s weights are not in its local cache; "
                                          f"download them .* timm:{name}@/path/to/weights"):
        load_pretrained(f"timm:{name}", "eval.py")

    # a hub cache as huggingface_hub lays it out, holding the model's weights
    snapshot = tmp_path / f"models--timm--{name}" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (tmp_path / f"models--timm--{name}" / "refs").mkdir()
    (tmp_path / f"models--timm--{name}" / "refs" / "main").write_text("0" * 40)
    reference = timm.create_model(name, pretrained=False)
    save_file(reference.state_dict(), str(snapshot / "model.safetensors"))
    monkeypatch.undo()
    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    monkeypatch.setattr("timm.models._hub.hf_hub_download", no_download)
    assert hub_reach.cached_weights(name, str(tmp_path)) == str(snapshot / "model.safetensors")
    cached = hub_reach.cached_weights
    monkeypatch.setattr(hub_reach, "cached_weights", lambda model, cache_dir=None: cached(model, str(tmp_path)))
    loaded = load_pretrained(f"timm:{name}", "model.init")
    assert torch.equal(loaded.converted.state_dict["head.weight"], reference.state_dict()["head.weight"])
