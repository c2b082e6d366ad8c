"""Every published table is what the committed records give: scripts/report.py regenerates the tables of README.md,
RESULTS.md, BENCHMARKS.md and docs/results/*.md and fails on any difference."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REPORT = [sys.executable, str(ROOT / "scripts/report.py")]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*REPORT, *args], capture_output=True, text=True, timeout=300)


def copy_of_the_pages(tmp_path: Path) -> Path:
    for page in ("README.md", "RESULTS.md", "BENCHMARKS.md"):
        shutil.copy(ROOT / page, tmp_path / page)
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copytree(ROOT / "results", tmp_path / "results")
    shutil.copytree(ROOT / "configs", tmp_path / "configs")  # the models whose size a sentence gives
    return tmp_path


@pytest.mark.slow
def test_the_pages_show_what_the_records_give():
    done = run("--check")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_a_number_that_differs_from_its_record_fails_the_check(tmp_path):
    root = copy_of_the_pages(tmp_path)
    metrics = root / "results/recipe/D_learnable_b64_s2/metrics.jsonl"
    lines = metrics.read_text().splitlines()
    assert '"test_acc": 0.7216' in lines[-1]
    lines[-1] = lines[-1].replace('"test_acc": 0.7216', '"test_acc": 0.7222')  # as once printed by hand
    metrics.write_text("\n".join(lines) + "\n")
    done = run("--check", "--root", str(root))
    assert done.returncode == 1
    assert "docs/results/recipe.md" in done.stderr and "72.22" in done.stdout
    assert run("--root", str(root)).returncode == 0  # writing them brings the page back in line
    assert run("--check", "--root", str(root)).returncode == 0
    assert "72.22" in (root / "docs/results/recipe.md").read_text()


@pytest.mark.slow
def test_a_hand_edited_table_fails_the_check(tmp_path):
    root = copy_of_the_pages(tmp_path)
    page = root / "RESULTS.md"
    text = page.read_text()
    start = text.index("<!-- table: compare-accuracy -->")
    row = text.index("| `rope_mixed` |", start)
    page.write_text(text[:row] + text[row:].replace("55.7 ± 0.3", "56.3 ± 0.7", 1))
    done = run("--check", "--root", str(root))
    assert done.returncode == 1 and "RESULTS.md" in done.stderr


@pytest.mark.slow
def test_a_table_whose_markers_are_removed_and_numbers_edited_fails_though_another_page_shows_it(tmp_path):
    root = copy_of_the_pages(tmp_path)
    page = root / "RESULTS.md"  # recipe-current-short is on README.md too
    text = page.read_text()
    start = text.index("<!-- table: recipe-current-short -->\n")
    end = text.index("<!-- /table -->", start) + len("<!-- /table -->")
    body = text[start:end].split("\n", 1)[1].rsplit("<!-- /table -->", 1)[0]
    page.write_text(text[:start] + body.replace("81.", "83.", 1) + text[end:])
    done = run("--check", "--root", str(root))
    assert done.returncode == 1 and "RESULTS.md: its generated tables and numbers are not those" in done.stderr
    assert "missing table:recipe-current-short" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("page, words", [("docs/results/bias_growth.md", "Not committed yet"),
                                         ("docs/training.md", "TODO: the figure")])
def test_a_placeholder_on_any_page_fails_the_check(tmp_path, page, words):
    root = copy_of_the_pages(tmp_path)
    with (root / page).open("a") as f:
        f.write(f"\n{words}\n")
    done = run("--check", "--root", str(root))
    assert done.returncode == 1 and f"{page}: a placeholder where a result belongs" in done.stderr


@pytest.mark.slow
def test_a_page_the_list_does_not_name_fails_the_check(tmp_path):
    root = copy_of_the_pages(tmp_path)
    (root / "docs/new_page.md").write_text("# New\n\nIt gains 3.2 points.\n")
    done = run("--check", "--root", str(root))
    assert done.returncode == 1 and "docs/new_page.md: a page scripts/reports/pages.py does not list" in done.stderr


def test_a_marker_naming_no_table_is_an_error(tmp_path):
    root = copy_of_the_pages(tmp_path)
    with (root / "RESULTS.md").open("a") as page:
        page.write("\n<!-- table: no-such-table -->\n<!-- /table -->\n")
    done = run("--check", "--root", str(root))
    assert done.returncode != 0 and "no-such-table" in done.stdout + done.stderr


def _recipe_run(grid: Path, name: str, pe: str | None, minutes: float, acc: float, machine: str | None) -> None:
    folder = grid / name
    folder.mkdir(parents=True)
    if pe is None:  # a timm baseline
        (folder / "config.json").write_text('{"baseline": "timm plain loop", "epochs": 1}')
    else:
        (folder / "config.yaml").write_text(f"model:\n  pe: {pe}\ntrain:\n  epochs: 1\n")
    (folder / "metrics.jsonl").write_text(f'{{"epoch": 1, "test_acc": {acc}, "elapsed_s": {60 * minutes}}}\n')
    if machine:
        (folder / "machine.json").write_text(f'{{"machine": "{machine}"}}')


def test_recipe_wall_times_are_divided_only_by_the_loop_on_the_same_machine(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.recipe import recipe_pes, recipe_pes_short

    grid = tmp_path / "results/recipe/grid"
    _recipe_run(grid, "timm_s0", None, 50, 0.70, None)            # machine A (not recorded)
    _recipe_run(grid, "timm_again_s0", None, 20, 0.70, "fast")    # machine F (after the named A-D, the names'
    # order): 2.5x faster
    _recipe_run(grid, "cpb_s0", "cpb", 40, 0.78, None)            # 40 / 50
    _recipe_run(grid, "cpb_s1", "cpb", 10, 0.79, "fast")          # 10 / 20
    _recipe_run(grid, "none_s0", "none", 5, 0.74, "elsewhere")    # machine E: no loop ran there
    table = recipe_pes(tmp_path)
    row = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in table.splitlines() if line.startswith("| ")}
    assert row["`cpb`"][4] == "A / F / …" and row["`cpb`"][6].strip(" |") == "0.65"  # (0.8 + 0.5) / 2
    assert row["`none`"][6].strip(" |") == "—"
    assert "E: elsewhere (no loop ran there: no ratio)" in table
    short = recipe_pes_short(tmp_path)
    assert short.count("plain timm loop") == 1 and "| `cpb` | 78.5 ± 0.7 | 2 | 0.65 |" in short
    assert "— ran on a machine where the loop did not run" in short


def test_the_pes_that_joined_the_recipe_grid_later_show_in_its_table_but_not_in_the_three_budget_ranks(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.recipe import pe_order, recipe_pes

    scores = {"cpb": 0.78, "sincos": 0.75, "learnable": 0.74, "none": 0.67, "lookhere": 0.80}
    for pe, acc in scores.items():
        _recipe_run(tmp_path / "results/recipe/grid", f"{pe}_s0", pe, 40, acc, None)
    (tmp_path / "results/compare").mkdir(parents=True)  # the 3-epoch grid ran only the ten
    (tmp_path / "results/compare/resolution.json").write_text(json.dumps(
        [{"run": f"{pe}_s0", "pe": pe, "resolution": 32, "train_resolution": 32, "pe_resize": "interpolate",
          "accuracy": acc - 0.2, "loss": 1.0, "n": 2000} for pe, acc in scores.items() if pe != "lookhere"]))
    table = recipe_pes(tmp_path)
    assert "| `lookhere` |" in table.splitlines()[2]  # best first, after the header and its rule
    assert "not finished yet: `separable`," in table and "`fire`, `pape`, `liere`" in table
    assert "`lookhere`" not in table.rpartition("not finished yet")[2]
    order = pe_order(tmp_path)
    assert "lookhere" not in order and "| `cpb` | 1: 78.0 (1) | 1: 58.0 |" in order
    assert "`separable`" in order and "`fire`" not in order  # the ten still waiting are named, the later ones not


def test_the_recipe_sweep_names_its_reruns_with_their_accuracy_beside_the_grids(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.recipe import recipe_resolution

    recipe = tmp_path / "results/recipe"
    _recipe_run(recipe / "grid", "cpb_s0", "cpb", 40, 0.781, None)
    _recipe_run(recipe / "rerun", "cpb_s0", "cpb", 41, 0.785, "AMD EPYC (L2 512K, L3 32768K), 1 thread")
    _recipe_run(recipe / "rerun", "cpb_s1", "cpb", 41, 0.790, "AMD EPYC (L2 512K, L3 32768K), 1 thread")  # unswept
    (recipe / "rerun/learnable_s0").mkdir()  # an interrupted rerun: planned 2 epochs, one done
    (recipe / "rerun/learnable_s0/config.yaml").write_text("model:\n  pe: learnable\ntrain:\n  epochs: 2\n")
    (recipe / "rerun/learnable_s0/metrics.jsonl").write_text('{"epoch": 1, "test_acc": 0.5, "elapsed_s": 60}\n')
    records = [{"run": run, "pe": run[:-3], "resolution": 16, "train_resolution": 32, "pe_resize": "interpolate",
                "accuracy": 0.7, "loss": 1.0, "n": 2000} for run in ("cpb_s0", "learnable_s0", "peg_s0")]
    (recipe / "resolution.json").write_text(json.dumps(records))
    note = recipe_resolution(tmp_path).splitlines()[-1]
    assert "`cpb` seed 0 on C: 78.5% (grid's 78.1%)" in note
    assert "seed 1" not in note and "`learnable` seed" not in note  # not swept; not finished
    assert "C: AMD EPYC (L2 512K, L3 32768K), 1 thread" in note


def test_a_recipe_model_tested_with_a_pe_option_is_a_row_of_its_own_named_by_the_option(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.recipe import recipe_resolution

    (tmp_path / "results/recipe").mkdir(parents=True)
    records = [{"run": run, "pe": "lookhere", "resolution": 64, "train_resolution": 32, "pe_resize": "extrapolate",
                "accuracy": acc, "loss": 1.0, "n": 2000}
               for run, acc in (("lookhere_s0", 0.38), ("lookhere_s1", 0.40),
                                ("lookhere_s0@large_grid_slope=0.6", 0.43))]
    (tmp_path / "results/recipe/resolution.json").write_text(json.dumps(records))
    table = recipe_resolution(tmp_path)
    assert "| `lookhere` | extrapolate | 39.0 ± 1.4 |" in table
    assert "| `lookhere, large_grid_slope=0.6` | extrapolate | 43.0 |" in table
    assert "Seeds per row: `lookhere` 2, `lookhere, large_grid_slope=0.6` 1." in table


def test_a_levers_loop_run_anchors_wall_times_on_its_machine(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.loop_anchor import against_loop, loop_minutes_by_machine
    from reports.records import read_run

    recipe = tmp_path / "results/recipe"
    _recipe_run(recipe / "grid", "timm_s0", None, 50, 0.70, "A")
    _recipe_run(recipe / "convstem", "timm_s0", None, 30, 0.70, "B")  # LOOP_SEEDS=0: the lever's time anchor
    _recipe_run(recipe / "convstem", "cpb_s0", "cpb", 24, 0.80, "B")
    _recipe_run(recipe / "convstem", "cpb_s1", "cpb", 40, 0.80, "A")
    _recipe_run(recipe / "convstem", "cpb_s2", "cpb", 9, 0.80, "C")  # no loop on C
    _recipe_run(recipe / "loop_bf16", "timm_s0", None, 20, 0.70, "A")  # the loop in bf16: a row, never the anchor
    config = recipe / "loop_bf16/timm_s0/config.json"
    config.write_text('{"baseline": "timm plain loop, bf16", "precision": "bf16", "epochs": 1}')
    loops = loop_minutes_by_machine(tmp_path)
    assert loops == {frozenset({"A"}): 50, frozenset({"B"}): 30}
    runs = [read_run(recipe / "convstem" / f"cpb_s{s}") for s in range(3)]
    assert against_loop(runs[:2], loops) == "0.80" and against_loop(runs, loops) == "0.80¹"
    assert against_loop(runs[2:], loops) == "—"


def test_a_lever_meets_the_goal_only_with_every_pe_over_three_seeds_within_the_loops_time(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.recipe_levers import recipe_levers

    recipe = tmp_path / "results/recipe"
    _recipe_run(recipe / "grid", "timm_s0", None, 50, 0.70, "A")
    for seed in range(3):
        _recipe_run(recipe / "grid", f"cpb_s{seed}", "cpb", 45, 0.79, "A")
        _recipe_run(recipe / "grid", f"learnable_s{seed}", "learnable", 45, 0.75, "A")
    _recipe_run(recipe / "convstem", "cpb_s0", "cpb", 40, 0.81, "A")
    table = recipe_levers(tmp_path)
    row = next(line.split(" | ") for line in table.splitlines() if line.startswith("| + convolutional stem"))
    assert row[2:6] == ["81.00 / … / …", "81.0", "0.80", "… / … / …"]  # cpb's seed 0 (40 / 50 min); learnable: none
    assert table.rstrip().endswith("Not met.")  # the recipe misses 80% for cpb; the stem has one seed
    for seed in (1, 2):
        _recipe_run(recipe / "convstem", f"cpb_s{seed}", "cpb", 40, 0.80, "A")
    for seed in range(3):
        _recipe_run(recipe / "convstem", f"learnable_s{seed}", "learnable", 40 + 6 * seed, 0.76, "A")
    assert recipe_levers(tmp_path).rstrip().endswith("Met by: + convolutional stem, depth 5.")
    (recipe / "convstem/learnable_s2/metrics.jsonl").write_text(
        '{"epoch": 1, "test_acc": 0.76, "elapsed_s": 6000}\n')  # 100 min: the mean ratio 1.2 exceeds the loop's
    assert recipe_levers(tmp_path).rstrip().endswith("Not met.")
    shutil.rmtree(recipe / "convstem")  # a lever without a finished run is left out
    assert "convolutional stem" not in recipe_levers(tmp_path)
    assert "concatenated" not in recipe_levers(tmp_path)  # an option tried on the recipe: no run, no row
    _recipe_run(recipe / "bf16_24ep_concat", "learnable_s0", "learnable", 45, 0.74, "A")
    row = next(line.split(" | ") for line in recipe_levers(tmp_path).splitlines() if "PE concatenated" in line)
    assert row[2:] == ["… / … / …", "…", "—", "74.00 / … / …", "74.0", "0.90 |"]  # after the levers, cpb has none


def test_the_improved_recipe_is_set_against_each_loop_on_its_own_machine_and_threads(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.recipe_levers import recipe_anchors, recipe_current_short

    recipe = tmp_path / "results/recipe"
    one, two = "cpu, 1 thread", "cpu, 2 threads"
    _recipe_run(recipe / "grid", "timm_s0", None, 60, 0.71, one)
    _recipe_run(recipe / "grid", "timm_s1", None, 40, 0.71, one)  # the float32 loop on `one`: 50 min on average
    _recipe_run(recipe / "bf16_24ep", "cpb_s0", "cpb", 40, 0.82, one)
    _recipe_run(recipe / "bf16_24ep", "cpb_s1", "cpb", 30, 0.80, one)
    _recipe_run(recipe / "bf16_24ep", "learnable_s2", "learnable", 10, 0.70, "another machine")  # no loop there
    _recipe_run(recipe / "loop_bf16", "timm_s0", None, 35, 0.70, one)
    (recipe / "loop_bf16/timm_s0/config.json").write_text('{"baseline": "timm plain loop, bf16", "precision": "bf16"}')
    _recipe_run(recipe / "bf16_24ep_threads2", "timm_s0", None, 25, 0.71, two)
    _recipe_run(recipe / "bf16_24ep_threads2", "cpb_s0", "cpb", 20, 0.81, two)
    _recipe_run(recipe / "bf16_24ep_threads2", "cpb_s1", "cpb", 30, 0.81, two)  # unfinished: left out
    (recipe / "bf16_24ep_threads2/cpb_s1/config.yaml").write_text("model:\n  pe: cpb\ntrain:\n  epochs: 2\n")
    _recipe_run(recipe / "bf16_24ep_torchrun2", "cpb_s0", "cpb", 15, 0.80, "cpu, 2 processes × 1 thread")
    _recipe_run(recipe / "bf16_24ep_threads2_compile", "timm_s0", None, 40, 0.71, two)  # a slower day on two cores
    _recipe_run(recipe / "bf16_24ep_threads2_compile", "cpb_s0", "cpb", 30, 0.82, two)
    rows = [line.strip("| ").split(" | ") for line in recipe_anchors(tmp_path).splitlines()[2:]]
    assert rows == [
        ["another machine", "the recipe, `learnable`", "2", "70.0", "10.0", "—", "—"],
        [one, "plain timm loop, float32", "0, 1", "71.0 ± 0.0", "50.0", "1.00", "1.43"],
        [one, "plain timm loop, bf16", "0", "70.0", "35.0", "0.70", "1.00"],
        [one, "the recipe, `cpb`", "0, 1", "81.0 ± 1.4", "35.0", "0.70", "1.00"],
        [two, "plain timm loop, float32", "0", "71.0", "25.0", "1.00", "—"],  # the loop beside each way on two cores
        [two, "the recipe, `cpb`, with 2 threads", "0", "81.0", "20.0", "0.80", "—"],
        ["cpu, 2 processes × 1 thread", "the recipe, `cpb`, as 2 torchrun processes", "0", "80.0", "15.0", "0.60",
         "—"],  # on the loop with 2 threads of its folder's anchor
        [two, "plain timm loop, float32", "0", "71.0", "40.0", "1.00", "—"],
        [two, "the recipe, `cpb`, with 2 threads and `train.compile=true`", "0", "82.0", "30.0", "0.75", "—"]]
    assert recipe_current_short(tmp_path) == (
        "`configs/cifar10.yaml` (conv stem, bf16, 24 epochs): `cpb` 81.0 ± 1.4% (2 seeds), `learnable` 70.0% (1 seed), "
        "in 0.70 / — of the plain loop's wall time, one thread each, the loop's runs made at another time on the same "
        "CPU (not side by side); alone on both cores, against each of the loop's 2 two-thread runs on the same CPU: "
        "with 2 threads, `cpb` 0.50–0.80; as 2 torchrun processes, `cpb` 0.38–0.60; with 2 threads and "
        "`train.compile=true`, `cpb` 0.75–1.20.\n")  # each loop run in turn: never only the slower one


def test_a_seed_that_ran_more_than_once_is_named_with_its_count(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.recipe_levers import seed_list
    from reports.records import read_run

    for folder, seed in (("grid", 0), ("beside", 0), ("grid", 1)):  # the loop's seed 0 ran twice, in two studies
        _recipe_run(tmp_path / folder, f"timm_s{seed}", None, 50, 0.71, "cpu")
    runs = [read_run(tmp_path / folder / f"timm_s{seed}") for folder, seed in (("grid", 0), ("beside", 0), ("grid", 1))]
    assert seed_list(runs) == "0 (2 runs), 1" and seed_list(runs[2:]) == "1"


def test_the_current_recipe_is_called_side_by_side_once_every_seed_ran_again_beside_the_loop(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.recipe_levers import recipe_beside, recipe_current_short

    recipe = tmp_path / "results/recipe"
    one = "cpu, 1 thread"
    _recipe_run(recipe / "grid", "timm_s0", None, 50, 0.71, one)  # the loop made at another time
    for pe, minutes in (("cpb", 40), ("learnable", 35)):
        for seed in range(3):
            _recipe_run(recipe / "bf16_24ep", f"{pe}_s{seed}", pe, minutes, 0.80, one)

    def pair(pe: str, seed: int, pe_minutes: float, loop_minutes: float, end: str, loop_end: str) -> None:
        folder = recipe / f"bf16_24ep_beside_{pe}"
        for name, kind, minutes, finished in ((f"timm_s{seed}", None, loop_minutes, loop_end),
                                              (f"{pe}_s{seed}", pe, pe_minutes, end)):
            if not (folder / name).exists():
                _recipe_run(folder, name, kind, minutes, 0.80, one)
            record = {"epoch": 1, "test_acc": 0.8, "elapsed_s": 60 * minutes, "machine": one, "finished_at": finished}
            (folder / name / "metrics.jsonl").write_text(json.dumps(record) + "\n")

    for seed, loop_minutes in enumerate((50, 60, 40)):  # each pair on its own day, ending 10 or 30 minutes apart
        day, later = f"2026-12-0{seed + 1}T12:", f"2026-12-0{seed + 4}T12:"
        pair("cpb", seed, 40, loop_minutes, day + "00:00+00:00", day + "10:00+00:00")
        pair("learnable", seed, 30, 60, later + "00:00+00:00", later + "30:00+00:00")
    line = recipe_current_short(tmp_path)
    assert ("in 0.82 ± 0.17 / 0.50 ± 0.00 of the plain loop's wall time, side by side (each seed beside the loop's"
            in line)  # cpb: 40 / 50, 40 / 60, 40 / 40; learnable: 30 / 60 three times
    # a pair that did not train at the same time is no pair: the line falls back to the first runs against the
    # loop's mean on their machine, every loop run included (50, 50, 60, 40, 60, 60, 60: 54.3 min)
    pair("learnable", 2, 30, 60, "2026-12-06T12:00:00+00:00", "2026-12-07T12:30:00+00:00")
    line = recipe_current_short(tmp_path)
    assert "in 0.74 / 0.64 of the plain loop's wall time, one thread each, the loop's runs made at another time" in line
    table = recipe_beside(tmp_path)
    rows = [line.strip("| ").split(" | ") for line in table.splitlines()[2:] if line.startswith("|")]
    assert [row[1:] for row in rows] == [  # each pair: the run, its first run of the seed, the loop beside it, ratio
        ["`cpb`", "0", "80.00", "80.00", "40.0", "80.00", "50.0", "0.80"],
        ["`cpb`", "1", "80.00", "80.00", "40.0", "80.00", "60.0", "0.67"],
        ["`cpb`", "2", "80.00", "80.00", "40.0", "80.00", "40.0", "1.00"],
        ["`learnable`", "0", "80.00", "80.00", "30.0", "80.00", "60.0", "0.50"],
        ["`learnable`", "1", "80.00", "80.00", "30.0", "80.00", "60.0", "0.50"]]  # seed 2 trained a day apart
    assert table.rstrip().endswith("`cpb` 0.82 ± 0.17 over 3 of 3 seeds; `learnable` 0.50 ± 0.00 over 2 of 3 seeds. "
                                   "The same test accuracy as the first run of its seed in 5 of 5 pairs.")
    (recipe / "bf16_24ep/cpb_s1/metrics.jsonl").write_text(
        '{"epoch": 1, "test_acc": 0.7999, "elapsed_s": 2400}\n')  # 79.99: a first run the pair did not repeat
    assert "in 4 of 5 pairs." in recipe_beside(tmp_path)
    shutil.rmtree(recipe / "bf16_24ep_beside_cpb")
    shutil.rmtree(recipe / "bf16_24ep_beside_learnable")
    assert recipe_beside(tmp_path).rstrip().endswith("No pair made yet.")


def test_spearman_ranks_orders_over_the_shared_keys():
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.ranks import spearman

    a = {"p": 4.0, "q": 3.0, "r": 2.0, "s": 1.0}
    assert spearman(a, dict(a)) == pytest.approx(1) and spearman(a, {k: -v for k, v in a.items()}) == pytest.approx(-1)
    swapped = {"p": 1.0, "q": 3.0, "r": 2.0, "s": 0.0, "extra": 9.0}  # q, p swapped; extra is not shared
    assert spearman(a, swapped) == pytest.approx(1 - 6 * 2 / 20)
    # q and r tie (as a table's rounded numbers can): they share rank 2.5, and the ranks' Pearson correlation is
    # 4.5 / sqrt(5 * 4.5), not the 1 that ordering the tie by position would give
    assert spearman(a, {"p": 4.0, "q": 3.0, "r": 3.0, "s": 1.0}) == pytest.approx(4.5 / (5 * 4.5) ** 0.5)


def test_transfer_run_names_give_their_remedy_and_seed():
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.transfer import transfer_remedy

    assert transfer_remedy("rope_mixed_s2", "rope_mixed") == ("trained", "as trained", 2)
    assert transfer_remedy("rope_dinov3_shift_jitter_s1", "rope_dinov3") == \
        ("augmented", "trained with `shift_jitter`", 1)
    assert transfer_remedy("sincos_s0_32_extrapolate", "sincos") == \
        ("finetuned", "fine-tuned at 32 px, extrapolated", 0)
    assert transfer_remedy("lookhere_s1@large_grid_slope=0.6", "lookhere") == \
        ("trained", "as trained, tested with `large_grid_slope=0.6`", 1)  # eval.py --pe-option
    with pytest.raises(ValueError, match="not a scripts/transfer.sh run name"):
        transfer_remedy("sincos_final", "sincos")


def test_transfer_goal_needs_three_seeds_and_names_the_largest_gains_until_then():
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.transfer import transfer_goal

    def group(at_16: list[float], at_32: dict[str, list[float]]) -> dict:
        cells = {("interpolate", 16): dict(enumerate(at_16))}
        cells.update({(mode, 32): dict(enumerate(values)) for mode, values in at_32.items()})
        return cells

    accuracy = {
        ("rope_mixed", 1, "trained with `crop`"): group([50, 52], {"interpolate": [54, 55], "yarn": [56, 57]}),
        ("sincos", 0, "as trained"): group([50, 50, 50], {"interpolate": [51, 52, 53]}),
        ("sincos", 2, "fine-tuned at 24 px, interpolated"): group([50, 50, 50], {"interpolate": [60, 60, 60]}),
    }
    line = transfer_goal(accuracy)  # the fine-tune gains most but does not count; two seeds are not enough
    assert "Not met" in line and "fine-tuned" not in line
    assert line.index("`rope_mixed` trained with `crop`, yarn: +5.5 (2 seeds; 56.5% at 32 px)") < line.index("`sincos`")
    assert "`sincos` as trained, interpolate: +2.0 (3 seeds; 52.0% at 32 px)" in line
    accuracy[("rope_mixed", 1, "trained with `crop`")] = group([50, 52, 51], {"yarn": [56, 57, 53]})
    assert transfer_goal(accuracy).endswith(
        "Met by `rope_mixed` trained with `crop`, yarn: +4.3 (3 seeds; 55.3% at 32 px).")


def _transfer_study(base: Path, pe: str, runs: tuple[tuple[str, float, str], ...]) -> list[dict]:
    """scripts/transfer.sh's records under ``base`` of ``runs`` (name, minutes, machine) of ``pe``, each trained at
    16 px (50%) and tested at 32 px (54%); the sweep's records are returned."""
    records = []
    for run, minutes, machine in runs:
        _recipe_run(base / "trained", run, pe, minutes, 0.5, machine)
        records += [{"run": run, "pe": pe, "resolution": px, "pe_resize": "interpolate", "accuracy": acc}
                    for px, acc in ((16, 0.5), (32, 0.54))]
    _write_sweep(base, records)
    return records


def _write_sweep(base: Path, records: list[dict]) -> None:
    (base / "resolution").mkdir(exist_ok=True)
    (base / "resolution/resolution.json").write_text(json.dumps(records))


def test_transfer_training_minutes_are_given_per_machine_when_runs_ran_on_several(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.transfer import transfer_remedies

    base = tmp_path / "results/transfer"
    records = _transfer_study(base, "sincos", (("sincos_s0", 8, "slow"), ("sincos_s1", 6, "fast"),
                                               ("sincos_s2", 7, "slow")))
    table = transfer_remedies(tmp_path)
    row = next(line for line in table.splitlines() if line.startswith("| `sincos`"))
    # each machine's mean, never one mean across machines (unnamed CPUs: after the named A-D)
    assert row.endswith("| 6.0 (E) / 7.5 (F) |")
    assert "Training minutes by machine: E: fast; F: slow." in table
    shutil.rmtree(base / "trained/sincos_s1")  # one machine: no letters
    _write_sweep(base, [r for r in records if r["run"] != "sincos_s1"])
    table = transfer_remedies(tmp_path)
    assert "| 7.5 |" in table and "by machine" not in table


def test_transfer_training_minutes_say_the_threads_where_one_cpu_ran_runs_at_several_counts(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.transfer import transfer_remedies

    base = tmp_path / "results/transfer"
    records = _transfer_study(base, "cpb", (("cpb_s0", 8, "cpu X, 1 thread"), ("cpb_s1", 5, "cpu X, 2 threads"),
                                            ("cpb_s2", 10, "cpu X, 1 thread")))
    table = transfer_remedies(tmp_path)
    row = next(line for line in table.splitlines() if line.startswith("| `cpb`"))
    # one letter for the CPU, told apart by the threads: a 2-thread run is never averaged with 1-thread ones
    assert row.endswith("| 9.0 (E, 1 thread) / 5.0 (E, 2 threads) |")
    assert "Training minutes by machine: E: cpu X." in table
    for run in ("cpb_s0", "cpb_s2"):  # every run on one CPU with one count: the count said once, under the table
        shutil.rmtree(base / "trained" / run)
    _recipe_run(base / "trained", "cpb_s0", "cpb", 8, 0.5, "cpu Y, 2 threads")
    _write_sweep(base, [r for r in records if r["run"] != "cpb_s2"])
    table = transfer_remedies(tmp_path)
    assert "| 5.0 (E) / 8.0 (F) |" in table
    assert "Training minutes by machine: E: cpu X; F: cpu Y; every run 2 threads." in table


def test_the_imagenette_tables_read_the_runs_and_the_sweep(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.imagenette import imagenette_recipe, imagenette_resolution

    assert "No run of `configs/imagenette.yaml` has finished yet" in imagenette_recipe(tmp_path)
    trained = tmp_path / "results/imagenette/trained"
    for name, pe, acc, threads in [("cpb_s0", "cpb", 0.861, "2 threads"), ("cpb_s1", "cpb", 0.871, "1 thread"),
                                   ("none_s0", "none", 0.80, "1 thread"), ("sincos_s0", "sincos", 0.82, "1 thread")]:
        folder = trained / name
        folder.mkdir(parents=True)
        (folder / "config.yaml").write_text(f"model:\n  pe: {pe}\ntrain:\n  epochs: 2\n")
        records = [{"epoch": e, "test_acc": acc - 0.1 * (2 - e), "elapsed_s": 600.0 * e, "img_per_s": 100.0 * e,
                    "machine": f"AMD EPYC (L2 1024K, L3 32768K), {threads}"} for e in (1, 2)]
        if name == "sincos_s0":
            records = records[:1]  # still training: left out
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    table = imagenette_recipe(tmp_path)
    assert "| `cpb` | 86.10 / 87.10 / … | 86.6 ± 0.7 | 2 | 20 / 20 | 150 / 150 | B (2) / B (1) |" in table
    mixed = trained / "cpb_s1" / "metrics.jsonl"  # one run at two thread counts: one machine, both counts said
    mixed.write_text(mixed.read_text().replace("1 thread", "2 threads", 1))
    assert "| B (2) / B (1, 2) |" in imagenette_recipe(tmp_path) and "C:" not in imagenette_recipe(tmp_path)
    assert table.index("`cpb`") < table.index("`none`") and "`sincos`" not in table
    assert table.endswith("Machines: B: AMD EPYC (L2 1024K, L3 32768K).\n")
    sweep_file = tmp_path / "results/imagenette/resolution/resolution.json"
    sweep_file.parent.mkdir(parents=True)
    records = [{"run": run, "pe": "cpb", "resolution": size, "train_resolution": 64, "pe_resize": mode,
                "accuracy": acc + (0.02 if size == 96 else 0.0), "group": "g"}
               for run, acc in (("cpb_s0", 0.86), ("cpb_s1", 0.87)) for size in (64, 96)
               for mode in ("interpolate", "extrapolate")]
    records.append({**records[0], "run": "cpb_s0_128_interpolate", "accuracy": 0.5})  # a fine-tune: its own table
    records.append({**records[0], "pe_resize": "ntk", "accuracy": None, "reason": "cpb has no frequencies"})
    sweep_file.write_text(json.dumps(records))
    table = imagenette_resolution(tmp_path)
    assert "Seeds per row: `cpb` 2." in table and "86.5 ± 0.7" in table and "88.5 ± 0.7" in table
    assert "+2.0" in table and "50.0" not in table and "ntk" not in table
    from reports.imagenette import imagenette_short

    assert imagenette_short(tmp_path) == ("Imagenette (`configs/imagenette.yaml`, trained at 64 px, positions "
                                          "interpolated): `cpb` 86.5 ± 0.7% at 64 px, 88.5 ± 0.7% at 96 px, "
                                          "88.5 ± 0.7% at 96 px (2 seeds).\n")


def test_the_imagenette_grid_ranks_the_pes_by_their_gain_above_the_training_size(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.imagenette import grid_ranking

    assert "No sweep of the grid" in grid_ranking(tmp_path)
    # accuracy (%) by run, mode and size: sincos gains most at 112 px; a learned table cannot extrapolate
    curves = {("sincos_s0", "interpolate"): {64: 70, 80: 71, 96: 72, 112: 75, 128: 73, 160: 69},
              ("sincos_s1", "interpolate"): {64: 72, 80: 74, 96: 75, 112: 76, 128: 74, 160: 70},
              ("sincos_s0", "extrapolate"): {64: 70, 80: 65, 96: 60, 112: 50, 128: 40, 160: 30},
              ("sincos_s1", "extrapolate"): {64: 72, 80: 65, 96: 60, 112: 50, 128: 40, 160: 32},
              ("learnable_s0", "interpolate"): {64: 74, 80: 73, 96: 75, 112: 74, 128: 72, 160: 66},
              ("learnable_s0", "extrapolate"): {64: 74, 80: None, 96: None, 112: None, 128: None, 160: None}}
    records = [{"run": run, "pe": run.split("_s")[0], "resolution": size, "train_resolution": 64, "pe_resize": mode,
                "accuracy": None if acc is None else acc / 100, "group": run.split("_s")[0]}
               for (run, mode), sizes in curves.items() for size, acc in sizes.items()]
    sweep_file = tmp_path / "results/imagenette/grid/resolution/resolution.json"
    sweep_file.parent.mkdir(parents=True)
    sweep_file.write_text(json.dumps(records))
    table = grid_ranking(tmp_path)
    assert table.index("`sincos`") < table.index("`learnable`")  # +4.5 before +1.0
    assert ("| `sincos` | 2 | 71.0 ± 1.4 | +1.5 ± 0.7 | +4.5 ± 0.7 | 112 / 112 | +2.5 ± 0.7 | -1.5 ± 0.7 "
            "| -38.5 ± 0.7 |") in table
    assert "| `learnable` | 1 | 74.0 | -1.0 | +1.0 | 96 | -2.0 | -8.0 | n/a (cannot extrapolate) |" in table


def test_the_imagenette_remedies_compare_each_run_at_twice_its_size_with_itself_at_64_px(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.imagenette import grid_remedies

    base = tmp_path / "results/imagenette/grid"
    # (stage folder, run, accuracy % at 64 and at 128 px interpolated, at 128 px extrapolated, minutes)
    runs = [("trained", "cpb_s0", 76, 71, 70, 40), ("trained", "cpb_s1", 78, 73, 73, 44),
            ("trained", "none_s0", 74, 69, 69, 40),  # no remedy: the ranking's row only
            ("finetuned", "cpb_s0_128_interpolate", 70, 80, 79, 7),
            ("finetuned", "cpb_s1_128_interpolate", 72, 81, 80, 9),
            ("augmented", "cpb_rescale2_s0", 75, 72, 72, 41)]
    records = []

    def commit(*committed: tuple) -> None:  # the runs' records and the sweep with their accuracies
        for stage, run, at_64, at_128, extrapolated, minutes in committed:
            pe = run.split("_")[0]
            _recipe_run(base / stage, run, pe, minutes, at_64 / 100, "B")
            records.extend({"run": run, "pe": pe, "resolution": px, "pe_resize": mode, "accuracy": acc / 100}
                           for px, mode, acc in ((64, "interpolate", at_64), (128, "interpolate", at_128),
                                                 (128, "extrapolate", extrapolated)))
        (base / "resolution").mkdir(parents=True, exist_ok=True)
        (base / "resolution/resolution.json").write_text(json.dumps(records))

    commit(*runs[:3])
    assert "No fine-tuned or augmented run of the grid" in grid_remedies(tmp_path)  # the ranking holds these
    commit(*runs[3:])
    table = grid_remedies(tmp_path).splitlines()
    assert table[0].startswith("| PE | remedy | seeds | 64 px (%) | 128 px, interpolate (− 64 px) |")
    # each run against its own 64 px, then mean ± std over seeds; the fine-tune's own 64 px, not the trained run's
    assert ("| `cpb` | as trained | 2 | 77.0 ± 1.4 | 72.0 (−5.0 ± 0.0) | 71.5 (−5.5 ± 0.7) | n/a | n/a "
            "| 42.0 |") in table
    assert "| `cpb` | trained with `rescale2` | 1 | 75.0 | 72.0 (−3.0) | 72.0 (−3.0) | n/a | n/a | 41.0 |" in table
    assert ("| `cpb` | fine-tuned at 128 px, interpolated | 2 | 71.0 ± 1.4 | 80.5 (+9.5 ± 0.7) | 79.5 (+8.5 ± 0.7) "
            "| n/a | n/a | 8.0 |") in table
    assert len(table) == 2 + 3 and not any("`none`" in row for row in table)


def test_a_ratio_is_side_by_side_only_for_runs_that_trained_at_the_same_time_on_the_same_machine():
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.records import Run, side_by_side

    def run(end: str, minutes: float, machine: str = "B, 1 thread", timed: bool = True) -> Run:
        record = {"epoch": 1, "test_acc": 0.5, "elapsed_s": 60 * minutes, "machine": machine}
        return Run("r", {}, [{**record, "finished_at": end} if timed else record])

    loop = run("2026-12-04T12:00:00+00:00", 40)  # 11:20 -> 12:00
    assert side_by_side([run("2026-12-04T12:05:00+00:00", 40)], [loop])  # 11:25 -> 12:05: beside it
    assert not side_by_side([run("2026-12-04T18:00:00+00:00", 40)], [loop])  # six hours later
    assert not side_by_side([run("2026-12-04T12:05:00+00:00", 40, "C, 1 thread")], [loop])  # another machine
    assert not side_by_side([run("2026-12-04T12:05:00+00:00", 40, timed=False)], [loop])  # a record without time
    assert not side_by_side([], [loop])


@pytest.mark.slow
def test_a_hand_edited_number_inside_a_sentence_fails_the_check_and_is_rewritten(tmp_path):
    root = copy_of_the_pages(tmp_path)
    page = root / "README.md"
    text = page.read_text()
    assert "<!-- value: speed-verdicts -->on the CPU, eager: " in text
    page.write_text(text.replace("<!-- value: speed-verdicts -->on the CPU, eager: 4",
                                 "<!-- value: speed-verdicts -->on the CPU, eager: 9", 1))
    done = run("--check", "--root", str(root))
    assert done.returncode == 1 and "README.md" in done.stderr
    assert run("--root", str(root)).returncode == 0 and page.read_text() == text


def test_numbers_in_sentences_come_from_a_sweep_by_pattern_mode_and_size(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.record_values import sweep_change, sweep_change_from, sweep_gap, sweep_mean, sweep_seeds, sweep_spread

    records = [{"run": f"{pe}_s{seed}", "pe": pe, "resolution": px, "pe_resize": "interpolate", "accuracy": acc}
               for pe, seed, px, acc in [("a", 0, 16, 0.50), ("a", 1, 16, 0.52), ("a", 0, 32, 0.55), ("a", 1, 32, 0.53),
                                         ("b", 0, 16, 0.40), ("b", 0, 32, None), ("a", 1, 16, 0.61),
                                         ("a", 0, 16, 0.60)]]
    for record in records[-2:]:  # a's fine-tunes: each starts from the run of its seed
        record["run"] += "_32_interpolate"
    (tmp_path / "results/study").mkdir(parents=True)
    (tmp_path / "results/study/resolution.json").write_text(json.dumps(records))
    assert sweep_mean(tmp_path, "study", "a_s?", "interpolate", "32") == "54.0"
    assert sweep_spread(tmp_path, "study", "a_s?", "interpolate", "16") == "51.0 ± 1.4"
    assert sweep_change(tmp_path, "study", "a_s?", "interpolate", "32", "interpolate", "16") == "+3.0 ± 2.8"  # paired
    assert sweep_gap(tmp_path, "study", "a_s?", "interpolate", "16", "b_s0", "interpolate", "16") == "11.0"
    # the seeds a sentence's numbers stand on, patterns with the same seeds named together, in the order given
    assert sweep_seeds(tmp_path, "study", "a_s?", "b_s?") == "`a` seeds 0 and 1, `b` seed 0"
    assert sweep_seeds(tmp_path, "study", "b_s?", "a_s0", "a_s?") == "`b` and `a` seed 0, `a` seeds 0 and 1"
    assert sweep_seeds(tmp_path, "study", "a_s1_32_*") == "`a_s1_32_*` seed 1"  # a fine-tune: its trained run's seed
    with pytest.raises(ValueError, match="no run of results/study matches 'c_s\\?'"):
        sweep_seeds(tmp_path, "study", "c_s?")
    # paired by seed, not by order: s0 60 - 55 and s1 61 - 53
    assert sweep_change_from(tmp_path, "study", "a_s?_32_*", "interpolate", "16", "a_s?", "interpolate", "32") == \
        "+6.5 ± 2.1"
    with pytest.raises(ValueError, match="seeds \\[1\\] have no run matching 'b_s\\?'"):
        sweep_change_from(tmp_path, "study", "a_s1_32_*", "interpolate", "16", "b_s?", "interpolate", "16")
    # a folder of scripts/transfer.sh narrows a pattern: an augmented run a_rrc_s2 matches *_s? but is not trained/
    records.append({"run": "a_rrc_s2", "pe": "a", "resolution": 16, "pe_resize": "interpolate", "accuracy": 0.9})
    (tmp_path / "results/study/resolution.json").write_text(json.dumps(records))
    assert sweep_mean(tmp_path, "study", "*_s?", "interpolate", "16") == "58.0"  # 50, 52, 40, 90 over 4
    assert sweep_mean(tmp_path, "study", "trained/*_s?", "interpolate", "16") == "47.3"
    assert sweep_mean(tmp_path, "study", "augmented/*", "interpolate", "16") == "90.0"
    assert sweep_mean(tmp_path, "study", "finetuned/a_*", "interpolate", "16") == "60.5"
    with pytest.raises(ValueError, match="'tuned' is not a folder of scripts/transfer.sh"):
        sweep_mean(tmp_path, "study", "tuned/*_s?", "interpolate", "16")
    with pytest.raises(ValueError, match="no run of results/study matches 'c_s\\?' at 16 px, interpolate"):
        sweep_mean(tmp_path, "study", "c_s?", "interpolate", "16")
    with pytest.raises(ValueError, match="b_s0 could not be evaluated at 32 px"):
        sweep_mean(tmp_path, "study", "b_s?", "interpolate", "32")


def test_runs_tested_with_pe_options_group_over_their_seeds():
    from vitpe.resolution.report import SEED_SUFFIX

    names = ["lookhere_s0", "lookhere_s1", "lookhere_s0@large_grid_slope=0.6", "lookhere_s2@large_grid_slope=0.6",
             "learnable-s1", "sincos_final"]
    assert [SEED_SUFFIX.sub("", n) for n in names] == ["lookhere", "lookhere", "lookhere@large_grid_slope=0.6",
                                                       "lookhere@large_grid_slope=0.6", "learnable", "sincos_final"]


@pytest.mark.slow
def test_markers_of_a_page_that_is_not_there_is_one_line_naming_it():
    done = run("--markers", "../README.md")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == f"error: --markers ../README.md: no such page under {ROOT} (give it relative to " \
                                  "the repository, e.g. RESULTS.md)"
    shown = run("--markers", "README.md")
    assert shown.returncode == 0 and shown.stdout.startswith("('table:recipe-pes-short',")


def _imagewoof_run(root: Path, loader: str, seed: int, acc: float, epochs: int = 30) -> None:
    folder = root / "results/imagewoof" / loader / f"cpb_s{seed}"
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("model: {pe: cpb}\ntrain: {epochs: 30}\n")
    (folder / "metrics.jsonl").write_text("".join(json.dumps({"epoch": e + 1, "test_acc": acc / 100, "elapsed_s": 60})
                                                  + "\n" for e in range(epochs)))


def test_the_imagewoof_answer_waits_for_every_seed_then_sets_the_gap_against_the_spread(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.imagewoof import imagewoof_stream, imagewoof_verdict

    for seed, (memory, stream) in enumerate([(60.0, 61.0), (62.0, 61.5), (61.0, 62.5)]):
        _imagewoof_run(tmp_path, "memory", seed, memory)
        _imagewoof_run(tmp_path, "stream", seed, stream, epochs=30 if seed < 2 else 12)  # seed 2 still training
    assert imagewoof_verdict(tmp_path) == "not answered yet: 1 of 6 runs are still training"
    assert "| 61.00 / 61.50 / … |" in imagewoof_stream(tmp_path)
    shutil.rmtree(tmp_path / "results/imagewoof/stream/cpb_s2")
    _imagewoof_run(tmp_path, "stream", 2, 62.5)
    assert imagewoof_verdict(tmp_path) == ("streamed 61.7 ± 0.8% against 61.0 ± 1.0% in memory: a gap of +0.7 points, "
                                           "within the seeds' spread: the stream loader reaches the in-memory "
                                           "accuracy (the spread: the larger standard deviation, 1.0)")
    for seed, stream in enumerate([66.0, 67.0, 66.5]):
        shutil.rmtree(tmp_path / f"results/imagewoof/stream/cpb_s{seed}")
        _imagewoof_run(tmp_path, "stream", seed, stream)
    assert "a gap of +5.5 points, above the seeds' spread: the stream loader reaches" in imagewoof_verdict(tmp_path)
    for seed, stream in enumerate([56.0, 57.0, 56.5]):
        shutil.rmtree(tmp_path / f"results/imagewoof/stream/cpb_s{seed}")
        _imagewoof_run(tmp_path, "stream", seed, stream)
    below = "a gap of −4.5 points, below the seeds' spread: the stream loader does not reach"
    assert below in imagewoof_verdict(tmp_path)


def test_the_native_aspect_study_tabulates_each_training_and_its_sweep_at_native_aspect(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from reports.imagewoof_native import native_runs, native_transfer

    study = tmp_path / "results/imagewoof_native"
    assert "… / … / …" in native_runs(tmp_path) and "No sweep committed yet" in native_transfer(tmp_path)
    for name, acc, epochs in (("square_cpb_s0", 50.0, 30), ("square_cpb_s1", 52.0, 30), ("native_cpb_s0", 55.0, 35),
                              ("native_cpb_s1", 57.0, 20), ("naflex_learned_s0", 53.0, 35)):
        folder = study / name
        folder.mkdir(parents=True)
        if name.startswith("naflex"):
            (folder / "config.json").write_text(json.dumps({"epochs": 35, "pos_embed": "learned"}))
        else:
            epochs_planned = 30 if "square" in name else 35
            (folder / "config.yaml").write_text(f"model: {{pe: cpb}}\ntrain: {{epochs: {epochs_planned}}}\n")
        (folder / "metrics.jsonl").write_text("".join(json.dumps({"epoch": e + 1, "test_acc": acc / 100,
                                                                  "elapsed_s": 60}) + "\n" for e in range(epochs)))
    table = native_runs(tmp_path)
    assert "| `cpb` | centred squares, 40 → 64 px | 50.00 / 52.00 / … | 51.0 ± 1.4 |" in table
    assert "| `cpb` | native aspect, 16–144 patches | 55.00 / … / … | 55.0 |" in table  # seed 1 still training
    assert "| `learned` | timm NaFlexViT, its own loader | 53.00 / … / … | 53.0 |" in table
    (study / "resolution").mkdir()
    records = [{"run": f"{kind}_cpb_s{seed}", "pe": "cpb", "resolution": size, "pe_resize": mode, "aspect": "native",
                "accuracy": acc / 100} for kind, seed, acc in (("square", 0, 40.0), ("square", 1, 42.0),
                                                               ("native", 0, 50.0))
               for size in (64, 320) for mode in ("interpolate", "extrapolate")]
    records.append({**records[0], "pe_resize": "ntk", "accuracy": None, "reason": "cpb has no frequencies"})
    (study / "resolution/resolution.json").write_text(json.dumps(records))
    (study / "naflex_learned_s0/resolution.json").write_text(json.dumps(
        [{"run": "naflex_learned_s0", "pe": "naflex_learned", "resolution": 64, "pe_resize": "timm",
          "aspect": "native", "accuracy": 0.5}]))
    sweep_table = native_transfer(tmp_path)
    assert "| `cpb` | centred squares, 40 → 64 px | extrapolate | 41.0 ± 1.4 | 41.0 ± 1.4 |" in sweep_table
    assert "| `cpb` | native aspect, 16–144 patches | interpolate | 50.0 | 50.0 |" in sweep_table
    assert "| `learned` | timm NaFlexViT, its own loader | timm | 50.0 | n/a |" in sweep_table
    assert "ntk" not in sweep_table  # no accuracy in that mode: no row

    from reports.figures import MAX_LINES, Line, Panel, stale_or_write
    from reports.imagewoof_native import native_figure

    panels = native_figure(tmp_path)
    assert [p.title for p in panels] == ["centred squares, interpolated", "centred squares, extrapolated",
                                         "native aspect, interpolated", "native aspect, extrapolated"]
    square = panels[1].lines[0]
    assert (square.label, square.x, square.mean, square.seeds) == ("cpb", [64.0, 320.0], [41.0, 41.0], 2)
    assert square.std[0] == pytest.approx(1.414, abs=1e-3) and panels[0].trained == (40.0, 64.0)
    assert [line.label for line in panels[2].lines] == ["cpb", "NaFlexViT learned"]
    assert stale_or_write("woof", panels, tmp_path, check=True) == "woof: its numbers differ from the records"
    assert not (tmp_path / "results/figures/woof.png").exists()  # a check writes nothing
    assert stale_or_write("woof", panels, tmp_path, check=False) is not None
    assert (tmp_path / "results/figures/woof.png").stat().st_size > 5000
    assert stale_or_write("woof", panels, tmp_path, check=True) is None  # drawn: up to date
    records[0]["accuracy"] = 0.30  # a record changes: the figure's numbers are stale
    (study / "resolution/resolution.json").write_text(json.dumps(records))
    assert stale_or_write("woof", native_figure(tmp_path), tmp_path, check=True) is not None
    assert stale_or_write("woof", None, tmp_path, check=True) == "woof: a figure without records"
    crowded = Panel("crowded", "x", "y", [Line(str(i), [1.0], [1.0], [0.0], 1) for i in range(MAX_LINES + 1)])
    with pytest.raises(ValueError, match="split it"):
        stale_or_write("crowded", [crowded], tmp_path, check=False)
