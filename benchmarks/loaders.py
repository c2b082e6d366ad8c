"""The stream loader against the loaders a user already has, side by side in one run on one machine, and its memory
over many images. From the repository root:

    python benchmarks/loaders.py throughput DATA/imagewoof2-320 --out results/bench/loaders_cpu
    python benchmarks/loaders.py memory --out results/bench/loaders_cpu [--images 200000,2000]

``throughput``: training batches per second, in images per second, of

- ``vitpe``: :class:`vitpe.data.stream_loader.StreamLoader` (``data.loader=stream``), and ``vitpe_draft`` the same
  with ``data.jpeg_draft=true`` (a JPEG decoded at the smallest DCT scale that holds its view: the same crops, the
  decoder's own downscaling before the bicubic one);
- ``timm``: timm's ``create_loader`` over its ``ImageDataset`` with its prefetcher (uint8 from the workers,
  normalised in the main process), colour jitter and random erasing off;
- ``torchvision``: ``ImageFolder`` + ``DataLoader`` with the transforms torchvision's documentation shows
  (``RandomResizedCrop``, ``RandomHorizontalFlip``, ``ToImage``, ``ToDtype(float32, scale=True)``, ``Normalize``);

each with the same augmentation -- a random-resized crop (area 0.35-1, aspect 3/4-4/3, bicubic) to the output size,
a flip, normalisation -- over the same JPEGs, shuffled, batches of 64, for 1 and 2 workers and output sizes 64 and
224 px. The cells run in interleaved rounds (every loader, size and worker count once a round, in a new order each
round), a warm-up of 2 batches then 40 timed batches per cell; each cell's figure is the median over the rounds,
and each ratio the median of the rounds' paired ratios.

``memory``: peak memory of a stream loader (2 workers, 32 px, batches of 64, 40 batches) over a generated folder of
N small JPEGs, each N in a fresh process: the proportional set size (PSS: shared pages split between the processes
that share them) of the main process and its workers summed after each batch, the largest sum kept, and the main
process's own peak resident memory (VmHWM). The folders are written under ``--scratch`` (default: a temporary
folder) and removed after.

``in_memory``: the in-memory path (``data.loader=memory``) on a folder of photographs stored at ``--img-size`` (320:
Imagewoof2-320 at its full size), one epoch of a tiny model in a fresh process: whether it trains, and its peak
resident memory against the decoded set's size:

    python benchmarks/loaders.py in_memory DATA/imagewoof2-320 --img-size 320 --out results/bench/loaders_cpu

Each writes a JSON record (``throughput.json`` / ``memory.json`` / ``in_memory.json``) with the machine
(:func:`vitpe.machine.machine`); BENCHMARKS.md's tables are generated from them (``python scripts/report.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from vitpe.atomic_files import write_text_atomic
from vitpe.machine import machine

SCALE, RATIO = (0.35, 1.0), (3 / 4, 4 / 3)
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
BATCH, WARMUP, TIMED = 64, 2, 40


def vitpe_loader(folder: Path, size: int, workers: int, batch: int, draft: bool = False):
    from vitpe.data.stream_index import open_index
    from vitpe.data.stream_loader import StreamLoader
    from vitpe.data.stream_views import TrainView

    loader = StreamLoader(open_index(folder, "train"), batch, train=True, mean=list(MEAN), std=list(STD),
                          img_sizes=[size], view=TrainView(crop_scale=SCALE, hflip=True, draft=draft),
                          workers=workers)
    return loader.epoch(0)


def vitpe_draft_loader(folder: Path, size: int, workers: int, batch: int):
    return vitpe_loader(folder, size, workers, batch, draft=True)


def timm_loader(folder: Path, size: int, workers: int, batch: int):
    from timm.data import ImageDataset, create_loader

    loader = create_loader(ImageDataset(str(folder / "train")), input_size=(3, size, size), batch_size=batch,
                           is_training=True, use_prefetcher=True, scale=SCALE, ratio=RATIO, hflip=0.5, vflip=0.0,
                           color_jitter=None, auto_augment=None, re_prob=0.0, interpolation="bicubic", mean=MEAN,
                           std=STD, num_workers=workers, device=torch.device("cpu"), persistent_workers=False)
    return iter(loader)


def torchvision_loader(folder: Path, size: int, workers: int, batch: int):
    from torchvision.datasets import ImageFolder
    from torchvision.transforms import v2

    transform = v2.Compose([v2.RandomResizedCrop(size, scale=SCALE, ratio=RATIO,
                                                 interpolation=v2.InterpolationMode.BICUBIC, antialias=True),
                            v2.RandomHorizontalFlip(), v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                            v2.Normalize(MEAN, STD)])
    loader = torch.utils.data.DataLoader(ImageFolder(str(folder / "train"), transform=transform), batch_size=batch,
                                         shuffle=True, num_workers=workers, drop_last=True)
    return iter(loader)


LOADERS = {"vitpe": vitpe_loader, "vitpe_draft": vitpe_draft_loader, "timm": timm_loader,
           "torchvision": torchvision_loader}


def images_per_second(make, folder: Path, size: int, workers: int, batch: int, timed: int) -> float:
    """Images per second over ``timed`` batches after :data:`WARMUP` (the workers started, their queues full)."""
    torch.manual_seed(0)
    batches = make(folder, size, workers, batch)
    for _ in range(WARMUP):
        next(batches)
    start = time.perf_counter()
    for _ in range(timed):
        images, _ = next(batches)
        assert images.shape == (batch, 3, size, size) and images.dtype == torch.float32
    seconds = time.perf_counter() - start
    del batches  # its workers stop
    return timed * batch / seconds


def throughput(folder: Path, rounds: int, sizes: list[int], workers: list[int], batch: int, timed: int, log) -> dict:
    cells = [(name, size, w) for name in LOADERS for size in sizes for w in workers]
    results: dict[str, list[float]] = {f"{n} {s} {w}": [] for n, s, w in cells}
    order = random.Random(0)
    for r in range(rounds):
        for name, size, w in order.sample(cells, len(cells)):
            rate = images_per_second(LOADERS[name], folder, size, w, batch, timed)
            results[f"{name} {size} {w}"].append(rate)
            log(f"round {r + 1}/{rounds}  {name:<11} {size:>3} px  {w} worker(s)  {rate:7.1f} img/s")
    rows = []
    for size in sizes:
        for w in workers:
            row = {"size": size, "workers": w}
            for name in LOADERS:
                rates = results[f"{name} {size} {w}"]
                row[f"{name}_img_s"] = statistics.median(rates)
                row[f"{name}_rounds"] = rates
            for ours in ("vitpe", "vitpe_draft"):
                for anchor in ("timm", "torchvision"):
                    pairs = zip(results[f"{ours} {size} {w}"], results[f"{anchor} {size} {w}"])
                    row[f"{ours}_over_{anchor}"] = statistics.median(a / b for a, b in pairs)
            rows.append(row)
    return {"kind": "throughput", "data": str(folder.name), "batch": batch, "warmup": WARMUP, "timed": timed,
            "rounds": rounds, "scale": SCALE, "ratio": RATIO, "rows": rows}


def small_jpegs(folder: Path, count: int, classes: int = 10) -> None:
    """``count`` 32 x 32 JPEGs (about 1 kB each) in ``classes`` class folders of ``folder/train``; one image encoded
    once per class and written under every name (decoding, not encoding, is what a loader does)."""
    from PIL import Image

    for c in range(classes):
        where = folder / "train" / f"class{c:03d}"
        where.mkdir(parents=True)
        path = where / "0.jpg"
        Image.new("RGB", (32, 32), (25 * c, 80, 160)).save(path, quality=90)
        data = path.read_bytes()
        for i in range(1, count // classes + (c < count % classes)):
            (where / f"{i}.jpg").write_bytes(data)


def pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


PROBE = """
import os, sys
from pathlib import Path
sys.path.insert(0, 'benchmarks')
from loaders import children, pss_kb
from vitpe.data.stream_index import open_index
from vitpe.data.stream_loader import StreamLoader
from vitpe.data.stream_views import TrainView
loader = StreamLoader(open_index(sys.argv[1], 'train'), 64, train=True, mean=[0.5] * 3, std=[0.25] * 3,
                      img_sizes=[32], view=TrainView(crop_scale=(0.35, 1)), workers=2)
peak = 0
for step, _ in zip(range(40), loader.epoch(0)):
    me = os.getpid()
    peak = max(peak, pss_kb(me) + sum(pss_kb(c) for c in children(me)))
hwm = next(l for l in Path('/proc/self/status').read_text().splitlines() if l.startswith('VmHWM:')).split()[1]
print(len(loader.index), peak, hwm)
"""


def peak_of_loader(folder: Path) -> dict:
    """Run :data:`PROBE` over ``folder``: after each of its batches, the PSS of the loader's process and its workers
    summed, the largest sum kept; and the main process's peak RSS."""
    done = subprocess.run([sys.executable, "-c", PROBE, str(folder)], capture_output=True, text=True, timeout=1800,
                          cwd=Path(__file__).resolve().parents[1])
    if done.returncode:
        raise RuntimeError(f"the memory probe failed on {folder}: {done.stderr[-2000:]}")
    images, peak, hwm = (int(v) for v in done.stdout.split())
    return {"images": images, "peak_pss_mb": peak / 1024, "main_peak_rss_mb": hwm / 1024}


def memory(counts: list[int], scratch: Path, log) -> dict:
    rows = []
    for count in counts:
        folder = scratch / f"jpegs_{count}"
        small_jpegs(folder, count)
        try:
            rows.append(peak_of_loader(folder))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        log(f"{count} images: peak PSS {rows[-1]['peak_pss_mb']:.0f} MB (main process VmHWM "
            f"{rows[-1]['main_peak_rss_mb']:.0f} MB)")
    return {"kind": "memory", "workers": 2, "px": 32, "batch": 64, "batches": 40, "rows": rows}


def in_memory_peak(root: Path, img_size: int, log) -> dict:
    """A one-epoch training of a tiny model on the in-memory path with ``root``'s photographs stored at ``img_size``
    (decoded afresh, no cache): its exit code, peak resident memory and the decoded set's size."""
    from vitpe.data.stream_index import FolderIndex

    images = sum(len(FolderIndex(root, split)) for split in ("train", "test"))
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "train.py", "--config", "configs/imagenette_grid.yaml", "data.dataset=imagefolder",
                   f"data.root={root}", f"data.img_size={img_size}", "data.cache_dir=off", "model.dim=32",
                   "model.depth=1", "model.heads=2", "train.epochs=1", "train.warmup_epochs=0", "train.img_sizes=[64]",
                   "train.img_size_epochs=[]", "train.threads=1", f"out_dir={out}/run", "--no-progress"]
        done = subprocess.run(command, cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    log(f"{images} images at {img_size} px in memory: exit {done.returncode}, peak RSS {peak:.0f} MB")
    return {"kind": "in_memory", "data": root.name, "img_size": img_size, "images": images,
            "decoded_mb": images * 3 * img_size**2 / 2**20, "returncode": done.returncode,
            "last_line": (done.stdout.strip().splitlines() or [""])[-1], "peak_rss_mb": peak}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("throughput", "memory", "in_memory"))
    parser.add_argument("folder", nargs="?", help="throughput, in_memory: an image folder with train/ and val/")
    parser.add_argument("--img-size", type=int, default=320, help="in_memory: data.img_size (default 320)")
    parser.add_argument("--out", required=True, help="folder for the JSON record")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="64,224")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--images", default="200000,2000", help="memory: the folder sizes")
    parser.add_argument("--scratch", help="memory: where the generated folders go (default: a temporary folder)")
    parser.add_argument("--batch", type=int, default=BATCH, help=f"throughput: images per batch (default {BATCH})")
    parser.add_argument("--timed", type=int, default=TIMED, help=f"throughput: timed batches (default {TIMED})")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log_lines: list[str] = []

    def log(line: str) -> None:
        print(line, flush=True)
        log_lines.append(line)

    if args.what == "throughput":
        if not args.folder:
            parser.error("throughput needs the image folder")
        record = throughput(Path(args.folder), args.rounds, [int(s) for s in args.sizes.split(",")],
                            [int(w) for w in args.workers.split(",")], args.batch, args.timed, log)
    elif args.what == "in_memory":
        if not args.folder:
            parser.error("in_memory needs the image folder")
        record = in_memory_peak(Path(args.folder).resolve(), args.img_size, log)
    else:
        with tempfile.TemporaryDirectory(dir=args.scratch) as scratch:
            record = memory([int(n) for n in args.images.split(",")], Path(scratch), log)
    record.update(machine=machine(), cores=os.cpu_count(), torch=torch.__version__,
                  date=time.strftime("%Y-%m-%d"),
                  command="python benchmarks/loaders.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    write_text_atomic(json.dumps(record, indent=1) + "\n", out / f"{args.what}.json")
    write_text_atomic("\n".join(log_lines) + "\n", out / f"{args.what}.log")
    return 0


if __name__ == "__main__":
    sys.exit(main())
