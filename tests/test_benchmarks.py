"""The experiments of benchmarks/ run (on a tiny model, a few rounds): the A/B harness, the named changes, the
memory probe. Their timings are not tested."""

import subprocess
import sys

import pytest
import torch

from benchmarks import profile_step
from benchmarks.ab import Change, compare
from benchmarks.changes import CHANGES, change


class Owner:
    """Something to change: a counter of which variant each step ran with."""

    value = "old"


def test_the_harness_runs_every_variant_in_each_round_and_pairs_the_ratios():
    calls = []

    class Counting:
        def __init__(self, name):
            self.name = name

    change_ = Change(Owner, "value", {"old": Counting("old"), "new": Counting("new")})
    original = change_.set

    def set_and_count(variant):
        calls.append(variant)
        original(variant)

    change_.set = set_and_count
    result = compare(change_, pes=["alibi"], px=8, rounds=3, kind="infer", dims="quick", batch=2)
    assert set(result.seconds) == {"none", "alibi/old", "alibi/new"}
    assert all(len(times) == 3 for times in result.seconds.values())
    assert calls.count("old") == calls.count("new") >= 3 + 2  # every round and the warm-up steps
    assert Owner.value.name == "new"  # left at the last variant
    ratio, low, high = result.new_over_old["alibi"]
    assert low <= ratio <= high
    assert result.over_none["none"] == (1.0, 1.0, 1.0)
    lines = result.lines("infer 8px")
    assert any("alibi new/old" in line for line in lines) and len(lines) == 4


def test_a_bad_kind_or_dims_is_refused():
    with pytest.raises(ValueError, match="kind must be one of"):
        compare(Change(Owner, "value", {"old": 1}), pes=[], px=8, rounds=1, kind="backward")
    with pytest.raises(ValueError, match="dims must be one of"):
        compare(Change(Owner, "value", {"old": 1}), pes=[], px=8, rounds=1, dims="huge")


@pytest.mark.parametrize("name", CHANGES)
def test_every_named_change_sets_attributes_that_exist(name):
    chosen, pes = change(name)
    for value in chosen.values.values():
        assert value is not None
    assert hasattr(chosen.owner, chosen.attribute) and pes


@pytest.mark.slow
def test_changes_py_prints_new_over_old(tmp_path):
    done = subprocess.run([sys.executable, "benchmarks/changes.py", "cpb_tables", "--dims", "quick", "--px", "8",
                           "--batch", "2", "--rounds", "2"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "train 8px cpb new/old" in done.stdout


def test_flex_bias_training_on_a_cpu_is_one_clear_error():
    done = subprocess.run([sys.executable, "benchmarks/changes.py", "flex_bias", "--kind", "train"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "no backward on a CPU" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_peak_memory_measures_each_model_in_its_own_process():
    done = subprocess.run([sys.executable, "benchmarks/peak_memory.py", "none,timm", "--px", "8", "--batch", "2"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["none", "timm"] and all("MB peak" in line for line in lines)


def test_profile_step_prints_the_step_time_and_the_profile(capsys):
    import re

    assert profile_step.main(["rope_axial", "--dims", "quick", "--px", "8", "--batch", "2", "--steps", "1",
                              "--rows", "200"]) == 0
    printed = capsys.readouterr().out
    step = re.search(r"rope_axial \(quick dims, 8 px, batch 2, eager, cpu\): ([0-9.]+) ms per training step", printed)
    assert step and float(step.group(1)) > 0
    # the profile is of a whole training step of this PE: its rotation forward and backward, the optimiser's step
    assert "_RotaryQK" in printed and "Backward" in printed and "AdamW" in printed
    assert profile_step.main(["alibi", "--dims", "quick", "--px", "8", "--batch", "2", "--steps", "1",
                              "--rows", "200"]) == 0
    assert "_RotaryQK" not in capsys.readouterr().out  # and the rotation is rope's, not always there


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")
def test_profile_step_on_a_missing_gpu_is_one_clear_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        profile_step.main(["none", "--device", "cuda"])
    assert exit_.value.code == 2 and "sees no CUDA GPU" in capsys.readouterr().err


@pytest.mark.slow
def test_the_loader_benchmark_times_every_loader_and_measures_memory(tmp_path):
    import json

    from conftest import photo_folder

    folder = photo_folder(tmp_path / "data", per_class=8)  # 24 images: 2 warm-up and 2 timed batches of 4
    from benchmarks import loaders

    assert loaders.main(["throughput", str(folder), "--out", str(tmp_path / "out"), "--rounds", "2", "--sizes", "16",
                         "--workers", "1", "--batch", "4", "--timed", "2"]) == 0
    record = json.loads((tmp_path / "out" / "throughput.json").read_text())
    (row,) = record["rows"]
    assert {row[f"{name}_img_s"] > 0 for name in ("vitpe", "vitpe_draft", "timm", "torchvision")} == {True}
    assert len(row["vitpe_rounds"]) == 2 and row["vitpe_over_timm"] > 0 and record["cores"] >= 1
    assert loaders.main(["memory", "--out", str(tmp_path / "out"), "--images", "300,100"]) == 0
    memory = json.loads((tmp_path / "out" / "memory.json").read_text())
    assert [r["images"] for r in memory["rows"]] == [300, 100]
    assert all(r["peak_pss_mb"] > 0 and r["main_peak_rss_mb"] > 0 for r in memory["rows"])
