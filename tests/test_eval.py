"""eval.py end to end on tiny checkpoints trained here (synthetic data)."""

import copy
import json
import shutil
from pathlib import Path

import pytest
import torch

from vitpe.cli import evaluate as eval_cli
from vitpe.cli import train
from vitpe.loading.checkpoint import evaluation_fingerprint, model_from_checkpoint
from vitpe.resolution import parse_resolutions
from vitpe.resolution.sweep import batch_size_for, file_sha256

ROOT = Path(__file__).resolve().parents[1]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
RECORD_KEYS = {"run", "pe", "resolution", "pe_resize", "accuracy", "loss", "n"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    for name, pe, seed in (("learnable-s0", "learnable", 0), ("learnable-s1", "learnable", 1),
                           ("rope-s0", "rope_axial", 0)):
        assert train.main(["--config", SMOKE, f"out_dir={root / name}", f"model.pe={pe}", f"train.seed={seed}",
                           "--no-progress"]) == 0
    return root


def _eval(runs, out, *extra):
    args = [str(runs / n) for n in ("learnable-s0", "learnable-s1", "rope-s0")]
    return eval_cli.main([*args, "--resolutions", "8,16,24,16x24", "--pe-resize", "interpolate,extrapolate",
                          "--out", str(out), *extra])


def test_writes_every_file_with_the_schema(runs, tmp_path):
    assert _eval(runs, tmp_path, "--plot-pe") == 0
    for name in ("resolution.json", "resolution.csv", "resolution.md", "resolution.png", "pe_learnable-s0.png",
                 "pe_rope-s0.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    records = json.loads((tmp_path / "resolution.json").read_text())
    assert len(records) == 3 * 4 * 2
    for r in records:
        assert RECORD_KEYS <= set(r)
        assert (r["accuracy"] is None) == ("reason" in r)
        if r["accuracy"] is not None:
            assert 0 <= r["accuracy"] <= 1 and r["n"] == 128
    assert {r["resolution"] for r in records} == {8, 16, 24, "16x24"}


def test_unavailable_combinations_carry_reasons(runs, tmp_path):
    _eval(runs, tmp_path)
    records = json.loads((tmp_path / "resolution.json").read_text())
    missing = [r for r in records if r["accuracy"] is None]
    assert {(r["pe"], r["resolution"], r["pe_resize"]) for r in missing} == \
        {("learnable", 24, "extrapolate"), ("learnable", "16x24", "extrapolate")}
    assert all("interpolate" in r["reason"] for r in missing)
    table = (tmp_path / "resolution.md").read_text()
    assert "| learnable | extrapolate |" in table and "n/a" in table and "± " in table  # two seeds averaged
    for r in missing:  # the reasons on the page, not only in the JSON
        assert "- learnable, extrapolate, at " in table and f"{r['resolution']}" in table and r["reason"] in table


@pytest.mark.slow
def test_the_table_is_printed_not_only_its_path(runs, tmp_path, capsys):
    _eval(runs, tmp_path)
    printed = capsys.readouterr().out
    assert "| rope_axial | interpolate |" in printed and str(tmp_path / "resolution.md") in printed


def test_native_resolution_matches_training_evaluation(runs, tmp_path):
    _eval(runs, tmp_path)
    records = json.loads((tmp_path / "resolution.json").read_text())
    for name in ("learnable-s0", "rope-s0"):
        trained = json.loads((runs / name / "metrics.jsonl").read_text().splitlines()[-1])
        native = [r for r in records if r["run"] == name and r["resolution"] == 16]
        assert len(native) == 2
        for r in native:
            assert r["accuracy"] == trained["test_acc"]
            assert r["loss"] == pytest.approx(trained["test_loss"], rel=1e-6)


@pytest.mark.slow
def test_results_are_deterministic(runs, tmp_path):
    _eval(runs, tmp_path / "a")
    _eval(runs, tmp_path / "b")
    assert (tmp_path / "a" / "resolution.json").read_text() == (tmp_path / "b" / "resolution.json").read_text()


def _count_evaluations(monkeypatch) -> list[str]:
    """The names of the runs eval.py evaluates from now on (cache hits are not)."""
    import vitpe.resolution.sweep as sweep

    evaluated, real = [], sweep.evaluate_run
    monkeypatch.setattr(sweep, "evaluate_run", lambda run, *a, **k: evaluated.append(run.name) or real(run, *a, **k))
    return evaluated


@pytest.mark.slow
def test_rerun_reuses_cached_records_and_evaluates_again_for_other_settings(runs, tmp_path, monkeypatch):
    assert _eval(runs, tmp_path) == 0
    first = (tmp_path / "resolution.json").read_text()
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["learnable-s0.json", "learnable-s1.json",
                                                                   "rope-s0.json"]
    evaluated = _count_evaluations(monkeypatch)
    assert _eval(runs, tmp_path) == 0
    assert evaluated == [] and (tmp_path / "resolution.json").read_text() == first
    # other settings (here: --limit) or an unreadable entry are evaluated again (other weights: the test below)
    assert _eval(runs, tmp_path, "--limit", "64") == 0
    assert evaluated == ["learnable-s0", "learnable-s1", "rope-s0"]
    evaluated.clear()
    (tmp_path / "runs" / "rope-s0.json").write_text("{not json")
    assert _eval(runs, tmp_path, "--limit", "64") == 0
    assert evaluated == ["rope-s0"]


def test_a_run_retrained_to_the_same_weights_is_not_evaluated_again(runs, tmp_path, monkeypatch):
    """The cache is keyed by what evaluation reads, not by the checkpoint's bytes, which hold the wall time: a run
    retrained to the same weights elsewhere reuses its records; one weight changed by one float step does not."""
    copied = tmp_path / "runs"
    for name in ("learnable-s0", "learnable-s1", "rope-s0"):
        shutil.copytree(runs / name, copied / name)
    assert _eval(copied, tmp_path / "out") == 0
    first = (tmp_path / "out" / "resolution.json").read_text()
    file = copied / "rope-s0" / "checkpoint.pt"
    ckpt = torch.load(file, weights_only=True)
    ckpt["train_state"]["elapsed_s"] += 100.0
    ckpt["config"]["out_dir"] = "somewhere/else"
    torch.save(ckpt, file)
    evaluated = _count_evaluations(monkeypatch)
    assert _eval(copied, tmp_path / "out") == 0
    assert evaluated == [] and (tmp_path / "out" / "resolution.json").read_text() == first
    name, weight = next((k, v) for k, v in ckpt["model"].items() if v.is_floating_point())
    ckpt["model"][name] = weight.clone().view(-1).index_put_(  # its first element one float step up: (n,) -> shape
        (torch.tensor([0]),), torch.nextafter(weight.view(-1)[:1], torch.tensor(float("inf")))).view(weight.shape)
    torch.save(ckpt, file)
    assert _eval(copied, tmp_path / "out") == 0 and evaluated == ["rope-s0"]


def test_records_cached_under_the_checkpoint_files_sha_still_count_for_that_file(runs, tmp_path, monkeypatch):
    """Entries written before the cache read the weights carry the checkpoint file's SHA-256: still good for that
    very file, and only for it."""
    assert _eval(runs, tmp_path) == 0
    entry = tmp_path / "runs" / "rope-s0.json"
    cached = json.loads(entry.read_text())
    evaluated = _count_evaluations(monkeypatch)
    for fingerprint, expected in ((file_sha256(runs / "rope-s0" / "checkpoint.pt"), []),
                                  (file_sha256(runs / "learnable-s0" / "checkpoint.pt"), ["rope-s0"])):
        cached["settings"]["fingerprint"] = fingerprint
        entry.write_text(json.dumps(cached))
        assert _eval(runs, tmp_path) == 0 and evaluated == expected


def test_the_evaluation_fingerprint_reads_every_weight_and_nothing_only_training_reads():
    ckpt = {"config": {"model": {"pe": "cpb"}, "train": {"seed": 0}, "out_dir": "runs/a"},
            "model": {"w": torch.zeros(3, dtype=torch.bfloat16), "bn.num_batches_tracked": torch.tensor(7)},
            "ema": None, "classes": ["cat", "dog"], "normalization": {"mean": [0.5], "std": [0.25]},
            "optimizer": {"state": {0: {"step": torch.tensor(3.0)}}}, "scheduler": {"last": 1},
            "train_state": {"epoch": 3, "elapsed_s": 12.5}}
    base = evaluation_fingerprint(ckpt)

    def changed(edit) -> str:
        edited = copy.deepcopy(ckpt)
        edit(edited)
        return evaluation_fingerprint(edited)

    for training_only in (lambda c: c["train_state"].update(elapsed_s=99.0), lambda c: c["optimizer"].clear(),
                          lambda c: c["scheduler"].update(last=2), lambda c: c["config"].update(out_dir="b")):
        assert changed(training_only) == base
    for read_by_evaluation in (lambda c: c["model"]["w"].__setitem__(0, -0.0),  # one bit of one bf16 weight
                               lambda c: c["model"]["bn.num_batches_tracked"].add_(1),
                               lambda c: c["model"].update(w=c["model"]["w"].float()),  # same values, other dtype
                               lambda c: c["model"].update(w=c["model"]["w"].view(1, 3)),
                               lambda c: c.update(ema={"w": torch.ones(3)}), lambda c: c["classes"].reverse(),
                               lambda c: c["normalization"].update(std=[0.5]),
                               lambda c: c["config"]["model"].update(pe="rope_mixed")):
        assert changed(read_by_evaluation) != base


def test_evaluation_batches_shrink_with_resolution():
    assert batch_size_for((32, 32), 4, 500) == 128  # 64 tokens
    assert batch_size_for((64, 64), 4, 500) == 32  # 256 tokens
    assert batch_size_for((16, 16), 4, 100) == 100  # capped by --batch-size
    assert batch_size_for((4096, 4096), 4, 500) == 1


def test_bad_arguments_are_clear_errors(runs, tmp_path, capsys):
    assert eval_cli.main([str(runs / "rope-s0"), "--resolutions", "16,abc", "--out", str(tmp_path)]) == 2
    assert "bad resolution 'abc'" in capsys.readouterr().err
    assert eval_cli.main([str(runs / "rope-s0"), "--pe-resize", "stretch", "--out", str(tmp_path)]) == 2
    assert "pe_resize mode" in capsys.readouterr().err
    assert eval_cli.main([str(tmp_path / "nothing"), "--out", str(tmp_path)]) == 2
    assert "no checkpoint found" in capsys.readouterr().err
    if not torch.cuda.is_available():  # once "unexpected RuntimeError ... please report it"
        assert eval_cli.main([str(runs / "rope-s0"), "--device", "cuda", "--out", str(tmp_path)]) == 2
        assert "--device cuda: no CUDA device is available on this machine; use --device cpu" in capsys.readouterr().err
    assert eval_cli.main([str(runs / "rope-s0"), "--device", "gpu", "--out", str(tmp_path)]) == 2
    assert "--device 'gpu' is not a device" in capsys.readouterr().err
    for flag, value in (("--batch-size", "0"), ("--limit", "-3"), ("--workers", "-1")):  # once silently 1, all, 0
        with pytest.raises(SystemExit) as stop:
            eval_cli.main([str(runs / "rope-s0"), flag, value, "--out", str(tmp_path)])
        assert stop.value.code == 2 and f"argument {flag}: must be a whole number" in capsys.readouterr().err


def test_an_interrupted_sweep_says_what_it_kept(runs, tmp_path, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(eval_cli, "cached_evaluate_run", interrupted)
    assert eval_cli.main([str(runs / "rope-s0"), "--out", str(tmp_path), "--resolutions", "32"]) == 130
    assert "the same command continues from them" in capsys.readouterr().err


def test_a_terminated_sweep_says_what_it_kept_instead_of_dying_silently(runs, tmp_path, capsys, monkeypatch):
    import os
    import signal
    import time

    def terminated(*args, **kwargs):  # a scheduler's SIGTERM in the middle of an evaluation
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this
        raise AssertionError("SIGTERM did not stop the sweep")

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(eval_cli, "cached_evaluate_run", terminated)
    assert eval_cli.main([str(runs / "rope-s0"), "--out", str(tmp_path), "--resolutions", "32"]) == 143
    assert "terminated (SIGTERM): the runs evaluated whole are kept" in capsys.readouterr().err.splitlines()[-1]
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is the command's only while it runs


def test_a_run_saved_before_a_range_check_still_evaluates(runs, tmp_path, capsys):
    """train.min_lr above train.lr is refused for new runs since 2026-12-02; a run saved with it still evaluates
    (only training reads it), while resuming it would train and is refused."""
    import torch

    old = tmp_path / "old_run"
    old.mkdir()
    ckpt = torch.load(runs / "rope-s0" / "checkpoint.pt", weights_only=True)
    ckpt["config"]["train"].update(lr=1e-12, min_lr=1e-5)
    torch.save(ckpt, old / "checkpoint.pt")
    assert eval_cli.main([str(old), "--resolutions", "16", "--out", str(tmp_path / "sweep")]) == 0
    assert train.main(["--resume", str(old), "--no-progress"]) == 2
    assert "train.min_lr must be in [0, train.lr]" in capsys.readouterr().err


def test_resolution_parsing():
    assert parse_resolutions("16, 32x48,64") == [(16, 16), (32, 48), (64, 64)]
    with pytest.raises(ValueError):
        parse_resolutions("")


@pytest.mark.slow
def test_reduced_resolution_runs_train_and_test_below_the_native_size(tmp_path):
    """Train at half the native size with half the patch (the same grid), then test from the native images
    resampled to each size: the model's grid follows the patch size, and the native-size record is the training
    evaluation."""
    reduced, multi = tmp_path / "reduced", tmp_path / "multi"
    assert train.main(["--config", SMOKE, f"out_dir={reduced}", "model.pe=rope_axial", "model.patch_size=2",
                       "train.img_sizes=[8]", "train.epochs=1", "--no-progress"]) == 0
    assert train.main(["--config", SMOKE, f"out_dir={multi}", "model.pe=sincos", "model.patch_size=2",
                       "model.img_size=8", "train.img_sizes=[6,8,10]", "train.epochs=1", "--no-progress"]) == 0
    for run in (reduced, multi):
        model, _ = model_from_checkpoint(run / "checkpoint.pt")
        assert model.grid == (4, 4)  # 8 px / patch 2, like 16 px / patch 4
    assert eval_cli.main([str(reduced), str(multi), "--resolutions", "8,12,16", "--pe-resize", "interpolate",
                          "--out", str(tmp_path / "sweep")]) == 0
    records = json.loads((tmp_path / "sweep" / "resolution.json").read_text())
    assert {(r["run"], r["resolution"]) for r in records} == {(n, s) for n in ("reduced", "multi") for s in (8, 12, 16)}
    for run in (reduced, multi):
        trained = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
        at_8 = next(r for r in records if r["run"] == run.name and r["resolution"] == 8)
        assert at_8["accuracy"] == trained["test_acc"]


def test_gains_pair_each_run_with_its_own_training_size():
    from vitpe.resolution.report import gains_table, paired_gains

    def record(run, size, acc, mode="interpolate"):
        return {"run": run, "pe": "sincos", "group": "sincos", "pe_resize": mode, "resolution": size,
                "train_resolution": 16, "accuracy": acc}

    # seed 1 is 10 points better everywhere: the accuracy table's spread is large, the paired gain's is not
    records = [record("s0", 16, 0.50), record("s0", 24, 0.52), record("s0", 32, 0.49),
               record("s1", 16, 0.60), record("s1", 24, 0.63), record("s1", 32, 0.58),
               record("s0", 24, None), record("other", 24, 0.7)]  # no result / no training-size record: left out
    gains = {(g["pe_resize"], g["resolution"]): g for g in paired_gains(records, "resolution")}
    assert set(gains) == {("interpolate", 16), ("interpolate", 24), ("interpolate", 32)}
    assert gains[("interpolate", 24)]["runs"] == 2
    assert gains[("interpolate", 24)]["mean"] == pytest.approx(0.025)
    assert gains[("interpolate", 24)]["std"] == pytest.approx(0.00707, abs=1e-4)
    assert gains[("interpolate", 32)]["mean"] == pytest.approx(-0.015)
    table = gains_table(list(gains.values()), "resolution")
    assert "| sincos | interpolate | 16 | +0.0 ± 0.0 | **+2.5 ± 0.7** | -1.5 ± 0.7 |" in table
    assert gains_table([], "resolution") == ""


@pytest.mark.slow
def test_report_has_the_gain_table_and_keeps_the_training_size(runs, tmp_path):
    _eval(runs, tmp_path)
    assert "Change against the training resolution" in (tmp_path / "resolution.md").read_text()
    records = json.loads((tmp_path / "resolution.json").read_text())
    assert all(r["train_resolution"] == 16 for r in records)  # merge_sweeps.py can rebuild the gains from the json


def test_group_labels_name_a_group_not_its_first_seed():
    from vitpe.resolution.report import group_labels

    records = [{"run": f"{name}_s{seed}", "pe": "peg", "group": name} for name in ("peg", "multires_peg")
               for seed in (0, 1)] + [{"run": "alone_s3", "pe": "peg", "group": "alone"},
                                      {"run": "x", "pe": "sincos", "group": "x"}]
    assert group_labels(records) == {"peg": "peg (peg)", "multires_peg": "peg (multires_peg)",
                                     "alone": "peg (alone_s3)", "x": "sincos"}


def test_a_pe_option_changed_at_evaluation_is_a_run_of_its_own(tmp_path):
    """LookHere's lower global slope at a larger size, as its paper extrapolates: eval.py --pe-option."""
    import json

    from vitpe.cli import evaluate as eval_cli
    from vitpe.cli import train as train_cli

    run = tmp_path / "lookhere"
    assert train_cli.main(["--config", "configs/smoke.yaml", f"out_dir={run}", "model.pe=lookhere", "model.heads=4",
                           "data.dataset=synthetic", "data.synthetic_size=64", "data.img_size=16", "train.epochs=1",
                           "--no-progress"]) == 0
    out = tmp_path / "sweep"
    for extra in ([], ["--pe-option", "large_grid_slope=0.25"]):
        assert eval_cli.main([str(run), "--resolutions", "16,32", "--pe-resize", "extrapolate", "--out", str(out),
                              *extra]) == 0
    records = {(r["run"], r["resolution"]): r for file in sorted((out / "runs").glob("*.json"))
               for r in json.loads(file.read_text())["records"]}  # each run's records, kept apart
    assert set(records) == {(name, size) for name in ("lookhere", "lookhere@large_grid_slope=0.25")
                            for size in (16, 32)}
    assert records[("lookhere", 16)]["accuracy"] == records[("lookhere@large_grid_slope=0.25", 16)]["accuracy"]
    assert records[("lookhere", 32)]["loss"] != records[("lookhere@large_grid_slope=0.25", 32)]["loss"]
    assert eval_cli.main([str(run), "--resolutions", "16", "--out", str(out), "--pe-option", "slope"]) == 2
    assert eval_cli.main([str(run), "--resolutions", "16", "--out", str(out), "--pe-option", "nonsense=1"]) == 2
    both = tmp_path / "both"  # the run as trained and with its option, in one sweep: RUN@NAME=VALUE
    assert eval_cli.main([str(run), f"{run}@large_grid_slope=0.25", "--resolutions", "32", "--pe-resize",
                          "extrapolate", "--out", str(both)]) == 0
    swept = {r["run"]: r for r in json.loads((both / "resolution.json").read_text())}
    assert set(swept) == {"lookhere", "lookhere@large_grid_slope=0.25"}
    assert swept["lookhere@large_grid_slope=0.25"]["loss"] == records[("lookhere@large_grid_slope=0.25", 32)]["loss"]


def test_a_run_reads_its_own_data_root_and_falls_back_to_vitpe_data_only_when_that_folder_is_not_here(tmp_path,
                                                                                                         monkeypatch):
    from vitpe.resolution.sweep import data_root_for_evaluation

    monkeypatch.setenv("VITPE_DATA", str(tmp_path / "shared"))
    own = tmp_path / "own"
    own.mkdir()
    assert data_root_for_evaluation(str(own), None) == str(own)  # $VITPE_DATA does not replace a folder that is here
    assert data_root_for_evaluation(str(tmp_path / "elsewhere"), None) == str(tmp_path / "shared")  # trained on another machine
    assert data_root_for_evaluation(str(own), "/explicit") == "/explicit"  # --data-root always wins


def test_a_bf16_run_evaluated_at_its_training_size_reproduces_its_own_final_evaluation(tmp_path):
    """eval.py computes under the run's own train.precision: a bf16 run's accuracy and loss at its training size are
    its final evaluation's, to the last digit (in float32 they differ); --precision fp32 is the choice to change it."""
    run = tmp_path / "bf16"
    assert train.main(["--config", SMOKE, f"out_dir={run}", "model.pe=rope_axial", "train.precision=bf16",
                       "--no-progress"]) == 0
    trained = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    for precision in ("run", "fp32"):
        out = tmp_path / precision
        assert eval_cli.main([str(run), "--resolutions", "16", "--pe-resize", "interpolate", "--out", str(out),
                              "--precision", precision]) == 0
        (record,) = json.loads((out / "resolution.json").read_text())
        assert record["precision"] == ("bf16" if precision == "run" else "fp32")
        if precision == "run":
            assert record["accuracy"] == trained["test_acc"] and record["loss"] == trained["test_loss"]
        else:
            assert record["loss"] != trained["test_loss"]


def test_limit_zero_is_the_whole_test_split_whatever_the_run_trained_with(tmp_path):
    run = tmp_path / "limited"
    assert train.main(["--config", SMOKE, f"out_dir={run}", "data.test_limit=40", "train.epochs=1",
                       "--no-progress"]) == 0
    for limit, n in (("0", 128), ("40", 40)):
        out = tmp_path / f"limit{limit}"
        assert eval_cli.main([str(run), "--resolutions", "16", "--pe-resize", "interpolate", "--out", str(out),
                              "--limit", limit]) == 0
        assert json.loads((out / "resolution.json").read_text())[0]["n"] == n


def test_a_run_fine_tuned_at_another_size_is_labelled_with_the_size_it_trained_at_last(runs, tmp_path):
    tuned = tmp_path / "tuned"
    assert train.main(["--config", SMOKE, f"out_dir={tuned}", f"model.init=run:{runs / 'rope-s0'}", "model.pe=rope_axial",
                       "train.img_sizes=[24]", "train.epochs=1", "--no-progress"]) == 0
    assert eval_cli.main([str(tuned), "--resolutions", "16,24", "--pe-resize", "interpolate",
                          "--out", str(tmp_path / "sweep")]) == 0
    records = json.loads((tmp_path / "sweep" / "resolution.json").read_text())
    assert {r["train_resolution"] for r in records} == {24}  # not the 16 px grid it was built for
    at_24 = next(r for r in records if r["resolution"] == 24)
    assert at_24["accuracy"] == json.loads((tuned / "metrics.jsonl").read_text().splitlines()[-1])["test_acc"]


@pytest.mark.parametrize("name", __import__("vitpe.pe.registry", fromlist=["available"]).available())
def test_every_pe_can_be_drawn(tmp_path, name):
    """--plot-pe draws every PE (PaPE's widened q, k included, through the attention's own hook)."""
    import vitpe.pe
    from vitpe.resolution.pe_plots import plot_pe

    torch.manual_seed(0)
    try:
        pe = vitpe.pe.build(name, dim=32, heads=2, depth=2, grid=(4, 4), num_prefix_tokens=1)
    except (TypeError, ValueError) as err:  # a 1D-only PE
        pytest.skip(f"{name}: {err}")
    drawn = plot_pe(pe.eval(), (6, 6), tmp_path / "pe.png", name)
    assert drawn == (tmp_path / "pe.png").is_file()
