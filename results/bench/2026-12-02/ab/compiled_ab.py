"""Compiled A/Bs behind the compiled_*.txt files here (2026-12-02): two changes under torch.compile, each timed old
against new in the same rounds as a compiled ``none`` (results/bench/2026-12-01/ab/ab_bias.py's compare_old_new with
``compiled=True``: recipe dims, batch 128, the benchmark's shuffled interleaved rounds, one thread, paired ratios with
90% bootstrap intervals). From the repository root:

    OMP_NUM_THREADS=1 taskset -c 1 python results/bench/2026-12-02/ab/compiled_ab.py bias 64 relbias,cpb 9 train
    OMP_NUM_THREADS=1 taskset -c 1 python results/bench/2026-12-02/ab/compiled_ab.py rotation 32 rope_axial,rope_mixed 9 infer

bias: a learned attention bias as the plain whole-batch formula inductor fuses (old) or the chunked attention as
opaque custom ops (new). rotation: the compiled rotation of q and k of an older checkout (old; OLD_TREE, default
/work/lanetree at commit 3c7140d, pair by pair) against this tree's (new: at inference, channel by channel from the
projections' rows).
compiled_bias_*.txt and compiled_rotation_{32,64}_*.txt came from this script's first form, which timed the same but
shared one compiled model per PE between old and new (dynamo kept a graph for each) and swapped ``rotary._composed``
(f98f2fc's padded channel form as new); compiled_rotation_*_train*.txt timed the channel form in training too, which
no tree since uses there. compiled_rows_*.txt: this form.
"""
import importlib.util
import os
import sys
from pathlib import Path

import vitpe.models.attention as attention
import vitpe.pe.sites as sites
from vitpe.models.biased_attention import plain_biased_attention


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def variants(change):
    """(owner, attribute, {variant: value}): what each variant sets before its step."""
    if change == "bias":
        return attention, "biased_attention", {"old": plain_biased_attention, "new": attention.biased_attention}
    old = load("old_rotary", os.path.join(os.environ.get("OLD_TREE", "/work/lanetree"), "vitpe/pe/rotary.py"))
    return sites, "rotate_qk_of_qkv", {"old": old.rotate_qk_of_qkv, "new": sites.rotate_qk_of_qkv}


def main():
    change, px, pes, rounds, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), int(sys.argv[4]), sys.argv[5]
    ab = load("ab_bias", Path(__file__).resolve().parents[2] / "2026-12-01/ab/ab_bias.py")
    ab.compare_old_new(*variants(change), px, pes, rounds, kind, compiled=True)


if __name__ == "__main__":
    main()
