"""The experiment scripts: summarise.py's table and --best, and compare.sh end to end on a tiny synthetic setup."""

import contextlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def fake_run(path: Path, pe: str, seed: int, acc: float) -> Path:
    path.mkdir(parents=True)
    config = {"model": {"pe": pe}, "train": {"seed": seed}, "out_dir": str(path)}
    (path / "config.yaml").write_text(yaml.safe_dump(config))
    (path / "metrics.jsonl").write_text(json.dumps({"epoch": 3, "test_acc": acc, "elapsed_s": 60.0}) + "\n")
    return path


def script_main(name: str, *args: str) -> tuple[int, str]:
    """Run ``scripts/<name>.py``'s main(args) in this process: (exit code, stdout)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = module.main(list(args))
    return code, buffer.getvalue()


def summarise(*args: str) -> str:
    code, out = script_main("summarise", *args)
    assert code == 0
    return out


def test_summarise_groups_seeds_and_picks_the_best(tmp_path):
    runs = [fake_run(tmp_path / "a0", "rope_mixed", 0, 0.70), fake_run(tmp_path / "a1", "rope_mixed", 1, 0.72),
            fake_run(tmp_path / "b0", "learnable", 0, 0.66), fake_run(tmp_path / "c0", "relbias", 0, 0.69)]
    table = summarise(*map(str, runs))
    assert "| rope_mixed | 2 | 3 | 71.0 ± 1.4 | 1.0 ± 0.0 |" in table
    assert "| learnable | 1 | 3 | 66.0 | 1.0 |" in table
    assert summarise(*map(str, runs), "--best", "2").split() == ["rope_mixed", "relbias"]
    timm = tmp_path / "timm_s0"  # a scripts/timm_baseline.py folder: its own row, and every wall time against it
    timm.mkdir()
    (timm / "config.json").write_text(json.dumps({"baseline": "timm plain loop", "seed": 0}))
    (timm / "metrics.jsonl").write_text(json.dumps({"epoch": 10, "test_acc": 0.70, "elapsed_s": 120.0}) + "\n")
    table = summarise(*map(str, runs), str(timm))
    assert "| timm plain loop | 1 | 10 | 70.0 | 2.0 | 1.00 |" in table
    assert "| learnable | 1 | 3 | 66.0 | 1.0 | 0.50 |" in table
    cut = fake_run(tmp_path / "d0", "alibi", 0, 0.60)  # planned 5 epochs, stopped after 3: no row
    (cut / "config.yaml").write_text(yaml.safe_dump({"model": {"pe": "alibi"}, "train": {"seed": 0, "epochs": 5}}))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        table = summarise(*map(str, runs), str(cut))
    assert "alibi" not in table and "unfinished (epoch 3 of 5)" in err.getvalue()


def test_summarise_names_what_it_cannot_use(tmp_path):
    run = fake_run(tmp_path / "a0", "rope_mixed", 0, 0.70)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert "rope_mixed" in summarise(str(run), str(tmp_path / "not_started"))
        assert script_main("summarise", str(run), "--label", "model.depth")[0] == 2
    assert "skipping " + str(tmp_path / "not_started") + ": no such run folder" in err.getvalue()
    assert "--label model.depth: a run's config has no 'depth' there" in err.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("script, setting, says", [
    ("compare.sh", {"JOBS": "0"}, "JOBS must be a whole number >= 1"),  # xargs -P 0: every training at once
    ("compare.sh", {"SEEDS": "0 one"}, "SEEDS: 'one' is not a whole number"),
    ("compare.sh", {"PES": "none rope"}, "PES: unknown position encoding 'rope'"),
    ("compare.sh", {"MULTI_PES": "t5bias"}, "MULTI_PES: t5bias does not work on 2D grids"),
    ("recipe_vs_timm.sh", {"PES": "learnable rope_mixd"}, "did you mean 'rope_mixed'"),
    ("recipe_vs_timm.sh", {"LOOP_SEEDS": "1"}, "LOOP_SEEDS: 1 is not one of SEEDS (0)"),
    ("recipe_vs_timm.sh", {"THREADS": "0"}, "THREADS must be a whole number >= 1 (threads per training)"),
    ("text_experiments.sh", {"LENGTH_PES": "separable"}, "LENGTH_PES: separable does not work on 1D grids"),
])
def test_a_bad_setting_stops_an_experiment_before_its_first_training(tmp_path, script, setting, says):
    env = {**os.environ, "PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "CONFIG": "configs/smoke.yaml",
           "PES": "none", "SEEDS": "0", **setting}
    runs = tmp_path / "runs"
    done = subprocess.run(["bash", f"scripts/{script}", str(runs)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr
    assert not runs.exists() or not any(runs.iterdir())  # no training started


@pytest.mark.slow
def test_compare_script_trains_picks_and_evaluates(tmp_path):
    # PATH without any `python`, as in a venv that is not activated: the script must run the interpreter it is given
    env = {**os.environ, "PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "CONFIG": "configs/smoke.yaml",
           "PES": "none learnable", "SEEDS": "0", "JOBS": "2", "RESOLUTIONS": "12,16", "EVAL_LIMIT": "40",
           "MULTI_SIZES": "8,16",
           "OMP_NUM_THREADS": "1"}
    runs = tmp_path / "cmp"
    # no EXTRA: the lines handed to xargs then end in a blank, which once joined two trainings into one
    subprocess.run(["bash", "scripts/compare.sh", str(runs)], cwd=ROOT, env=env, check=True, capture_output=True)
    names = {"none_s0", "learnable_s0", "multires_none_s0", "multires_learnable_s0"}
    for name in names:
        assert (runs / name / "checkpoint.pt").is_file(), name
    multires = yaml.safe_load((runs / "multires_none_s0" / "config.yaml").read_text())
    assert multires["train"]["img_sizes"] == [8, 16] and multires["train"]["seed"] == 0
    records = json.loads((runs / "resolution" / "resolution.json").read_text())
    assert {r["run"] for r in records} == names
    assert {r["resolution"] for r in records} == {12, 16}
    assert {r["n"] for r in records} == {40}  # EVAL_LIMIT reached every evaluation
    for name in ("none_s0", "multires_learnable_s0"):  # each run was evaluated in its own lane, with a log
        assert (runs / f"{name}.eval.log").is_file() and (runs / "resolution" / "runs" / f"{name}.json").is_file()
    assert "Multi-resolution" in (runs / "accuracy.md").read_text()
    # PES="" adds seeds to the multi-resolution runs only (and needs MULTI_PES); finished runs are skipped
    finished = runs / "multires_none_s0" / "checkpoint.pt"
    before = finished.stat().st_mtime_ns
    more = subprocess.run(["bash", "scripts/compare.sh", str(runs)], cwd=ROOT, capture_output=True, text=True,
                          env={**env, "PES": "", "SEEDS": "0 1", "MULTI_PES": "none"})
    assert more.returncode == 0, more.stderr[-2000:]
    assert (runs / "multires_none_s1" / "checkpoint.pt").is_file() and not (runs / "none_s1").exists()
    assert finished.stat().st_mtime_ns == before
    table = (runs / "accuracy.md").read_text()  # the single-PE table stays; its multi-resolution section is replaced
    assert "| learnable |" in table and table.count("Multi-resolution training") == 1
    refused = subprocess.run(["bash", "scripts/compare.sh", str(runs)], cwd=ROOT, capture_output=True, text=True,
                             env={**env, "PES": ""})
    assert refused.returncode == 2 and "give MULTI_PES" in refused.stderr


@pytest.mark.slow
def test_bias_stats_reports_the_trained_bias_and_the_step_bound(tmp_path):
    runs = {}
    for pe in ("relbias", "learnable"):
        runs[pe] = tmp_path / pe
        subprocess.run([sys.executable, "train.py", "--config", "configs/smoke.yaml", f"out_dir={runs[pe]}",
                        f"model.pe={pe}", "--no-progress"], cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, check=True,
                       capture_output=True)
    code, out = script_main("bias_stats", str(runs["relbias"]), "--json", str(tmp_path / "stats.json"))
    assert code == 0
    (record,) = json.loads((tmp_path / "stats.json").read_text())  # the record the published table is made from
    assert record["run"] == "relbias" and len(record["std_over_keys"]) == 2 and record["summed_lr"] > 0
    row = out.strip().splitlines()[-1].strip("| ").split(" | ")
    assert row[:2] == ["relbias", "relbias"]
    assert len(row[2].split(", ")) == len(row[3].split(", ")) == 2  # one value per layer of the smoke ViT
    summed_lr = float(row[4].split()[0])
    config = yaml.safe_load((runs["relbias"] / "config.yaml").read_text())["train"]
    steps = json.loads((runs["relbias"] / "metrics.jsonl").read_text().splitlines()[-1])["step"]
    assert 0 < summed_lr < steps * config["lr"]  # warm-up and decay keep it below lr at every step
    code, _ = script_main("bias_stats", str(runs["learnable"]))
    assert code == 2  # a PE without an attention bias is an error, not an empty row


DATA = Path(os.environ.get("VITPE_DATA", ROOT / ".." / "shared" / "data"))


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "cifar-10-batches-py").is_dir(), reason="CIFAR-10 not in VITPE_DATA")
def test_timm_baseline_resumes_to_the_uninterrupted_numbers(tmp_path):
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # every run with the same threads: the same float sums

    def baseline(out, *extra):
        return [sys.executable, str(ROOT / "scripts" / "timm_baseline.py"), "--out", str(out), "--data-root",
                str(DATA), "--train-limit", "640", "--test-limit", "100", "--epochs", "3", *extra]

    done = subprocess.run(baseline(whole), env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "epoch 3/3" in done.stdout
    records = [json.loads(line) for line in (whole / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2, 3] and records[1]["step"] == 10  # 640 images, batches of 128
    assert all(0 <= r["test_acc"] <= 1 and r["elapsed_s"] > 0 for r in records)
    assert records[2]["train_loss"] < records[0]["train_loss"]
    assert subprocess.run(baseline(whole), env=env, capture_output=True).returncode == 2  # never overwrites it
    assert subprocess.run(baseline(cut, "--resume"), env=env, capture_output=True).returncode == 2  # nothing yet
    run = subprocess.Popen(baseline(cut), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (cut / "checkpoint.pt").exists() and run.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    run.kill()  # killed after its first checkpoint, somewhere in epoch 2
    run.wait()
    assert len((cut / "metrics.jsonl").read_text().splitlines()) < 3  # it was cut short
    assert subprocess.run(baseline(cut, "--resume"), env=env, capture_output=True).returncode == 0
    keys = ("epoch", "step", "train_loss", "train_acc", "test_acc")
    records = [[{k: json.loads(line)[k] for k in keys} for line in (r / "metrics.jsonl").read_text().splitlines()]
               for r in (whole, cut)]
    assert records[0] == records[1] and len(records[0]) == 3

    bf16 = tmp_path / "bf16"  # the same loop under bf16 autocast: its own label, and it did compute in bf16 (one
    # epoch: its first record is what is compared, and bf16 is slow on a CPU without bf16 instructions)
    bf16_run = subprocess.run(baseline(bf16, "--precision", "bf16", "--epochs", "1"), env=env, capture_output=True)
    assert bf16_run.returncode == 0
    config = json.loads((bf16 / "config.json").read_text())
    assert config["baseline"] == "timm plain loop, bf16" and config["precision"] == "bf16"
    first = json.loads((bf16 / "metrics.jsonl").read_text().splitlines()[0])["train_loss"]
    assert first != records[0][0]["train_loss"] and abs(first - records[0][0]["train_loss"]) < 0.05


def _records(runs: dict[str, float], n: int = 100) -> list[dict]:
    return [{"run": run, "pe": "sincos", "resolution": 32,
             "pe_resize": "interpolate", "accuracy": acc, "loss": 1.0, "n": n} for run, acc in runs.items()]


def test_merge_sweeps_adds_a_later_seed_to_published_records(tmp_path):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(_records({"sincos_s0": 0.50, "sincos_s1": 0.52, "multires_sincos": 0.40})))
    new.write_text(json.dumps({"settings": {"limit": 100},  # one run's record file, as eval.py caches it
                               "records": _records({"sincos_s2": 0.54, "multires_sincos_s1": 0.44})}))
    code, _ = script_main("merge_sweeps", str(old), str(new), "--out", str(tmp_path / "merged"))
    assert code == 0
    table = (tmp_path / "merged" / "resolution.md").read_text()
    assert "| sincos (sincos) | interpolate | 52.0 ± 2.0 (3) |" in table  # three seeds, one group
    assert "| sincos (multires_sincos) | interpolate | 42.0 ± 2.8 (2) |" in table  # unsuffixed name = seed 0
    assert len(json.loads((tmp_path / "merged" / "resolution.json").read_text())) == 5


def test_merge_sweeps_refuses_a_seed_twice_or_mixed_sample_sizes(tmp_path, capsys):
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text(json.dumps(_records({"sincos_s0": 0.5})))
    b.write_text(json.dumps(_records({"sincos_s0": 0.5})))
    c.write_text(json.dumps(_records({"sincos_s1": 0.5}, n=200)))
    assert script_main("merge_sweeps", str(a), str(b), "--out", str(tmp_path / "m"))[0] == 2
    assert "a seed must be counted once" in capsys.readouterr().err
    assert script_main("merge_sweeps", str(a), str(c), "--out", str(tmp_path / "m"))[0] == 2
    assert "same --limit" in capsys.readouterr().err


def test_merge_sweeps_into_a_kept_report_replaces_runs_evaluated_again_and_keeps_its_title(tmp_path, capsys):
    kept, new = tmp_path / "kept", tmp_path / "new.json"
    assert script_main("merge_sweeps", *_written(tmp_path, "old.json", {"sincos_s0": 0.50, "sincos_s1": 0.52}),
                       "--out", str(kept), "--title", "Kept sweep")[0] == 0
    new.write_text(json.dumps(_records({"sincos_s1": 0.60, "sincos_s2": 0.70})))
    assert script_main("merge_sweeps", str(new), "--into", str(kept))[0] == 0
    accuracy = {r["run"]: r["accuracy"] for r in json.loads((kept / "resolution.json").read_text())}
    assert accuracy == {"sincos_s0": 0.50, "sincos_s1": 0.60, "sincos_s2": 0.70}  # s1 replaced, s2 added, s0 kept
    table = (kept / "resolution.md").read_text()
    assert table.startswith("# Kept sweep\n") and "| sincos | interpolate | 60.0 ± 10.0 (3) |" in table
    assert script_main("merge_sweeps", *_written(tmp_path, "more.json", {"sincos_s3": 0.5}, n=200),
                       "--into", str(kept))[0] == 2  # the kept runs count in the sample-size check
    assert "same --limit" in capsys.readouterr().err
    (kept / "resolution.json").write_text("{truncated")
    assert script_main("merge_sweeps", str(new), "--into", str(kept))[0] == 2
    assert "not a readable resolution.json" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # one of --out and --into
        script_main("merge_sweeps", str(new))


@pytest.mark.slow
def test_keep_sweep_joins_each_sweep_to_the_kept_one(tmp_path):
    """An experiment rerun for some of its runs: the kept tables hold every run, the rerun ones at their new value."""
    for name, runs in [("first", {"cpb_s0": 0.5, "cpb_s1": 0.6}), ("second", {"cpb_s1": 0.7, "cpb_s2": 0.8})]:
        sweep = tmp_path / "runs" / name / "resolution"
        (sweep / "runs").mkdir(parents=True)
        (sweep / "resolution.json").write_text(json.dumps(_records(runs)))
        for run, acc in runs.items():
            (sweep / "runs" / f"{run}.json").write_text(json.dumps({"records": _records({run: acc})}))
        if "cpb_s0" not in runs:  # an entry an earlier sweep left in runs/ (its run retrained since): not this
            # sweep's, so not kept over the record kept for it
            (sweep / "runs" / "cpb_s0.json").write_text(json.dumps({"records": _records({"cpb_s0": 0.1})}))
        done = subprocess.run(["bash", "-c", f"source scripts/keep_records.sh && keep_sweep {sweep}"], cwd=ROOT,
                              env={**os.environ, "PYTHON": sys.executable, "RECORDS": str(tmp_path / "kept"),
                                   "RUNS": str(tmp_path / "runs" / name)}, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    kept = tmp_path / "kept" / "resolution"
    assert {r["run"]: r["accuracy"] for r in json.loads((kept / "resolution.json").read_text())} == \
        {"cpb_s0": 0.5, "cpb_s1": 0.7, "cpb_s2": 0.8}
    assert sorted(p.name for p in (kept / "runs").iterdir()) == ["cpb_s0.json", "cpb_s1.json", "cpb_s2.json"]
    assert {p.stem: json.loads(p.read_text())["records"][0]["accuracy"] for p in (kept / "runs").iterdir()} == \
        {"cpb_s0": 0.5, "cpb_s1": 0.7, "cpb_s2": 0.8}


def test_a_sweep_takes_back_the_kept_evaluations_without_replacing_its_own(tmp_path):
    """On a fresh machine the kept per-run records go back where eval.py looks for finished evaluations (it reuses
    one only for the same weights and settings); an entry the machine already has is left as it is."""
    kept, sweep = tmp_path / "kept" / "resolution" / "runs", tmp_path / "runs" / "resolution"
    kept.mkdir(parents=True)
    for name in ("cpb_s0", "cpb_s1"):
        (kept / f"{name}.json").write_text(f"kept {name}")
    (sweep / "runs").mkdir(parents=True)
    (sweep / "runs" / "cpb_s1.json").write_text("evaluated here")

    def reuse(records: str | None) -> subprocess.CompletedProcess:
        env = {**os.environ, "RUNS": str(tmp_path / "runs")}
        env.pop("RECORDS", None)
        return subprocess.run(["bash", "-c", f"source scripts/keep_records.sh && reuse_kept_sweep {sweep}"], cwd=ROOT,
                              env={**env, **({"RECORDS": records} if records else {})}, capture_output=True, text=True)

    assert reuse(None).returncode == 0 and sorted(p.name for p in (sweep / "runs").iterdir()) == ["cpb_s1.json"]
    done = reuse(str(tmp_path / "kept"))
    assert done.returncode == 0, done.stderr
    assert {p.name: p.read_text() for p in (sweep / "runs").iterdir()} == {"cpb_s0.json": "kept cpb_s0",
                                                                           "cpb_s1.json": "evaluated here"}
    shutil.rmtree(tmp_path / "kept")  # nothing kept yet: nothing to take back, and no error
    assert reuse(str(tmp_path / "kept")).returncode == 0


def test_a_run_counts_as_finished_only_with_a_checkpoint_and_every_epochs_metrics(tmp_path):
    """What the experiment scripts evaluate and skip: a run still training (or stopped part-way) is not finished."""
    run = tmp_path / "cpb_s0"
    run.mkdir()
    (run / "config.yaml").write_text("train:\n  epochs: 3\n")

    def finished() -> bool:
        done = subprocess.run(["bash", "-c", f"source scripts/keep_records.sh && run_finished {run}"], cwd=ROOT,
                              env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True)
        assert done.stderr == ""
        return done.returncode == 0

    (run / "metrics.jsonl").write_text('{"epoch": 1}\n{"epoch": 2}\n{"epoch": 3}\n')
    assert not finished()  # no checkpoint
    (run / "checkpoint.pt").write_bytes(b"")
    assert finished()
    (run / "metrics.jsonl").write_text('{"epoch": 1}\n{"epoch": 2}\n')
    assert not finished()  # two of three epochs


def _written(folder: Path, name: str, runs: dict[str, float], n: int = 100) -> list[str]:
    (folder / name).write_text(json.dumps(_records(runs, n)))
    return [str(folder / name)]


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "cifar-10-batches-py").is_dir(), reason="CIFAR-10 not in VITPE_DATA")
def test_recipe_vs_timm_runs_both_side_by_side_and_tabulates(tmp_path):
    env = {**os.environ, "PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "VITPE_DATA": str(DATA), "SEEDS": "0",
           "PES": "learnable sincos", "TIMM_EPOCHS": "1", "TIMM_ARGS": "--train-limit 256 --test-limit 100",
           "EXTRA": "data.train_limit=256 data.test_limit=100 train.epochs=1 model.dim=32 model.depth=1 "
                    "model.heads=2 train.img_sizes=[32] train.img_size_epochs=[]", "RECORDS": str(tmp_path / "kept")}
    runs = tmp_path / "side"
    done = subprocess.run(["bash", "scripts/recipe_vs_timm.sh", str(runs)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    table = (runs / "accuracy.md").read_text()
    assert "| timm plain loop | 1 | 1 |" in table and "| learnable | 1 | 1 |" in table and "| sincos |" in table
    assert "wall / timm" in table
    for run, config in (("timm_s0", "config.json"), ("learnable_s0", "config.yaml"), ("sincos_s0", "config.yaml")):
        assert (tmp_path / "kept" / run / config).is_file()  # RECORDS: each finished run's records, kept
        assert (tmp_path / "kept" / run / "metrics.jsonl").read_text() == (runs / run / "metrics.jsonl").read_text()
    again = subprocess.run(["bash", "scripts/recipe_vs_timm.sh", str(runs)], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=600)
    assert again.returncode == 0 and (runs / "accuracy.md").read_text() == table  # finished runs are kept
    assert "epoch 1/1" in (runs / "learnable_s0.log").read_text()  # and so are their logs (appended to, not emptied)
    one_loop_env = {**env, "SEEDS": "0 1", "LOOP_SEEDS": "0", "PES": "learnable"}
    one_loop = subprocess.run(["bash", "scripts/recipe_vs_timm.sh", str(runs)], cwd=ROOT, env=one_loop_env,
                              capture_output=True, text=True, timeout=600)
    assert one_loop.returncode == 0, one_loop.stderr[-2000:]  # seed 1 without a loop run: the loop's seed 0 anchors
    assert (runs / "learnable_s1" / "metrics.jsonl").is_file() and not (runs / "timm_s1").exists()
    both_env = {**env, "SEEDS": "2", "PES": "learnable", "THREADS": "2", "JOBS": "1"}  # one at a time, two threads
    both = subprocess.run(["bash", "scripts/recipe_vs_timm.sh", str(runs)], cwd=ROOT, env=both_env,
                          capture_output=True, text=True, timeout=600)
    assert both.returncode == 0, both.stderr[-2000:]
    for run in ("timm_s2", "learnable_s2"):  # each record names its threads: the tables divide like by like
        last = json.loads((runs / run / "metrics.jsonl").read_text().splitlines()[-1])
        assert last["machine"].endswith(", 2 threads")
    refused = subprocess.run(["bash", "scripts/recipe_vs_timm.sh", str(runs)], cwd=ROOT, env={**env, "JOBS": "two"},
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "JOBS must be a whole number >= 1" in refused.stderr


@pytest.mark.slow
def test_text_experiments_script_trains_every_seed_and_averages_them(tmp_path):
    env = {**os.environ, "PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "SEEDS": "0 1", "LENGTH_PES": "none",
           "SST2_PES": "", "EXTRA": "train.epochs=1 data.synthetic_size=128 model.dim=16 model.heads=2",
           "OMP_NUM_THREADS": "1"}
    runs = tmp_path / "text"
    subprocess.run(["bash", "scripts/text_experiments.sh", str(runs)], cwd=ROOT, env=env, check=True,
                   capture_output=True)
    for task in ("order", "adjacent"):
        for seed in (0, 1):
            config = yaml.safe_load((runs / f"{task}_none_s{seed}" / "config.yaml").read_text())
            assert config["train"]["seed"] == seed and config["data"]["synthetic_size"] == 128
        table = (runs / f"length_{task}" / "length.md").read_text()
        assert "| none | interpolate |" in table and "(2)" in table  # the two seeds averaged in every cell


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "cifar-10-batches-py").is_dir(), reason="CIFAR-10 not in VITPE_DATA")
def test_gpu_check_fits_the_recipe_to_its_time_and_summarises(tmp_path):
    """The device-time script, its recipe step on a CPU: the probe's epoch time sets the epochs of the run."""
    env = {**os.environ, "PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "VITPE_DATA": str(DATA), "DEVICE": "cpu",
           "OMP_NUM_THREADS": "1", "STEPS": "recipe", "TRAIN_SECONDS": "3", "PE": "sincos",
           "EXTRA": "data.train_limit=256 data.test_limit=100 model.dim=32 model.depth=1 model.heads=2 "
                    "train.batch_size=64"}

    def check(out: Path, **more: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "scripts/gpu_check.sh"], cwd=ROOT, env={**env, "OUT": str(out), **more},
                              capture_output=True, text=True, timeout=600)

    done = check(tmp_path / "a")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = (tmp_path / "a" / "summary.md").read_text()
    planned = int(summary.split(" epochs (warm-up")[0].rsplit(" ", 1)[1])
    config = yaml.safe_load((tmp_path / "a" / "recipe_sincos" / "config.yaml").read_text())
    assert config["train"]["epochs"] == planned >= 2 and config["model"]["pe"] == "sincos"
    assert f"| {planned} |" in summary.split("## Recipe, sincos")[1]  # one row per epoch, up to the last
    assert not (tmp_path / "a" / "bench").exists()  # steps left out of STEPS do not run
    graphed = check(tmp_path / "g", STEPS="graphed", EXTRA=env["EXTRA"] + " data.train_limit=128 model.dim=16")
    assert graphed.returncode == 0, graphed.stderr[-2000:]
    summary = (tmp_path / "g" / "summary.md").read_text()  # one run eager, one compiled (CUDA graphs on a GPU)
    assert "| eager |" in summary and "| graphed |" in summary and "step graphed" not in summary
    compiled = yaml.safe_load((tmp_path / "g" / "throughput_graphed" / "config.yaml").read_text())["train"]
    assert compiled["compile"] and compiled["compile_mode"] == "reduce-overhead"
    for out, more, message in [(tmp_path / "a", {}, "already holds files"),
                               (tmp_path / "b", {"TRAIN_SECONDS": "soon"}, "TRAIN_SECONDS must be"),
                               (tmp_path / "c", {"STEPS": "recipe benchmark"}, "unknown step 'benchmark'")]:
        refused = check(out, **more)
        assert refused.returncode == 2 and message in refused.stderr


@pytest.mark.slow
def test_transfer_script_trains_augments_fine_tunes_and_evaluates_in_every_mode(tmp_path):
    env = {**os.environ, "PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "CONFIG": "configs/smoke.yaml",
           "PES": "rope_axial", "AUG_PES": "rope_axial", "AUGS": "r2=rescale=2,jitter=1.5 z=crop_scale=0.25:1",
           "SEEDS": "0", "FINETUNE_SIZES": "24", "RESOLUTIONS": "16,24", "EVAL_LIMIT": "64", "JOBS": "2",
           "OMP_NUM_THREADS": "1", "EVAL_OPTIONS": "rope_axial:theta=50",
           "EXTRA": "data.dataset=synthetic data.synthetic_size=128 data.img_size=16 train.epochs=1",
           "RECORDS": str(tmp_path / "kept")}
    runs = tmp_path / "transfer"
    done = subprocess.run(["bash", "scripts/transfer.sh", str(runs)], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    augmented = yaml.safe_load((runs / "augmented" / "rope_axial_r2_s0" / "config.yaml").read_text())
    assert augmented["model"]["pe_options"] == {"rescale": 2.0, "jitter": 1.5}
    zoomed = yaml.safe_load((runs / "augmented" / "rope_axial_z_s0" / "config.yaml").read_text())
    assert (zoomed["data"]["crop_scale"], zoomed["data"]["crop_padding"], zoomed["model"]["pe_options"]) == \
        ([0.25, 1.0], 0, {})
    for mode in ("interpolate", "extrapolate"):
        tuned = runs / "finetuned" / f"rope_axial_s0_24_{mode}"
        config = yaml.safe_load((tuned / "config.yaml").read_text())
        assert config["train"]["img_sizes"] == [24] and config["model"]["pe_resize"] == mode
        assert json.loads((tuned / "init.json").read_text())["run"] == str(runs / "trained" / "rope_axial_s0")
    records = json.loads((runs / "resolution" / "resolution.json").read_text())
    assert {r["run"] for r in records} == {"rope_axial_s0", "rope_axial_r2_s0", "rope_axial_z_s0",
                                           "rope_axial_s0_24_interpolate", "rope_axial_s0_24_extrapolate",
                                           "rope_axial_s0@theta=50"}  # EVAL_OPTIONS: tested with a PE option too
    assert {r["pe_resize"] for r in records} == {"interpolate", "extrapolate", "ntk", "yarn"}
    # RECORDS: every run's records and the sweep, kept without checkpoints, enough to rebuild the sweep's tables
    kept = tmp_path / "kept"
    assert not list(kept.rglob("*.pt"))
    for run in ("trained/rope_axial_s0", "augmented/rope_axial_r2_s0", "finetuned/rope_axial_s0_24_extrapolate"):
        assert (kept / run / "config.yaml").read_text() == (runs / run / "config.yaml").read_text()
        assert (kept / run / "metrics.jsonl").read_text() == (runs / run / "metrics.jsonl").read_text()
    assert (kept / "finetuned/rope_axial_s0_24_interpolate/init.json").is_file()
    rebuilt = tmp_path / "rebuilt"
    assert script_main("merge_sweeps", *map(str, sorted((kept / "resolution/runs").glob("*.json"))),
                       "--out", str(rebuilt))[0] == 0
    assert sorted(json.dumps(r, sort_keys=True) for r in json.loads((rebuilt / "resolution.json").read_text())) == \
        sorted(json.dumps(r, sort_keys=True) for r in json.loads((kept / "resolution/resolution.json").read_text()))
    # a fresh machine's sweep (no resolution/ yet) reads the kept evaluations back for the same weights: the kept
    # record, edited here to tell it apart, is what the new sweep shows, and no run is evaluated again
    shutil.rmtree(runs / "resolution")
    entry = kept / "resolution/runs/rope_axial_s0.json"
    cached = json.loads(entry.read_text())
    entry.write_text(json.dumps({**cached, "records": [{**r, "accuracy": 0.125} for r in cached["records"]]}))
    again = subprocess.run(["bash", "scripts/transfer.sh", str(runs)], cwd=ROOT, env={**env, "STAGES": "evaluate"},
                           capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-2000:]
    swept = json.loads((runs / "resolution" / "resolution.json").read_text())
    assert {r["accuracy"] for r in swept if r["run"] == "rope_axial_s0"} == {0.125}
    bad = subprocess.run(["bash", "scripts/transfer.sh", str(tmp_path / "bad")], cwd=ROOT, capture_output=True,
                         text=True, env={**env, "AUGS": "big=scale=3"})
    assert bad.returncode == 2 and "AUGS: 'big=scale=3' is not name=option=value" in bad.stderr


@pytest.mark.slow
def test_imagenette_script_runs_transfer_on_the_imagenette_configs(tmp_path):
    from test_image_folder import fake_imagenette

    fake_imagenette(tmp_path / "data", n=4, size=(48, 32))
    env = {**os.environ, "PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "VITPE_DATA": str(tmp_path / "data"),
           "PES": "rope_mixed", "AUG_PES": "", "SEEDS": "0", "FINETUNE_SIZES": "32", "RESOLUTIONS": "16,32",
           "JOBS": "2", "OMP_NUM_THREADS": "1", "RECORDS": str(tmp_path / "kept"),
           "EXTRA": "data.img_size=32 model.dim=32 model.depth=1 model.heads=2 train.epochs=1 train.batch_size=4"}
    runs = tmp_path / "imagenette"
    done = subprocess.run(["bash", "scripts/imagenette.sh", str(runs)], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    trained = yaml.safe_load((runs / "trained" / "rope_mixed_s0" / "config.yaml").read_text())
    tuned = yaml.safe_load((runs / "finetuned" / "rope_mixed_s0_32_extrapolate" / "config.yaml").read_text())
    assert trained["data"]["dataset"] == tuned["data"]["dataset"] == "imagenette"
    assert (trained["model"]["patch_size"], trained["data"]["crop_scale"]) == (8, [0.35, 1.0])
    assert tuned["train"]["img_sizes"] == [32] and tuned["data"]["mixup"] == 0
    records = json.loads((runs / "resolution" / "resolution.json").read_text())
    assert {r["run"] for r in records} == {"rope_mixed_s0", "rope_mixed_s0_32_interpolate",
                                           "rope_mixed_s0_32_extrapolate"}
    assert all(r["n"] == 12 for r in records if "accuracy" in r)  # the whole validation set
    assert (tmp_path / "kept" / "trained" / "rope_mixed_s0" / "metrics.jsonl").is_file()


@pytest.mark.slow
def test_variants_script_trains_each_line_and_tabulates_them(tmp_path):
    variants = tmp_path / "variants.txt"
    variants.write_text("# a comment\nwide model.dim=48\n\nnarrow model.dim=32\n")
    env = {**os.environ, "PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "JOBS": "2", "RECORDS": str(tmp_path / "kept"),
           "EXTRA": "data.dataset=synthetic data.synthetic_size=64 data.img_size=16 train.epochs=1 model.depth=1 "
                    "model.heads=2"}
    runs = tmp_path / "runs"
    done = subprocess.run(["bash", "scripts/variants.sh", "configs/smoke.yaml", str(variants), str(runs)], cwd=ROOT,
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    dims = {name: yaml.safe_load((runs / name / "config.yaml").read_text())["model"]["dim"]
            for name in ("wide", "narrow")}
    assert dims == {"wide": 48, "narrow": 32}
    table = (runs / "accuracy.md").read_text()
    assert f"| {runs}/wide |" in table and f"| {runs}/narrow |" in table
    assert (tmp_path / "kept" / "wide" / "metrics.jsonl").is_file()
    for text, message in [("a x=1\na y=2\n", "each run name once; repeated: a"),
                          ("a/b x=1\n", "run names may hold letters")]:
        variants.write_text(text)
        bad = subprocess.run(["bash", "scripts/variants.sh", "configs/smoke.yaml", str(variants), str(tmp_path / "b")],
                             cwd=ROOT, env=env, capture_output=True, text=True)
        assert bad.returncode == 2 and message in bad.stderr


def _lanes_env(python: str) -> dict[str, str]:
    return {**os.environ, "PATH": "/usr/bin:/bin", "PYTHON": python, "JOBS": "2",
            "EXTRA": "data.dataset=synthetic data.synthetic_size=64 data.img_size=16 model.depth=1 model.heads=2"}


def _running(runs: Path) -> list[str]:
    """The processes whose command line names RUNS (a training, its shell, xargs) still alive."""
    found = subprocess.run(["pgrep", "-af", str(runs)], capture_output=True, text=True)
    return found.stdout.splitlines()


def _wait_for_an_epoch(run: Path, script: subprocess.Popen, timeout: float = 120) -> None:
    metrics = run / "metrics.jsonl"
    deadline = time.monotonic() + timeout
    while not (metrics.is_file() and metrics.read_text().strip()):
        assert script.poll() is None, script.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "no epoch finished in time"
        time.sleep(0.2)


@pytest.mark.slow
def test_a_failed_lane_stops_the_trainings_beside_it_and_the_script_waits_for_their_checkpoints(tmp_path):
    # the second variant fails, but only once the first has finished an epoch (a PYTHON that holds it back until
    # then): the first must not train on, unseen, after the script has said it failed
    runs = tmp_path / "runs"
    held = tmp_path / "python"
    held.write_text(f'#!/bin/sh\ncase "$*" in *bad*) while [ ! -s "{runs}/slow/metrics.jsonl" ]; do sleep 0.2; done;;'
                    f' esac\nexec {sys.executable} "$@"\n')
    held.chmod(0o755)
    variants = tmp_path / "variants.txt"
    variants.write_text("slow train.epochs=5000\nbad model.pe=nope\n")  # slow: still training when bad fails
    done = subprocess.run(["bash", "scripts/variants.sh", "configs/smoke.yaml", str(variants), str(runs)], cwd=ROOT,
                          env=_lanes_env(str(held)), capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and f"failed: {runs}/bad (see {runs}/bad.log)" in done.stderr
    assert "a lane failed: stopping the lanes still running" in done.stderr
    assert _running(runs) == []  # nothing left behind
    assert "preempted by SIGTERM" in (runs / "slow.log").read_text()  # stopped at a step, its checkpoint written
    assert (runs / "slow" / "checkpoint.pt").is_file() and not (runs / "accuracy.md").exists()


@pytest.mark.slow
def test_sigterm_to_an_experiment_script_stops_its_lanes_at_a_checkpoint_and_the_same_command_resumes(tmp_path):
    runs = tmp_path / "runs"
    variants = tmp_path / "variants.txt"
    variants.write_text("long train.epochs=40\n")
    command = ["bash", "scripts/variants.sh", "configs/smoke.yaml", str(variants), str(runs)]
    env = _lanes_env(sys.executable)
    script = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_an_epoch(runs / "long", script)
        script.terminate()  # SIGTERM to the script alone, as a scheduler or `kill PID` sends it
        _, stderr = script.communicate(timeout=120)
    finally:
        script.kill()
    assert script.returncode == 143 and "stopped (SIGTERM): stopping the lanes still running" in stderr
    assert _running(runs) == []
    assert "preempted by SIGTERM" in (runs / "long.log").read_text()
    stopped_at = len((runs / "long" / "metrics.jsonl").read_text().splitlines())
    assert stopped_at < 40
    again = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]  # the same command resumed it to the end
    epochs = [json.loads(line)["epoch"] for line in (runs / "long" / "metrics.jsonl").read_text().splitlines()]
    assert epochs == list(range(1, 41))


def imagewoof_env(tmp_path: Path, per_class: int, **settings: str) -> dict[str, str]:
    """The environment of an Imagewoof experiment script on a small photo folder (tmp_path/data/imagewoof2-320):
    seed 0, two lanes, records kept in tmp_path/kept, ``settings`` (EXTRA and the script's own) on top."""
    from conftest import photo_folder

    photo_folder(tmp_path / "data" / "imagewoof2-320", per_class=per_class)
    return {**os.environ, "PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "VITPE_DATA": str(tmp_path / "data"),
            "SEEDS": "0", "JOBS": "2", "RECORDS": str(tmp_path / "kept"), **settings}


@pytest.mark.slow
def test_imagewoof_stream_script_trains_both_loaders_side_by_side_and_keeps_their_records(tmp_path):
    env = imagewoof_env(tmp_path, per_class=4, EXTRA="data.img_size=32 model.dim=32 model.depth=1 model.heads=2 "
                        "train.epochs=2 train.batch_size=4 train.img_sizes=[16] train.img_size_epochs=[] "
                        "model.img_size=16 train.warmup_epochs=0")
    runs = tmp_path / "imagewoof"
    done = subprocess.run(["bash", "scripts/imagewoof_stream.sh", str(runs)], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    for loader in ("memory", "stream"):
        config = yaml.safe_load((runs / loader / "cpb_s0" / "config.yaml").read_text())
        assert (config["data"]["dataset"], config["data"]["loader"]) == ("imagewoof", loader)
        assert (tmp_path / "kept" / loader / "cpb_s0" / "metrics.jsonl").is_file()
    logs = {loader: (runs / loader / "cpb_s0.log").read_text() for loader in ("memory", "stream")}
    again = subprocess.run(["bash", "scripts/imagewoof_stream.sh", str(runs)], cwd=ROOT, env=env,
                           capture_output=True, text=True)  # both finished: nothing trains again
    assert again.returncode == 0
    assert all((runs / loader / "cpb_s0.log").read_text() == log for loader, log in logs.items())


@pytest.mark.slow
def test_imagewoof_native_script_trains_square_and_native_runs_and_sweeps_them_at_native_aspect(tmp_path):
    env = imagewoof_env(tmp_path, per_class=6, PES="rope_mixed", RESOLUTIONS="16,32", EVAL_LIMIT="0",
                        ANCHOR_EPOCHS="1", ANCHORS="rope_mixed", ANCHOR_OPTIONS="--batch-size 2 --workers 0",
                        EXTRA="data.img_size=32 model.dim=32 model.depth=1 model.heads=2 model.patch_size=4 "
                        "model.stem=patch train.epochs=1 train.batch_size=4 train.img_sizes=[16] "
                        "train.img_size_epochs=[] model.img_size=16 train.warmup_epochs=0 data.seq_lens=[4,16] "
                        "data.token_budget=32")
    runs = tmp_path / "native"
    done = subprocess.run(["bash", "scripts/imagewoof_native.sh", str(runs)], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    for mode in ("square", "native"):
        config = yaml.safe_load((runs / f"{mode}_rope_mixed_s0" / "config.yaml").read_text())
        assert config["data"]["native_aspect"] == (mode == "native") and config["model"]["pe"] == "rope_mixed"
        assert (tmp_path / "kept" / f"{mode}_rope_mixed_s0" / "metrics.jsonl").is_file()
    records = json.loads((runs / "resolution" / "resolution.json").read_text())
    assert {r["aspect"] for r in records} == {"native"} and {r["resolution"] for r in records} == {16, 32}
    assert {r["pe_resize"] for r in records} == {"interpolate", "extrapolate", "ntk"}
    assert len({r["run"] for r in records}) == 2 and (tmp_path / "kept" / "resolution" / "resolution.json").is_file()
    kept = tmp_path / "kept" / "naflex_rope_mixed_s0"  # the anchor: trained by timm's loader, swept, kept
    assert json.loads((kept / "config.json").read_text())["pos_embed"] == "rope_mixed"
    assert [r["resolution"] for r in json.loads((kept / "resolution.json").read_text())] == [16, 32]


def test_the_naflex_anchor_trains_with_timms_loader_resumes_and_evaluates_at_native_aspect(tmp_path, capsys):
    from conftest import photo_folder

    photo_folder(tmp_path / "data" / "imagewoof2-320", per_class=6)
    run = tmp_path / "naflex"
    common = ["--data-root", str(tmp_path / "data"), "--batch-size", "2", "--workers", "0", "--threads", "1"]
    assert script_main("naflex_baseline", "--out", str(run), "--pos-embed", "rope_mixed", "--epochs", "2",
                       *common)[0] == 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2] and records[0]["baseline"] == "timm NaFlexViT"
    assert all(0 <= r["test_acc"] <= 1 for r in records)
    with pytest.raises(SystemExit):  # a second run into the same folder is refused, not mixed in
        script_main("naflex_baseline", "--out", str(run), *common)
    assert "already holds a run" in capsys.readouterr().err
    assert script_main("naflex_baseline", "--out", str(run), "--resume", "--epochs", "3", *common)[0] == 0
    assert [json.loads(line)["epoch"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]
    assert script_main("naflex_baseline", "--evaluate", str(run), "--sizes", "16,32", *common[:2])[0] == 0
    swept = json.loads((run / "resolution.json").read_text())
    assert [r["resolution"] for r in swept] == [16, 32] and {r["aspect"] for r in swept} == {"native"}
    assert swept[1]["n"] == 18 and swept[0]["pe"] == "naflex_rope_mixed"
