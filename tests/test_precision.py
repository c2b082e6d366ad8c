"""train.precision: bf16 autocast on the CPU when asked, float32 otherwise; reproducible either way."""

from pathlib import Path

import pytest
import torch

from vitpe.cli import train
from test_reliability import records
from vitpe.engine import precision as precision_module
from vitpe.engine.precision import PRECISIONS, autocast, emulated_bf16_note, uses_bf16

ROOT = Path(__file__).resolve().parents[1]
SMOKE = str(ROOT / "configs" / "smoke.yaml")


@pytest.mark.parametrize("precision, device, bf16", [
    ("auto", "cpu", False), ("auto", "cuda", True), ("bf16", "cpu", True), ("bf16", "cuda", True),
    ("fp32", "cpu", False), ("fp32", "cuda", False)])
def test_which_precision_runs_bf16_where(precision, device, bf16):
    assert uses_bf16(torch.device(device), precision) is bf16


@pytest.mark.parametrize("precision, dtype", [("auto", torch.float32), ("bf16", torch.bfloat16),
                                              ("fp32", torch.float32)])
def test_the_cpu_matmul_runs_in_the_precision_asked_for(precision, dtype):
    with autocast(torch.device("cpu"), precision):
        assert torch.nn.functional.linear(torch.randn(2, 3), torch.randn(4, 3)).dtype == dtype


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="unknown precision 'fp16': one of auto, bf16, fp32, fast"):
        uses_bf16(torch.device("cpu"), "fp16")
    assert PRECISIONS == ("auto", "bf16", "fp32", "fast")


@pytest.mark.parametrize("pe", ["rope_mixed", "cpb"])  # a rotary site and a bias site, each with a float32 island
def test_a_bf16_cpu_run_is_reproducible_and_not_a_float32_run(tmp_path, pe):
    def run(name: str, precision: str) -> list[dict]:
        out = tmp_path / name
        assert train.main(["--config", SMOKE, f"out_dir={out}", f"model.pe={pe}", "train.epochs=1",
                           f"train.precision={precision}", "--no-progress"]) == 0
        return records(out)  # metrics without the timings

    first, again, float32 = run("a", "bf16"), run("b", "bf16"), run("c", "fp32")
    assert first == again
    assert first[0]["train_loss"] != float32[0]["train_loss"]  # bf16 rounding changes the path: it did run in bf16
    assert abs(first[0]["train_loss"] - float32[0]["train_loss"]) < 0.05  # ... and only by rounding
    assert "precision: bf16" in (tmp_path / "a" / "config.yaml").read_text()


def test_a_precision_that_does_not_exist_stops_before_training(tmp_path, capsys):
    out = tmp_path / "run"
    assert train.main(["--config", SMOKE, f"out_dir={out}", "train.precision=fp16", "--no-progress"]) == 2
    assert capsys.readouterr().err.strip() == "error: train.precision must be one of auto, bf16, fp32, fast"
    assert not out.exists()


def test_bf16_on_the_cpu_attends_in_float32_and_the_rest_in_bf16(monkeypatch):
    from vitpe.models import attention
    from vitpe.models.vit import ViT

    seen = []  # the dtype SDPA attends in, and whether autocast was on around it
    sdpa = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(attention.F, "scaled_dot_product_attention",
                        lambda q, *a, **k: seen.append((q.dtype, torch.is_autocast_enabled("cpu"))) or sdpa(q, *a, **k))
    model = ViT(img_size=16, patch_size=4, num_classes=10, dim=32, depth=2, heads=2, pe="learnable")
    with autocast(torch.device("cpu"), "bf16"):
        logits = model(torch.randn(2, 3, 16, 16))
    assert seen == [(torch.float32, False)] * 2 and logits.dtype == torch.bfloat16  # the head ran in bf16
    logits.float().sum().backward()
    seen.clear()
    model(torch.randn(2, 3, 16, 16))  # float32 as before, autocast untouched
    assert seen == [(torch.float32, False)] * 2


@pytest.mark.parametrize("flags, device, precision, noted", [
    ({"avx2", "fma"}, "cpu", "bf16", True),               # x86 without bf16 instructions: emulated
    ({"avx512f", "avx512_bf16"}, "cpu", "bf16", False),
    ({"amx_tile", "amx_bf16"}, "cpu", "bf16", False),
    ({"fp", "asimd", "bf16"}, "cpu", "bf16", False),      # Arm's BF16 extension
    (set(), "cpu", "bf16", False),                        # flags unknown: nothing claimed
    ({"avx2"}, "cpu", "fp32", False), ({"avx2"}, "cpu", "auto", False), ({"avx2"}, "cuda", "bf16", False)])
def test_bf16_on_a_cpu_without_bf16_instructions_gets_a_note(monkeypatch, flags, device, precision, noted):
    monkeypatch.setattr(precision_module, "cpu_flags", lambda: frozenset(flags))
    note = emulated_bf16_note(torch.device(device), precision)
    assert (note is not None) is noted
    if noted:
        assert note.startswith("note: train.precision=bf16 on a CPU without bf16 instructions") and "fp32" in note


def test_train_py_prints_the_note_and_trains_anyway(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(precision_module, "cpu_flags", lambda: frozenset({"avx2"}))
    out = tmp_path / "run"
    assert train.main(["--config", SMOKE, f"out_dir={out}", "train.epochs=1", "train.precision=bf16",
                       "--no-progress"]) == 0
    assert "note: train.precision=bf16 on a CPU without bf16 instructions" in capsys.readouterr().out
    assert len(records(out)) == 1


@pytest.mark.parametrize("flags, device, resolved", [
    ({"avx2", "fma"}, "cpu", "fp32"), ({"avx512f", "avx512_bf16"}, "cpu", "bf16"), ({"amx_bf16"}, "cpu", "bf16"),
    ({"fp", "asimd", "bf16"}, "cpu", "bf16"), (set(), "cpu", "fp32"), ({"avx2"}, "cuda", "bf16")])
def test_fast_is_bf16_only_where_the_machine_computes_it_natively(monkeypatch, flags, device, resolved):
    monkeypatch.setattr(precision_module, "cpu_flags", lambda: frozenset(flags))
    assert precision_module.resolve_precision(torch.device(device), "fast") == resolved
    assert uses_bf16(torch.device(device), "fast") is (resolved == "bf16")
    assert precision_module.resolve_precision(torch.device(device), "bf16") == "bf16"  # asked for, kept


@pytest.mark.parametrize("flags, resolved, note", [({"avx2"}, "fp32", True), ({"avx512_bf16"}, "bf16", False)])
def test_a_fast_run_saves_the_precision_it_trained_in_and_resumes_in_it_on_another_cpu(tmp_path, monkeypatch, capsys,
                                                                                        flags, resolved, note):
    from vitpe.engine.preemption import PREEMPTED_EXIT, StopRequests

    steps = {"n": 0}

    def stop_after_three(self, device, dist_info) -> bool:  # a preemption after the third optimiser step
        steps["n"] += 1
        return steps["n"] == 3

    args = ["--config", SMOKE, "train.epochs=1", "--no-progress"]
    monkeypatch.setattr(precision_module, "cpu_flags", lambda: frozenset(flags))
    with monkeypatch.context() as patch:
        patch.setattr(StopRequests, "should_stop", stop_after_three)
        assert train.main([*args, f"out_dir={tmp_path / 'fast'}", "train.precision=fast"]) == PREEMPTED_EXIT
    printed = capsys.readouterr().out
    assert ("train.precision=fast trains in float32 here" in printed) is note
    assert "emulates" not in printed  # fast never emulates bf16
    assert f"precision: {resolved}" in (tmp_path / "fast" / "config.yaml").read_text()
    monkeypatch.setattr(precision_module, "cpu_flags", lambda: frozenset({"avx512_bf16"} - flags))  # another CPU
    assert train.main(["--resume", str(tmp_path / "fast"), "--no-progress"]) == 0
    assert train.main([*args, f"out_dir={tmp_path / 'fixed'}", f"train.precision={resolved}"]) == 0
    assert records(tmp_path / "fast") == records(tmp_path / "fixed")  # resumed in the precision it started in
