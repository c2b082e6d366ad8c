"""The benchmark's --quick mode writes a complete, well-formed bench.json (its timings are not tested)."""

import json
import math
from pathlib import Path

import pytest
import torch

import vitpe.pe
from vitpe.bench import cli as bench
from vitpe.bench import config as bench_config
from vitpe import machine as bench_machine
from vitpe.bench import runner, suites
from vitpe.bench import targets as bench_targets
from vitpe.bench.targets import NOISE_REFERENCE, check_targets

ROW_KEYS = {"pe", "img_size", "train_img_s", "infer_img_s", "train_vs_timm", "train_vs_none", "infer_vs_timm",
            "infer_vs_none"}


@pytest.mark.slow
def test_quick_mode_writes_valid_json(tmp_path):
    assert bench.main(["--quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "bench.json").read_text())
    assert {"machine", "torch", "timm", "config", "rows", "data", "data_share", "text_rows"} <= set(result)
    pes_2d = {n for n in vitpe.pe.available() if 2 in vitpe.pe.get(n).grid_dims}
    assert {r["pe"] for r in result["rows"]} == pes_2d | {"timm", NOISE_REFERENCE}
    for row in result["rows"]:
        assert ROW_KEYS <= set(row)
        assert all(math.isfinite(row[k]) and row[k] > 0 for k in ROW_KEYS - {"pe", "img_size"})
    assert next(r for r in result["rows"] if r["pe"] == "timm")["train_vs_timm"] == 1.0
    assert 0 < result["data_share"] < 1
    assert {r["pe"] for r in result["text_rows"]} == {n for n in vitpe.pe.available()
                                                       if 1 in vitpe.pe.get(n).grid_dims}
    assert "| timm |" in (tmp_path / "bench.md").read_text()
    checked = {(c["target"].split()[0], c["img_size"]) for c in result["targets"]}
    assert ("learnable", 32) in checked and ("data", 32) in checked
    assert all(isinstance(c["met"], bool) for c in result["targets"])
    repeats = result["config"]["repeats"]
    for row in result["rows"]:  # every round's time is kept, and each ratio carries its interval
        assert len(row["train_s"]) == len(row["infer_s"]) == repeats
        for key in ("train_vs_none", "infer_vs_timm"):
            low, high = row[f"{key}_ci"]
            assert low <= row[key] <= high
    checks = [c for c in result["targets"] if c["target"].startswith("rope_axial")]
    assert checks and all(c["interval"] is not None and isinstance(c["clear"], bool) for c in checks)
    kernels = {r["pe"]: (r["train_kernels"], r["infer_kernels"]) for r in result["rows"]}
    assert kernels["none"] == kernels[NOISE_REFERENCE]  # the same model launches the same kernels
    assert all(train > infer > 0 for train, infer in kernels.values())
    assert kernels["rope_mixed"][0] > kernels["none"][0] and kernels["cpb"][1] > kernels["none"][1]
    assert "kernels/step" in (tmp_path / "bench.md").read_text()


def test_kernels_are_counted_with_the_backward_and_without_views():
    from vitpe.bench.kernels import kernels_per_step

    x = torch.randn(4, 3, requires_grad=True)
    # forward: mul, sum; backward: the seed gradient (ones_like) and the product's gradient (the sum's is a view)
    assert kernels_per_step(lambda: (x * 2).sum().backward()) == 4
    assert kernels_per_step(lambda: x.detach().t()[:2].unsqueeze(0)) == 0  # views and aliases launch nothing
    assert kernels_per_step(lambda: x.detach().t().reshape(12)) == 1  # a transposed tensor's reshape copies
    assert kernels_per_step(lambda: x.detach() + 1) == 1


def test_targets_are_judged_per_site_with_the_noise_floor():
    rows = [{"pe": "learnable", "img_size": 32, "train_vs_timm": 1.01, "train_vs_none": 1 / 1.02},
            {"pe": "sincos", "img_size": 32, "train_vs_none": 1 / 1.05},
            {"pe": "rope_axial", "img_size": 32, "train_vs_none": 1 / 1.05, "infer_vs_none": 1 / 1.06},
            {"pe": NOISE_REFERENCE, "img_size": 32, "train_vs_none": 1 / 0.99, "infer_vs_none": 1 / 1.02},
            {"pe": "relbias", "img_size": 64, "train_vs_none": 1 / 1.10}]
    checks = check_targets({"rows": rows, "data_share": 0.06})
    key = {id(c): (c["target"].split()[0], "inference" in c["target"]) for c in checks}
    met = {key[id(c)]: c["met"] for c in checks}
    assert met == {("learnable", False): True, ("sincos", False): False, ("rope_axial", False): True,
                   ("rope_axial", True): False, ("relbias", False): False, ("data", False): False}
    noise = {key[id(c)]: c["noise"] for c in checks}
    assert math.isclose(noise["rope_axial", False], 0.01) and math.isclose(noise["rope_axial", True], 0.02)
    assert noise["relbias", False] is None  # no reference measured at 64 px


def test_a_target_is_settled_only_where_its_interval_excludes_the_limit(capsys):
    rows = [{"pe": "rope_mixed", "img_size": 32, "train_vs_none": 1 / 1.06, "train_vs_none_ci": [1 / 1.10, 1 / 1.03],
             "infer_vs_none": 1 / 1.07, "infer_vs_none_ci": [1 / 1.09, 1 / 1.06]},
            {"pe": "learnable", "img_size": 32, "train_vs_timm": 1.04, "train_vs_timm_ci": [1.01, 1.07],
             "train_vs_none": 1 / 1.01, "train_vs_none_ci": [1 / 1.02, 1.0]},
            {"pe": NOISE_REFERENCE, "img_size": 32, "train_vs_none": 1 / 1.2, "infer_vs_none": 1.0}]
    checks = {(c["target"].split()[0], "inference" in c["target"], "timm" in c["target"]): c
              for c in check_targets({"rows": rows})}
    train, infer = checks["rope_mixed", False, False], checks["rope_mixed", True, False]
    assert train["met"] and not train["clear"]  # +6% measured, but +3% to +10% holds the 8% limit
    assert not infer["met"] and infer["clear"]  # +6% to +9%: above the 5% limit beyond the noise
    assert checks["learnable", False, True]["clear"] and checks["learnable", False, False]["clear"]
    assert train["interval"] == pytest.approx([0.03, 0.10]) and train["noise"] is None  # the interval replaces it
    table = "\n".join(bench_targets.targets_markdown(list(checks.values())))
    assert "| rope_mixed (qk) overhead vs none (train, <=) | 32 | +6.0% | +3.0% to +10.0% | +8.0% | within noise |" \
        in table  # measured under the limit, but the interval holds it: not "met"
    assert "| rope_mixed (qk) overhead vs none (inference, <=) | 32 | +7.0% | +6.0% to +9.0% | +5.0% | **missed** |" \
        in table
    assert "| learnable vs timm (train, ratio >=) | 32 | 1.040x | 1.010x to 1.070x | 1.000x | met |" in table
    assert bench_targets.summary(list(checks.values())) == (
        "2 of 4 checks met. 1 within the noise (the interval holds the limit): run more rounds to settle them. "
        "1 missed.")


def exit_code(argv: list[str]) -> int:
    """The exit code of ``python -m vitpe.bench ARGV``: main's, or argparse's for a flag it refuses."""
    try:
        return bench.main(argv)
    except SystemExit as stop:
        return stop.code


@pytest.mark.parametrize("args, says", [
    (["--pes", "rope_3d"], "rope_3d"),
    (["--pes", "t5bias"], "t5bias works on 1D sequences only"),
    (["--dim", "30", "--heads", "4"], "not divisible"),
    (["--sizes", "30"], "30 px is not a multiple of the patch size 4 (e.g. 28)"),
    (["--sizes", "0"], "argument --sizes: must be whole numbers >= 1"),
    (["--sizes", "32,abc"], "argument --sizes"),
    (["--repeats", "0"], "argument --repeats: must be a whole number >= 1, not '0'"),
    (["--steps", "-1"], "argument --steps"),
    (["--batch", "0"], "argument --batch"),
    (["--dim", "0"], "argument --dim"),
    (["--mlp-ratio", "nan"], "argument --mlp-ratio: must be a finite number > 0"),
    (["--threads", "0"], "argument --threads"),
])
def test_bad_arguments_are_one_line_errors_before_any_timing(tmp_path, capsys, monkeypatch, args, says):
    monkeypatch.setattr(bench, "bench_vit", lambda *a: pytest.fail("timed despite a bad argument"))
    assert exit_code(["--quick", "--out", str(tmp_path / "out"), *args]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert not (tmp_path / "out" / "bench.json").exists()


def test_an_output_folder_it_cannot_write_fails_before_the_timing(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench, "bench_vit", lambda *a: pytest.fail("timed, then could not write"))
    (tmp_path / "a_file").write_text("")
    assert bench.main(["--quick", "--out", str(tmp_path / "a_file" / "out")]) == 2
    assert "cannot write there" in capsys.readouterr().err


@pytest.mark.slow
def test_a_full_disk_at_the_end_says_how_to_go_on(tmp_path, capsys, monkeypatch):
    import errno

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(bench, "write_text_atomic", full)
    assert bench.main(["--quick", "--out", str(tmp_path), "--no-text", "--no-data", "--pes", "learnable"]) == 2
    err = capsys.readouterr().err
    assert "no space left on the device" in err and "free some space, then run the benchmark again" in err


def test_an_interrupted_benchmark_says_so_and_writes_nothing(tmp_path, capsys, monkeypatch):
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "bench_vit", interrupted)
    assert bench.main(["--quick", "--out", str(tmp_path), "--no-text", "--no-data"]) == 130
    assert "interrupted: nothing was written" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_mean_pooling_benchmarks_both_models_with_the_recipes_head(tmp_path):
    cfg = bench_config.BenchConfig(**{**bench_config.QUICK, "pool": "mean"})
    timm_model = suites.timm_vit(cfg, 32)
    assert timm_model.cls_token is None and timm_model.global_pool == "avg"
    assert bench.main(["--quick", "--out", str(tmp_path), "--pool", "mean", "--pes", "learnable", "--no-text",
                       "--no-data"]) == 0
    result = json.loads((tmp_path / "bench.json").read_text())
    assert result["config"]["pool"] == "mean" and "average pooling" in (tmp_path / "bench.md").read_text()
    assert {r["pe"] for r in result["rows"]} == {"timm", "none", "learnable", NOISE_REFERENCE}
    with pytest.raises(SystemExit):  # argparse: "invalid choice: 'avg' (choose from 'cls', 'mean')"
        bench.main(["--quick", "--out", str(tmp_path), "--pool", "avg"])


def test_bf16_precision_reaches_every_timed_step_timm_and_vitpe_alike(tmp_path, monkeypatch):
    asked = []  # the precision of every step function the run builds
    real_train, real_infer = suites.train_step_fn, suites.infer_step_fn
    monkeypatch.setattr(suites, "train_step_fn", lambda *a: asked.append(a[-1]) or real_train(*a))
    monkeypatch.setattr(suites, "infer_step_fn", lambda *a, **k: asked.append(k["precision"]) or real_infer(*a, **k))
    assert bench.main(["--quick", "--out", str(tmp_path), "--precision", "bf16", "--pes", "cpb", "--no-text",
                       "--no-data"]) == 0
    assert len(asked) >= 2 * 4 and set(asked) == {"bf16"}  # timm, none, cpb, the second none: train and infer
    result = json.loads((tmp_path / "bench.json").read_text())
    assert result["config"]["precision"] == "bf16" and ", bf16;" in (tmp_path / "bench.md").read_text()
    assert bench_targets.describe_run(result).endswith(", bf16")
    dtypes, linear = [], torch.nn.functional.linear  # the dtype a step's matrix product computes in
    monkeypatch.setattr(torch.nn.functional, "linear", lambda *a: dtypes.append((y := linear(*a)).dtype) or y)
    runner.train_step_fn(torch.nn.Linear(3, 4), (torch.randn(2, 3),), torch.tensor([0, 1]), torch.device("cpu"),
                         "bf16")()
    assert dtypes == [torch.bfloat16]


def test_the_recipe_preset_and_threads_reach_the_run(tmp_path):
    out = tmp_path / "recipe"
    threads = torch.get_num_threads()
    try:
        assert bench.main(["--quick", "--out", str(out), "--preset", "recipe", "--threads", "1", "--dim", "32",
                           "--pes", "learnable", "--no-text", "--no-data"]) == 0
    finally:
        torch.set_num_threads(threads)
    result = json.loads((out / "bench.json").read_text())
    # the preset's head and MLP ratio; --dim overrides its width, --quick its other sizes
    assert result["config"]["pool"] == "mean" and result["config"]["mlp_ratio"] == 2.0
    assert result["config"]["dim"] == 32 and result["machine"]["cpu_threads"] == 1


def test_one_target_table_over_several_runs(tmp_path, capsys):
    def write(folder, dim, pool, overhead):
        folder.mkdir()
        rows = [{"pe": "rope_mixed", "img_size": 32, "train_vs_none": 1 / (1 + overhead), "infer_vs_none": 1.0}]
        result = {"rows": rows, "config": {"dim": dim, "heads": 4, "mlp_ratio": 2.0, "pool": pool, "device": "cpu"},
                  "machine": {"cpu_threads": 1}}
        (folder / "bench.json").write_text(json.dumps(result))

    write(tmp_path / "default", 192, "cls", 0.05)
    write(tmp_path / "recipe", 128, "mean", 0.09)
    assert bench_targets.main([str(tmp_path / "default"), str(tmp_path / "recipe")]) == 0
    table = capsys.readouterr().out
    assert "| target | dim 192, 4 heads, MLP 2, class token, 1 thread, 32 px | dim 128, 4 heads, MLP 2, mean pool, " \
           "1 thread, 32 px |" in table  # a column per run and size
    assert "| rope_mixed (qk) overhead vs none (train, <=), limit +8.0% | +5.0% | +9.0% ✗ |" in table
    assert "3 of 4 checks met." in table
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "bench.json").write_text("{")
    for bad, says in ((tmp_path / "nothing", "no bench.json"), (tmp_path / "broken", "not JSON")):
        assert bench_targets.main([str(bad)]) == 2
        assert says in capsys.readouterr().err


def test_a_result_names_the_cpu_that_ran_it():
    cpuinfo = Path("/proc/cpuinfo")
    named = cpuinfo.exists() and any(line.startswith("model name") for line in cpuinfo.read_text().splitlines())
    info = bench_machine.machine()
    if named:  # Linux on x86 names its CPU there; the record and the bench.md header carry the name
        assert info["cpu_model"] and bench_machine.cpu_line(info).startswith(info["cpu_model"])
    assert bench_machine.cpu_line({"processor": "x86_64", "cpu_model": "AMD EPYC", "l2_cache": "1024K",
                            "l3_cache": "32768K"}) == "AMD EPYC (L2 1024K, L3 32768K)"
    assert bench_machine.cpu_line({"processor": "x86_64"}) == "x86_64"  # a result saved before the CPU was recorded
