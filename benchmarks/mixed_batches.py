"""Images of many grids in one batch: vitpe's mixed batch against the two ways a one-grid model takes them, side by
side in one run on one machine. From the repository root:

    python benchmarks/mixed_batches.py DATA/imagewoof2-320 --out results/bench/mixed_cpu

The images: a seeded sample of the folder's training photographs, each at the largest grid of at most L patches of
its own shape (:func:`vitpe.data.native_aspect.grid_within`), ``--budget // L`` of them a batch, for L = 64 and 144
(the native-aspect training's batches). For each PE, a training step (forward, cross-entropy, backward) of the
Imagenette grid's ViT (dim 192, depth 6, 3 heads, patch 8, conv stem, mean pooling) on the same images as

- ``mixed``: one list, ``model([...])``: every image on its own grid, the sequences padded to the longest, the PE
  on each grid (:mod:`vitpe.pe.mixed`);
- ``padded``: every image zero-padded (after normalisation) at its bottom and right to the batch's largest height and
  width, one (B, 3, H, W) tensor on one grid -- what a one-grid model can do with them in one call, at the cost of
  padding tokens that are attended to as if they were image;
- ``grouped``: one call per distinct grid, the images of that grid as one batch -- exact, and as many calls as grids.

Cells run in interleaved rounds (a new order each round) after a warm-up step; each figure is the median over the
rounds, each ratio the median of the rounds' paired ratios. The record (``mixed.json``) holds the machine;
BENCHMARKS.md's table is generated from it (``python scripts/report.py``).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from vitpe.atomic_files import write_text_atomic
from vitpe.machine import machine

PES = ("none", "learnable", "rope_mixed", "cpb", "lookhere", "fire")
LENGTHS = (64, 144)
PATCH = 8


def photo_sizes(folder: Path, count: int, seed: int) -> list[tuple[int, int]]:
    """(height, width) of a seeded sample of ``count`` training photographs (read from their headers)."""
    from PIL import Image

    files = sorted(p for p in (folder / "train").rglob("*") if p.is_file())
    if not files:
        sys.exit(f"no images under {folder / 'train'}: give the folder that holds train/<class>/...")
    chosen = random.Random(seed).sample(files, min(count, len(files)))
    sizes = []
    for path in chosen:
        with Image.open(path) as image:
            sizes.append((image.size[1], image.size[0]))
    return sizes


def batch_images(sizes: list[tuple[int, int]], length: int, seed: int) -> list[torch.Tensor]:
    from vitpe.data.native_aspect import grid_within

    generator = torch.Generator().manual_seed(seed)
    grids = [grid_within(h, w, length) for h, w in sizes]
    return [torch.randn(3, gh * PATCH, gw * PATCH, generator=generator) for gh, gw in grids]


def padded(images: list[torch.Tensor]) -> torch.Tensor:
    """The images zero-padded at the bottom and right to the largest height and width: (B, 3, H, W)."""
    height, width = max(x.shape[1] for x in images), max(x.shape[2] for x in images)
    return torch.stack([F.pad(x, (0, width - x.shape[2], 0, height - x.shape[1])) for x in images])


def grouped(images: list[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(indices, (b, 3, h, w)) for each distinct size, in first-seen order."""
    groups: dict[tuple, list[int]] = {}
    for i, x in enumerate(images):
        groups.setdefault(tuple(x.shape), []).append(i)
    return [(torch.tensor(rows), torch.stack([images[i] for i in rows])) for rows in groups.values()]


def steps(model: torch.nn.Module, images: list[torch.Tensor], labels: torch.Tensor) -> dict:
    """One training step's function per variant."""
    whole, groups = padded(images), grouped(images)

    def mixed():
        F.cross_entropy(model(images), labels).backward()

    def one_grid():
        F.cross_entropy(model(whole), labels).backward()

    def per_grid():
        for rows, batch in groups:  # the batch's mean loss, summed over its grids' calls
            (F.cross_entropy(model(batch), labels[rows], reduction="sum") / len(labels)).backward()

    return {"mixed": mixed, "padded": one_grid, "grouped": per_grid}


def run(args: argparse.Namespace) -> dict:
    import vitpe

    sizes_pool = photo_sizes(Path(args.folder), 4096, args.seed)
    cells, rows = [], []
    for length in LENGTHS:
        count = args.budget // length
        images = batch_images(random.Random(args.seed + length).sample(sizes_pool, count), length, args.seed)
        labels = torch.arange(count) % 10
        tokens = sum(x.shape[1] * x.shape[2] for x in images) // PATCH ** 2
        whole = padded(images)
        info = {"length": length, "images": count, "grids": len(grouped(images)), "tokens": tokens,
                "mixed_tokens": count * max(x.shape[1] * x.shape[2] for x in images) // PATCH ** 2,
                "padded_tokens": count * whole.shape[2] * whole.shape[3] // PATCH ** 2}
        for pe in PES:
            torch.manual_seed(0)
            model = vitpe.ViT(img_size=64, patch_size=PATCH, num_classes=10, dim=192, depth=6, heads=3,
                              mlp_ratio=2.0, pe=pe, pool="mean", fc_norm=True, stem="conv").train()
            row = {**info, "pe": pe, **{f"{v}_s": [] for v in ("mixed", "padded", "grouped")}}
            for name, step in steps(model, images, labels).items():
                step()  # warm-up
                cells.append((row, name, step, model))
            rows.append(row)
    for _ in range(args.rounds):
        random.shuffle(cells)
        for row, name, step, model in cells:
            model.zero_grad(set_to_none=True)
            start = time.perf_counter()
            step()
            row[f"{name}_s"].append(time.perf_counter() - start)
    for row in rows:
        for name in ("mixed", "padded", "grouped"):
            row[f"{name}_img_s"] = row["images"] / statistics.median(row[f"{name}_s"])
        for anchor in ("padded", "grouped"):
            pairs = [b / a for a, b in zip(row["mixed_s"], row[f"{anchor}_s"])]  # speed of mixed over the anchor
            row[f"mixed_over_{anchor}"] = statistics.median(pairs)
            row[f"mixed_over_{anchor}_range"] = [min(pairs), max(pairs)]
    return {"rows": rows, "machine": machine(), "threads": torch.get_num_threads(), "torch": torch.__version__,
            "rounds": args.rounds, "budget": args.budget, "seed": args.seed, "date": time.strftime("%Y-%m-%d"),
            "command": "python benchmarks/mixed_batches.py " + " ".join(sys.argv[1:])}


def main() -> None:
    import json

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="an image folder with train/<class>/<image> (Imagewoof2-320)")
    parser.add_argument("--out", required=True, help="folder for mixed.json")
    parser.add_argument("--budget", type=int, default=1152,
                        help="patch tokens a batch (default 1152: 18 x 64, 8 x 144)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    record = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(json.dumps(record, indent=1) + "\n", out / "mixed.json")
    for row in record["rows"]:
        print(f"L={row['length']:3d} {row['pe']:10s} mixed {row['mixed_img_s']:6.1f} img/s  padded "
              f"{row['padded_img_s']:6.1f}  grouped {row['grouped_img_s']:6.1f}  mixed/padded "
              f"{row['mixed_over_padded']:.2f}  mixed/grouped {row['mixed_over_grouped']:.2f}")


if __name__ == "__main__":
    main()
