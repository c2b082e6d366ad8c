"""The benchmark's --quick mode writes a complete, well-formed bench.json (its timings are not tested)."""

import json
import math

import vitpe.pe
from vitpe import bench

ROW_KEYS = {"pe", "img_size", "train_img_s", "infer_img_s", "train_vs_timm", "train_vs_none", "infer_vs_timm",
            "infer_vs_none"}


def test_quick_mode_writes_valid_json(tmp_path):
    assert bench.main(["--quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "bench.json").read_text())
    assert {"machine", "torch", "timm", "config", "rows", "data", "data_share", "text_rows"} <= set(result)
    pes_2d = {n for n in vitpe.pe.available() if 2 in vitpe.pe.get(n).grid_dims}
    assert {r["pe"] for r in result["rows"]} == pes_2d | {"timm"}
    for row in result["rows"]:
        assert ROW_KEYS <= set(row)
        assert all(math.isfinite(row[k]) and row[k] > 0 for k in ROW_KEYS - {"pe", "img_size"})
    assert next(r for r in result["rows"] if r["pe"] == "timm")["train_vs_timm"] == 1.0
    assert 0 < result["data_share"] < 1
    assert {r["pe"] for r in result["text_rows"]} == {n for n in vitpe.pe.available()
                                                       if 1 in vitpe.pe.get(n).grid_dims}
    assert "| timm |" in (tmp_path / "bench.md").read_text()


def test_bad_arguments_are_clear_errors(tmp_path, capsys):
    assert bench.main(["--quick", "--out", str(tmp_path), "--pes", "rope_3d"]) == 2
    assert "rope_3d" in capsys.readouterr().err
    assert bench.main(["--quick", "--out", str(tmp_path), "--dim", "30", "--heads", "4"]) == 2
    assert "not divisible" in capsys.readouterr().err
