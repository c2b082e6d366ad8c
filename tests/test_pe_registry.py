import re

import pytest
from conftest import DEPTH, DIM, HEADS

import vitpe.pe

EXPECTED = {"none", "learnable", "separable", "sincos", "rope_axial", "rope_mixed", "rope_dinov3", "relbias", "t5bias",
            "cpb", "alibi", "peg", "lookhere", "fire", "liere", "comrope", "string", "pape"}


def test_available_lists_all_encodings():
    assert set(vitpe.pe.available()) == EXPECTED
    assert vitpe.pe.available() == sorted(vitpe.pe.available())


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError) as err:
        vitpe.pe.build("rope_axal", dim=DIM, heads=HEADS, depth=DEPTH, grid=(4, 4))
    msg = str(err.value)
    assert "rope_axal" in msg and "did you mean 'rope_axial'" in msg
    for name in EXPECTED:
        assert name in msg


def test_unknown_option_is_named_not_dropped():
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['thetta'\].*theta"):
        vitpe.pe.build("rope_axial", dim=DIM, heads=HEADS, depth=DEPTH, grid=(4, 4), thetta=10)
    with pytest.raises(ValueError, match="unknown option.*'hidden'.*options are: shift, jitter, rescale"):
        vitpe.pe.build("alibi", dim=DIM, heads=HEADS, depth=DEPTH, grid=(4, 4), hidden=3)
    with pytest.raises(ValueError, match="unknown option.*'theta'.*options are: none"):
        vitpe.pe.build("none", dim=DIM, heads=HEADS, depth=DEPTH, grid=(4, 4), theta=3)


@pytest.mark.parametrize("name, option, value, says", [
    ("rope_axial", "theta", -1, "rope_axial: theta must be a positive number, got -1"),  # once: at the first forward
    ("rope_mixed", "theta", "ten", "rope_mixed: theta must be a positive number, got 'ten'"),
    ("sincos", "base", float("inf"), "sincos: base must be a positive number"),
    ("learnable", "init_std", -0.02, "learnable: init_std must be >= 0"),  # once: a table of std 0.02, silently
    ("separable", "init_std", -1, "separable: init_std must be >= 0"),
    ("relbias", "init_std", float("nan"), "relbias: init_std must be >= 0"),
])
def test_an_option_out_of_range_is_refused_when_the_pe_is_built(name, option, value, says):
    with pytest.raises(ValueError, match=f"^{says}"):
        vitpe.pe.build(name, dim=DIM, heads=HEADS, depth=DEPTH, grid=(4, 4), **{option: value})


def test_missing_model_arguments_are_named():
    with pytest.raises(ValueError, match="needs \\['grid'\\]"):
        vitpe.pe.build("sincos", dim=DIM, heads=HEADS, depth=DEPTH)


def test_options_report_defaults():
    assert vitpe.pe.options("cpb") == {"hidden": 512, "scale": 8.0, "shift": None, "jitter": None, "rescale": None}
    assert vitpe.pe.options("rope_axial") == {"theta": None, "yarn_alpha": 0.25, "yarn_beta": 1.0, "shift": None,
                                              "jitter": None, "rescale": None, "anchor": "centre"}
    assert vitpe.pe.options("none") == {}


SITE_WORDS = {"tokens": "tokens", "qk": "q, k", "logits": "logits", "none": "none"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_encoding_documents_paper_site_shapes_and_options(name):
    """The module docstring of a PE opens with its registered name, says the site it acts at (the one it declares),
    cites a paper with its year, gives a shape, and documents every option it takes (there or in the class)."""
    cls = vitpe.pe.get(name)
    doc = __import__(cls.__module__, fromlist=["_"]).__doc__
    assert doc.startswith(f"``{name}`` -- ")
    assert re.search(rf"Site: {re.escape(SITE_WORDS[cls.site])}\b", doc), f"{name}: no 'Site: {SITE_WORDS[cls.site]}'"
    if name != "none":
        assert re.search(r"Papers?: .*\b(19|20)\d\d\b", doc, re.S), f"{name}: no paper with its year"
        assert re.search(r"\((?:[\w +\-*/]+, )+[\w +\-*/]+\)", doc), f"{name}: no shape like (N, D)"
    undocumented = [o for o in vitpe.pe.options(name) if f"``{o}``" not in doc + (cls.__doc__ or "")]
    assert not undocumented, f"{name}: options {undocumented} are not documented"


def test_bad_arguments_give_clear_errors():
    with pytest.raises(ValueError, match="divisible by 4"):
        vitpe.pe.build("rope_axial", dim=30, heads=3, depth=1, grid=(4, 4))  # head dim 10
    with pytest.raises(ValueError, match="1D grids only"):
        vitpe.pe.build("t5bias", dim=DIM, heads=HEADS, depth=DEPTH, grid=(4, 4))
    with pytest.raises(ValueError, match="2D grids only"):
        vitpe.pe.build("separable", dim=DIM, heads=HEADS, depth=DEPTH, grid=(9,))
    with pytest.raises(ValueError, match="divisible by 4"):
        vitpe.pe.build("sincos", dim=30, heads=2, depth=1, grid=(4, 4))
    with pytest.raises(ValueError, match="not divisible by heads"):
        vitpe.pe.build("alibi", dim=30, heads=4, depth=1, grid=(4, 4))
    with pytest.raises(ValueError, match="pe_resize mode"):
        vitpe.pe.build("alibi", dim=DIM, heads=HEADS, depth=1, grid=(4, 4), resize="stretch")
    with pytest.raises(ValueError, match="before_block"):
        vitpe.pe.build("peg", dim=DIM, heads=HEADS, depth=2, grid=(4, 4), before_block=2)
    assert vitpe.pe.build("peg", dim=DIM, heads=HEADS, depth=1, grid=(4, 4)).before_block == 0  # one block: before it
    assert vitpe.pe.build("peg", dim=DIM, heads=HEADS, depth=6, grid=(4, 4)).before_block == 1  # CPVT: after block 0


@pytest.mark.slow
def test_import_vitpe_pe_needs_torch_alone():
    """``import vitpe.pe`` in a fresh process imports torch and vitpe's PE code only: none of timm, torchvision,
    yaml, matplotlib, vitpe's models, data or weight loading; ``vitpe.ViT`` still comes on first use."""
    import subprocess
    import sys

    code = ("import sys, vitpe.pe\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('timm', 'torchvision', 'yaml', 'matplotlib')"
            " or (m.startswith('vitpe.') and not m.startswith('vitpe.pe')))\n"
            "print(heavy)\n"
            "import vitpe\n"
            "print(vitpe.ViT.__name__, vitpe.from_timm.__name__)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["[]", "ViT from_timm"]
