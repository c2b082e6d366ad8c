"""2D RoPE on q and k, side by side: vitpe, timm's layers and rotary-embedding-torch, in one run on one machine.

    pip install -e ".[bench]"        # rotary-embedding-torch, the third anchor
    python benchmarks/rope_apply.py --out results/bench/rope_apply_cpu

The task, as a user of each library writes it: q and k of a ViT block with a class token, shape (B, nH, 1 + N, Dh),
rotated on a 14x14 patch grid and then on 20x16 (the class token left as it is), axial RoPE and RoPE-Mixed (learned
frequencies; rotary-embedding-torch has none). Each implementation below is the code a user writes in their attention,
including the per-forward table work each library asks for (vitpe's ``bind``, timm's ``get_embed(shape)``,
rotary-embedding-torch's ``get_axial_freqs``); its lines are counted from this file into the record.

Timed at (64, 6, 197, 64) (14x14 and a class token), float32: the forward alone, and forward + backward (gradients
into q, k and any learned frequency), each the median of ``--repeats`` calls, cells interleaved over ``--rounds``
rounds in a new order each round; ratios are the medians of the rounds' paired ratios (vitpe over each anchor). The
frequency ladders differ between libraries (the time does not depend on them); each result's shape and norm are
checked (a rotation keeps every token's norm).
"""

from __future__ import annotations

import argparse
import inspect
import json
import random
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

import vitpe
from vitpe.atomic_files import write_text_atomic
from vitpe.machine import machine

HEADS, HEAD_DIM, PREFIX = 6, 64, 1
GRIDS = ((14, 14), (20, 16))
Rotate = Callable[[torch.Tensor, torch.Tensor, tuple[int, int]], tuple[torch.Tensor, torch.Tensor]]


# ------------------------------------------------------------------------------------- the code a user writes
def vitpe_axial() -> Rotate:
    pe = vitpe.pe.build("rope_axial", dim=HEADS * HEAD_DIM, heads=HEADS, grid=(14, 14), num_prefix_tokens=1)

    def rotate(q, k, grid):
        return pe.bind(grid).layer(0).rotate_qk(q, k)
    return rotate


def vitpe_mixed() -> Rotate:
    pe = vitpe.pe.build("rope_mixed", dim=HEADS * HEAD_DIM, heads=HEADS, depth=1, grid=(14, 14), num_prefix_tokens=1)

    def rotate(q, k, grid):
        return pe.bind(grid).layer(0).rotate_qk(q, k)
    return rotate


def timm_axial() -> Rotate:
    from timm.layers import RotaryEmbeddingCat, apply_rot_embed_cat
    rope = RotaryEmbeddingCat(HEAD_DIM, in_pixels=False)  # no feat_shape: the table follows each grid

    def rotate(q, k, grid):
        emb = rope.get_embed(shape=list(grid))
        q = torch.cat([q[:, :, :1], apply_rot_embed_cat(q[:, :, 1:], emb)], dim=2)
        k = torch.cat([k[:, :, :1], apply_rot_embed_cat(k[:, :, 1:], emb)], dim=2)
        return q, k
    return rotate


def timm_mixed() -> Rotate:
    from timm.layers import RotaryEmbeddingMixed, apply_rot_embed_cat
    rope = RotaryEmbeddingMixed(HEADS * HEAD_DIM, depth=1, num_heads=HEADS)

    def rotate(q, k, grid):
        emb = rope.get_embed(shape=list(grid))[0]
        q = torch.cat([q[:, :, :1], apply_rot_embed_cat(q[:, :, 1:], emb)], dim=2)
        k = torch.cat([k[:, :, :1], apply_rot_embed_cat(k[:, :, 1:], emb)], dim=2)
        return q, k
    return rotate


def rotary_embedding_torch_axial() -> Rotate:
    from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb
    rope = RotaryEmbedding(dim=HEAD_DIM // 2, freqs_for="pixel", max_freq=256)

    def rotate(q, k, grid):
        freqs = rope.get_axial_freqs(*grid).flatten(0, 1)
        q = torch.cat([q[:, :, :1], apply_rotary_emb(freqs, q[:, :, 1:])], dim=2)
        k = torch.cat([k[:, :, :1], apply_rotary_emb(freqs, k[:, :, 1:])], dim=2)
        return q, k
    return rotate


IMPLEMENTATIONS: dict[str, dict[str, Callable[[], Rotate]]] = {
    "rope_axial": {"vitpe": vitpe_axial, "timm": timm_axial, "rotary-embedding-torch": rotary_embedding_torch_axial},
    "rope_mixed": {"vitpe": vitpe_mixed, "timm": timm_mixed},
}


def user_lines(make: Callable[[], Rotate]) -> int:
    """Lines of the code a user writes for the task: the construction and the rotation, imports included."""
    body = inspect.getsource(make).splitlines()[1:]  # without the def line
    return sum(1 for line in body if line.strip() and not line.strip().startswith(("return rotate", "#")))


# ------------------------------------------------------------------------------------------------------ timing
def check(rotate: Rotate, name: str) -> None:
    """Each grid gives q and k of the input's shape, each token's norm kept, the class token untouched."""
    for grid in GRIDS:
        q, k = torch.randn(2, 2, HEADS, PREFIX + grid[0] * grid[1], HEAD_DIM)
        rq, rk = rotate(q, k, grid)
        assert rq.shape == q.shape and rk.shape == k.shape, name
        torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1), rtol=1e-4, atol=1e-4, msg=name)
        torch.testing.assert_close(rq[:, :, 0], q[:, :, 0], msg=name)
        assert not torch.allclose(rq[:, :, 1:], q[:, :, 1:]), f"{name} did not rotate"


def timed(rotate: Rotate, backward: bool, batch: int, repeats: int) -> float:
    """Median seconds of one call (forward, or forward + backward) at 14x14 with a class token."""
    grid = GRIDS[0]
    q, k = torch.randn(2, batch, HEADS, PREFIX + grid[0] * grid[1], HEAD_DIM)
    gq, gk = torch.randn_like(q), torch.randn_like(k)
    q.requires_grad_(backward)
    k.requires_grad_(backward)
    times = []
    for _ in range(repeats + 1):  # the first call warms up
        start = time.perf_counter()
        with torch.set_grad_enabled(backward):
            rq, rk = rotate(q, k, grid)
            if backward:
                torch.autograd.backward([rq, rk], [gq, gk])
        times.append(time.perf_counter() - start)
        q.grad = k.grad = None
    return statistics.median(times[1:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for rope_apply.json")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rotations = {(pe, lib): make() for pe, libs in IMPLEMENTATIONS.items() for lib, make in libs.items()}
    for (pe, lib), rotate in rotations.items():
        check(rotate, f"{lib} {pe}")
    cells = [(pe, lib, backward) for (pe, lib) in rotations for backward in (False, True)]
    seconds: dict[tuple, list[float]] = {cell: [] for cell in cells}
    order = random.Random(0)
    for round_index in range(args.rounds):
        order.shuffle(cells)
        for pe, lib, backward in cells:
            seconds[(pe, lib, backward)].append(timed(rotations[(pe, lib)], backward, args.batch, args.repeats))
        print(f"round {round_index + 1}/{args.rounds}", file=sys.stderr, flush=True)
    rows = []
    for (pe, lib), _ in rotations.items():
        for backward in (False, True):
            mine = seconds[(pe, "vitpe", backward)]
            theirs = seconds[(pe, lib, backward)]
            ratios = [a / b for a, b in zip(mine, theirs)]  # vitpe's time over this library's, per round
            rows.append({"pe": pe, "library": lib, "pass": "forward + backward" if backward else "forward",
                         "ms": 1000 * statistics.median(theirs), "vitpe_over": statistics.median(ratios),
                         "vitpe_over_range": [min(ratios), max(ratios)],
                         "lines": user_lines(IMPLEMENTATIONS[pe][lib])})
    import rotary_embedding_torch
    import timm
    record = {"machine": machine(), "threads": torch.get_num_threads(), "torch": torch.__version__,
              "timm": timm.__version__, "rotary_embedding_torch": getattr(rotary_embedding_torch, "__version__", "?"),
              "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "rounds": args.rounds, "repeats": args.repeats,
              "shape": [args.batch, HEADS, PREFIX + 14 * 14, HEAD_DIM],
              "command": "python benchmarks/rope_apply.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(json.dumps(record, indent=1) + "\n", args.out / "rope_apply.json")
    for row in rows:
        print(f"{row['pe']:11s} {row['library']:23s} {row['pass']:19s} {row['ms']:8.2f} ms  vitpe/this "
              f"{row['vitpe_over']:.2f}  lines {row['lines']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
