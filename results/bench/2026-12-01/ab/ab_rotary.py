"""A/B behind ab_rotary_recipe.txt and ab_rotary_infer_in_place.txt (2026-12-01): vitpe's rotary rotation before
(rotate-half pairs, four half-tensor kernels; vitpe/pe/rotary.py at commit OLD_COMMIT, default 3062918, read with
`git show`) against now (interleaved pairs as complex numbers; at inference in qkv's own memory), timed in one process
with `none` in the same rounds, recipe dims (dim 128, 4 heads, MLP 2, mean pool, batch 128), paired ratios with 90%
bootstrap intervals (ab_bias.compare_old_new). From the repository root:

    OMP_NUM_THREADS=1 taskset -c 1 python results/bench/2026-12-01/ab/ab_rotary.py 32 rope_axial,rope_mixed 9 train

A sixth argument `default` takes the benchmark's default dims (dim 192, 3 heads, MLP 4, class token) instead. The
old rotation pairs other channels than the new one; for timing that makes no difference.
"""
import os
import subprocess
import sys
import types

import vitpe.pe.sites as sites
from ab_bias import compare_old_new  # the sibling A/B script (its folder is on sys.path)


def old_rotation():
    """``rotate_qk_of_qkv`` of vitpe/pe/rotary.py at OLD_COMMIT (this repository's own history, run as a module)."""
    commit = os.environ.get("OLD_COMMIT", "3062918")
    source = subprocess.run(["git", "show", f"{commit}:vitpe/pe/rotary.py"], check=True, capture_output=True,
                            text=True).stdout
    module = types.ModuleType("old_rotary")
    exec(compile(source, f"{commit}:vitpe/pe/rotary.py", "exec"), module.__dict__)
    return lambda qkv, cos, sin, in_place=False: module.rotate_qk_of_qkv(qkv, cos, sin)


def main():
    px, pes, rounds, kind = int(sys.argv[1]), sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4]
    dims = dict(dim=192, heads=3, mlp_ratio=4) if sys.argv[5:] == ["default"] else None
    values = {"old": old_rotation(), "new": sites.rotate_qk_of_qkv}
    compare_old_new(sites, "rotate_qk_of_qkv", values, px, pes, rounds, kind, dims)


if __name__ == "__main__":
    main()
