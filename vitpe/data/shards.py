"""Write an image folder as webdataset tar shards that the stream loader reads (``data.loader=stream`` with
``data.root`` at the output):

    python -m vitpe.data.shards SRC OUT --shard-size 10000 [--splits train val]

``SRC`` is an image folder (``train/<class>/<images>``, ``val/<class>/...``). ``OUT`` receives ``classes.json`` (the
class folders in label order and their readable names) and, per split, ``OUT/<split>/000000.tar``, ... of at most
``--shard-size`` samples each, in a seeded shuffled order (a reader that goes through a shard from start to end sees
every class), plus ``index.npz`` (each sample's shard, data offset, size and label, so the loader reads a sample with
one seek). Each sample is the webdataset convention: ``<key>.<ext>`` the image's bytes as they were (never
re-encoded), ``<key>.cls`` its label as a decimal number, ``<key>.txt`` its path in ``SRC``. A split is written into a
hidden folder and renamed into place when whole: a stopped run leaves no shards that look finished.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

from vitpe.atomic_files import write_text_atomic
from vitpe.data.datasets import DataError
from vitpe.data.stream_index import CLASSES_FILE, INDEX_FILE, FolderIndex, ShardIndex

ORDER_SEED = 0  # the samples' order in the shards, whatever the runs' seeds


def write_split(index: FolderIndex, out: Path, shard_size: int) -> int:
    """``index``'s samples as shards in ``out`` (which must not exist), with ``index.npz``; returns the count."""
    import webdataset as wds

    partial = out.parent / f".{out.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    order = torch.randperm(len(index), generator=torch.Generator().manual_seed(ORDER_SEED)).tolist()
    try:
        with wds.ShardWriter(str(partial / "%06d.tar"), maxcount=shard_size, encoder=False, mtime=0,
                             verbose=0) as sink:
            for n, i in enumerate(order):
                path = index.paths[i]
                sink.write({"__key__": f"{n:09d}", Path(path).suffix[1:].lower() or "img": index.read(i),
                            "cls": str(int(index.labels[i])).encode(), "txt": path.encode()})
        written = ShardIndex.scan_folder(partial)
        np.savez(partial / INDEX_FILE, shards=np.array(written.shards), shard=written.shard, offset=written.offset,
                 size=written.size, label=written.labels)
        os.replace(partial, out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return len(order)


def write_shards(src: str | Path, out: str | Path, shard_size: int, splits: tuple[str, ...] = ("train", "val"),
                 progress: bool = True) -> dict[str, int]:
    """Every split of the image folder ``src`` as shards under ``out`` (see the module's notes); the samples
    written per split."""
    src, out = Path(src), Path(out)
    if shard_size < 1:
        raise DataError(f"--shard-size must be >= 1, got {shard_size}")
    if out.exists() and any(out.iterdir()):
        raise DataError(f"{out} is not empty: write the shards into a new folder (or delete it first)")
    indices = {split: FolderIndex(src, split) for split in splits}  # every split checked before anything is written
    out.mkdir(parents=True, exist_ok=True)
    first = indices[splits[0]]
    write_text_atomic(json.dumps({"classes": first.classes, "names": first.class_names}, indent=1) + "\n",
                      out / CLASSES_FILE)
    counts = {}
    for split, index in indices.items():
        counts[split] = write_split(index, out / split, shard_size)
        if progress:
            shards = -(-counts[split] // shard_size)
            print(f"{split}: {counts[split]} images in {shards} shard(s) in {out / split}", flush=True)
    return counts


def main(argv: list[str] | None = None) -> int:
    from vitpe.cli.exits import add_debug_flag, run_cli

    parser = argparse.ArgumentParser(prog="python -m vitpe.data.shards", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", help="image folder: SRC/train/<class>/<images>, SRC/val/<class>/<images>")
    parser.add_argument("out", help="new folder for the shards")
    parser.add_argument("--shard-size", type=int, default=10_000, help="samples per shard (default 10000)")
    parser.add_argument("--splits", nargs="+", default=["train", "val"], help="splits to write (default train val)")
    add_debug_flag(parser)
    args = parser.parse_args(argv)
    return run_cli(lambda: write_shards(args.src, args.out, args.shard_size, tuple(args.splits)), debug=args.debug,
                   interrupted=f"no split was left half-written; the splits done are in {args.out}",
                   go_on="run the command again into a new folder")


if __name__ == "__main__":
    sys.exit(main())
