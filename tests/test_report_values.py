"""The numbers inside the pages' sentences: each value reads what it names -- a generated table's cell, a run folder's
metrics, a model the code builds -- and a sentence edited by hand fails the check (scripts/report.py)."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import reports  # noqa: E402  (scripts/ is not a package)
from reports import run_values, table_cells  # noqa: E402

TABLE = """| PE | mode | 16 | 32 | kernels |
|---|---|---|---|---|
| `cpb` | interpolate | 53.0 ± 0.6 | 1: 48.1 | +65 |
| `cpb` | extrapolate | 52.0 ± 0.5 | 2: 47.0 | +65 |
| `rope_axial` | interpolate | **-14.5 ± 2.2** | 3 of 5: 88.5 | +6 |
| + the loop's crop | extrapolate | -21.8 | 1,234.5 | +0 |

A second table under the first is not read:

| PE | mode | 16 | 32 | kernels |
|---|---|---|---|---|
| `sincos` | interpolate | 1 | 2 | 3 |
"""


@pytest.fixture
def cells(monkeypatch, tmp_path):
    monkeypatch.setitem(reports.TABLES, "fake", lambda root: TABLE)
    table_cells.table_rows.cache_clear()
    yield tmp_path
    table_cells.table_rows.cache_clear()


def test_a_cell_is_found_by_its_row_and_column(cells):
    assert table_cells.cell(cells, "fake", "cpb&extrapolate", "16") == "52.0 ± 0.5"  # backticks gone
    assert table_cells.cell(cells, "fake", "rope_axial", "#3") == "-14.5 ± 2.2"  # the N-th column, bold gone
    assert table_cells.cell(cells, "fake", "*the+loop's*", "kernels") == "+0"  # a pattern; + for a space
    assert table_cells.cell_number(cells, "fake", "rope_axial", "32") == "88.5"  # after the rank
    assert table_cells.cell_number(cells, "fake", "*crop", "32") == "1,234.5"


def test_a_row_or_column_that_is_not_there_or_not_one_is_named_in_the_error(cells):
    with pytest.raises(ValueError, match="has 2 rows named 'cpb'; its rows: cpb, rope_axial"):
        table_cells.cell(cells, "fake", "cpb", "16")
    with pytest.raises(ValueError, match="no row named 'sincos'"):  # it is in the second table only
        table_cells.cell(cells, "fake", "sincos", "16")
    with pytest.raises(ValueError, match="no column '64'"):
        table_cells.cell(cells, "fake", "rope_axial", "64")
    with pytest.raises(ValueError, match="no table named 'other'"):
        table_cells.cell(cells, "other", "cpb", "16")


def test_ranges_and_gaps_over_rows_read_each_cells_first_number(cells):
    assert table_cells.cell_range(cells, "fake", "16", "cpb&interpolate", "cpb&extrapolate") == "52.0–53.0"
    assert table_cells.cell_range(cells, "fake", "kernels", "cpb&interpolate", "cpb&extrapolate") == "+65"
    assert table_cells.cell_range_unsigned(cells, "fake", "16", "rope_axial", "*crop") == "14.5–21.8"
    assert table_cells.row_range(cells, "fake", "rope_axial", "16", "32", "kernels") == "-14.5–88.5"
    with pytest.raises(ValueError, match="mix signs"):
        table_cells.cell_range_unsigned(cells, "fake", "16", "rope_axial", "cpb&interpolate")
    assert table_cells.cell_gap(cells, "fake", "16", "cpb&interpolate", "rope_axial") == "67.5"
    assert table_cells.cell_gap(cells, "fake", "32", "cpb&interpolate", "rope_axial") == "40.4"  # ranks skipped
    with pytest.raises(ValueError, match="two or more rows"):
        table_cells.cell_range(cells, "fake", "16", "rope_axial")


def write_run(root: Path, name: str, epochs: list[tuple[int, float, float]], flat: bool = False) -> None:
    """A run folder (or a flat record) whose epochs are (img_size, elapsed_s, test_acc)."""
    lines = [json.dumps({"epoch": i + 1, "step": 100 * (i + 1), "img_size": size, "elapsed_s": elapsed,
                         "test_acc": acc, "img_per_s": 1000.0 + 100 * i})
             for i, (size, elapsed, acc) in enumerate(epochs)]
    path = root / "results" / (f"{name}.jsonl" if flat else f"{name}/metrics.jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def test_ranked_lists_every_row_in_the_order_of_one_column(cells):
    assert table_cells.ranked(cells, "fake", "16") == \
        "`cpb` 53.0, `cpb` 52.0, `rope_axial` -14.5, `+ the loop's crop` -21.8"
    ascending = table_cells.ranked(cells, "fake", "kernels", "ascending")
    assert ascending.startswith("`+ the loop's crop` +0, `rope_axial` +6")
    with pytest.raises(ValueError, match="no column '64'"):
        table_cells.ranked(cells, "fake", "64")
    with pytest.raises(ValueError, match="optionally 'ascending'"):
        table_cells.ranked(cells, "fake", "16", "down")
    assert table_cells.column_range(cells, "fake", "16") == "-21.8–53.0"  # every row, however many
    assert table_cells.column_range(cells, "fake", "kernels", "unsigned") == "0–65"


OTHER = """| PE | acc. |
|---|---|
| `rope_axial` | 70.0 |
| `+ the loop's crop` | 80.0 |
| `none` | 60.0 |
| `peg` | 99.0 |
"""


def test_rank_correlation_orders_the_rows_two_tables_share(cells, monkeypatch):
    monkeypatch.setitem(reports.TABLES, "other", lambda root: OTHER)
    monkeypatch.setitem(reports.TABLES, "same", lambda root: OTHER.replace("99.0", "50.0"))
    # shared: rope_axial and the crop row, with none and peg of "other" and "same": peg/none are not in "fake"
    with pytest.raises(ValueError, match="three or more shared names, not 2"):
        table_cells.rank_correlation(cells, "fake", "32", "other", "acc.")
    # peg first there, last here: 1 - 6 * (9 + 1 + 1 + 1) / 60
    assert table_cells.rank_correlation(cells, "other", "acc.", "same", "acc.") == "-0.20"
    assert table_cells.rank_correlation(cells, "same", "acc.", "same", "acc.") == "1.00"
    with pytest.raises(ValueError, match="cpb names several rows"):
        table_cells.rank_correlation(cells, "fake", "16", "fake", "32")


def test_run_values_read_the_last_epoch_of_each_named_run(tmp_path):
    write_run(tmp_path, "study/a_s0", [(16, 60.0, 0.5), (32, 180.0, 0.7123)])
    write_run(tmp_path, "study/a_s1", [(16, 90.0, 0.5), (32, 300.0, 0.7456)])
    write_run(tmp_path, "study/loop_s0", [(32, 100.0, 0.6), (32, 200.0, 0.69)])
    write_run(tmp_path, "flat/metrics_a_s0", [(32, 60.0, 0.5)], flat=True)
    assert run_values.run_minutes(tmp_path, "study/a_s0") == "3.0"
    assert run_values.run_minutes(tmp_path, "study/a_s?") == "3.0–5.0"
    assert run_values.run_minutes_total(tmp_path, "study/a_s?") == "8"
    assert run_values.run_accuracy(tmp_path, "study/a_s?") == "71.23–74.56"
    assert run_values.run_time_ratio(tmp_path, "study/a_s?", "vs", "study/loop_s0") == "1.20"  # 240 s over 200
    assert run_values.run_steps(tmp_path, "study/a_s0", "flat/metrics_a_s0.jsonl") == "100–200"
    write_run(tmp_path, "study/three", [(32, 10.0, 0.1), (32, 20.0, 0.1), (32, 30.0, 0.1)])
    assert run_values.run_throughput(tmp_path, "study/three") == "1,100"  # the median epoch's 1,000 / 1,100 / 1,200
    with pytest.raises(ValueError, match="results/study/b_s0 holds no metrics.jsonl"):
        run_values.run_minutes(tmp_path, "study/b_s0")
    with pytest.raises(ValueError, match="then vs"):
        run_values.run_time_ratio(tmp_path, "study/a_s0", "study/loop_s0")


def test_epoch_times_compare_size_by_size_leaving_out_a_sizes_first_epoch(tmp_path):
    # epochs of 60 s at 16 px and 120, 100, 100 s at 32 px: the first at 32 px (120 s, a compilation) is left out
    write_run(tmp_path, "s/two", [(16, 60.0, 0.1), (32, 180.0, 0.2), (32, 280.0, 0.3), (32, 380.0, 0.4)])
    write_run(tmp_path, "s/one", [(16, 100.0, 0.1), (32, 300.0, 0.2), (32, 500.0, 0.3)])
    assert run_values.epoch_time_ratio(tmp_path, "s/two", "vs", "s/one") == "0.50–0.60"  # 100/200 at 32, 60/100 at 16
    assert run_values.epoch_time(tmp_path, "first", "s/two", "s/one") == "60–100"
    assert run_values.epoch_time(tmp_path, "fastest", "s/two") == "60"
    assert run_values.epoch_time(tmp_path, "mean", "s/two") == "95"
    with pytest.raises(ValueError, match="first, fastest or mean"):
        run_values.epoch_time(tmp_path, "slowest", "s/two")
    write_run(tmp_path, "s/other", [(48, 10.0, 0.1)])
    with pytest.raises(ValueError, match="share no training size"):
        run_values.epoch_time_ratio(tmp_path, "s/other", "vs", "s/one")


def test_a_models_flops_are_those_of_its_layers():
    from reports.model_values import model_mflops, model_params

    # configs/cifar10_17ep.yaml: dim 128, depth 6, MLP 256, 64 tokens of 4x4x3 pixels at 32 px. Forward: the
    # blocks' linear layers (qkv, projection, MLP), the attention's two products and the patch embedding, two
    # FLOPs per multiply-add; a training step is about three forwards (the backward computes two products per one)
    tokens, dim, hidden, depth = 64, 128, 256, 6
    forward = 2 * (depth * tokens * (4 * dim * dim + 2 * dim * hidden) + depth * 2 * tokens * tokens * dim
                   + tokens * 48 * dim)
    measured = float(model_mflops(ROOT, "configs/cifar10_17ep.yaml")) * 1e6
    assert 0.85 < measured / (3 * forward) < 1.05
    assert int(model_params(ROOT, "configs/cifar10_17ep.yaml", "model.depth=5")[:-1]) < \
        int(model_params(ROOT, "configs/cifar10_17ep.yaml")[:-1])


@pytest.mark.slow
def test_a_hand_edited_quote_of_a_table_cell_fails_the_check(tmp_path):
    from test_report import copy_of_the_pages, run

    root = copy_of_the_pages(tmp_path)
    page = root / "RESULTS.md"
    text = page.read_text()
    span = "<!-- value: cell recipe-pes cpb mean+±+std -->78.7 ± 0.9<!-- /value -->"
    assert span in text
    page.write_text(text.replace(span, span.replace("78.7 ± 0.9", "79.7 ± 0.9"), 1))
    done = run("--check", "--root", str(root))
    assert done.returncode == 1 and "RESULTS.md" in done.stderr + done.stdout
    assert run("--root", str(root)).returncode == 0 and page.read_text() == text


LOG = """# a header: 2026-11-30, one thread
train 32px none                 627 ms  over none +0.0% [+0.0%, +0.0%]
graph_1_cpp_fused_rotation_backward        6.25%     139.409ms        7.745ms           18
model 64px train relbias: old 844.3 ms (+107.1% over none), new 499.9 ms (+22.6%), new/old 0.592
model 64px train relbias: old 4955.9 ms (+29.5% over none), new 4111.2 ms (+7.4%), new/old 0.830
"""


def test_a_log_number_is_the_named_field_of_the_line_holding_the_text(tmp_path):
    from reports.log_values import log_number

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "ab.txt").write_text(LOG)
    assert log_number(tmp_path, "ab.txt", "train+32px+none", "2") == "627"
    assert log_number(tmp_path, "ab.txt", "train+32px+none", "3") == "+0.0"  # the sign as the log writes it
    # a word glued before a digit is no number (graph_1), a unit after one is (7.745ms)
    assert log_number(tmp_path, "ab.txt", "graph_1_cpp", "3") == "7.745"
    assert log_number(tmp_path, "ab.txt", "graph_1_cpp", "3", "1") == "7.7"
    assert log_number(tmp_path, "ab.txt", "relbias:", "3") == "+107.1"  # the first line holding the text
    assert log_number(tmp_path, "ab.txt", "relbias:", "3", "@2") == "+29.5"  # the second
    assert log_number(tmp_path, "ab.txt", "relbias:", "3", "0", "@2") == "+30"
    with pytest.raises(ValueError, match="has 2 line"):
        log_number(tmp_path, "ab.txt", "relbias:", "3", "@3")
    with pytest.raises(ValueError, match="has 6 numbers, not 7"):
        log_number(tmp_path, "ab.txt", "relbias:", "7")
    with pytest.raises(ValueError, match="is not a file"):
        log_number(tmp_path, "gone.txt", "relbias:", "1")
    with pytest.raises(ValueError, match="FIELD"):
        log_number(tmp_path, "ab.txt", "relbias:", "first")


def test_an_old_benchmarks_figures_are_read_from_its_bench_json(tmp_path):
    from reports.log_values import bench_checks, bench_img_s, bench_overhead

    record = {"rows": [{"pe": "none", "img_size": 64, "train_img_s": 18.31, "train_vs_none": 1.0},
                       {"pe": "relbias", "img_size": 64, "train_img_s": 12.0, "train_vs_none": 0.656}],
              "targets": [{"met": True, "clear": True}, {"met": True, "clear": False}, {"met": False, "clear": True}]}
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "bench.json").write_text(json.dumps(record))
    assert bench_img_s(tmp_path, "bench.json", "none", "64", "train") == "18.3"
    assert bench_overhead(tmp_path, "bench.json", "relbias", "64", "train") == "+52%"  # 1 / 0.656 - 1
    assert bench_checks(tmp_path, "bench.json") == "2 of 3"
    assert bench_checks(tmp_path, "bench.json", "clear") == "1 of 3"
    with pytest.raises(ValueError, match="0 rows for relbias at 32 px"):
        bench_overhead(tmp_path, "bench.json", "relbias", "32", "train")
    with pytest.raises(ValueError, match="train or infer"):
        bench_img_s(tmp_path, "bench.json", "none", "64", "backward")


@pytest.mark.slow
def test_a_hand_edited_figure_read_from_a_log_fails_the_check(tmp_path):
    from test_report import copy_of_the_pages, run

    root = copy_of_the_pages(tmp_path)
    page = root / "BENCHMARKS.md"
    text = page.read_text()
    span = ("<!-- value: log-number bench/history/2026-12-02/host/hook_checks.txt per+forward 4 -->+1.9"
            "<!-- /value -->")
    assert span in text
    page.write_text(text.replace(span, span.replace("+1.9", "+0.9"), 1))
    done = run("--check", "--root", str(root))
    assert done.returncode == 1 and "BENCHMARKS.md" in done.stderr + done.stdout
