"""The anchor of native-aspect training: timm's NaFlexViT, trained by timm's own NaFlex loader, on an image folder.

    VITPE_DATA=/path/to/data python scripts/naflex_baseline.py --out runs/imagewoof_native/naflex_learned_s0 \
        --pos-embed learned [--seed 0]
    python scripts/naflex_baseline.py --evaluate runs/imagewoof_native/naflex_learned_s0 --sizes 48,64,...,320

Training, with timm's own parts only: ``NaFlexVit`` (dim 192, depth 6, 3 heads, MLP ratio 2, patch 8, mean pooling
over the patches with a LayerNorm after it, no class token; ``--pos-embed learned``: a learned 8 x 8 table that
timm resamples to every image's grid, bicubic; ``rope_mixed``: timm's RoPE-Mixed on each patch's coordinates) fed by
``create_naflex_loader`` over timm's ``ImageDataset`` (sequence lengths 16, 36, 64, 100 and 144 patches, the same
random-resized crop area 0.35-1 and flips, timm's colour jitter off, ImageNet's normalisation; a batch of a length
holds ``--batch-size * 144 // length`` images: 39 gives 5616 tokens a step against configs/imagewoof_native.yaml's
5568). AdamW lr 1.5e-3, weight decay 0.05 off norms, biases and the position table, label smoothing 0.1, gradient
clipping 1.0, 3 warm-up epochs then cosine to 1e-5 per step (timm's scheduler, as train.py builds it), 35 epochs:
configs/imagewoof_native.yaml's settings. What differs from vitpe's run, and why: timm's linear patch embedding
(NaFlexViT has no convolutional stem), timm's loader's own epoch (every image once, no image left over), its own
sampling and augmentation code.

After every epoch: the test split at native aspect with the short side at 64 px, evaluated through vitpe's native
views (the same images and pixels as vitpe's runs are tested on), a line in OUT/metrics.jsonl in train.py's format,
and OUT/checkpoint.pt (model, optimiser, epoch); ``--resume`` continues from the last finished epoch with the run's own
settings (the data root, epochs and threads are the command's).
``--evaluate RUN --sizes ...`` writes RUN/resolution.json: the test split at each short side, records in eval.py's
format (mode ``timm``: NaFlexViT resamples its table, and places its rotations at the patches' coordinates, its own
way).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F

from vitpe.atomic_files import write_text_atomic
from vitpe.data import DataError
from vitpe.data.image_folder import find_named_folder
from vitpe.data.native_aspect import native_evaluation
from vitpe.data.stream_index import open_index
from vitpe.data.stream_loader import Selection
from vitpe.engine.loop import evaluate
from vitpe.pe.mixed import GridLayout
from vitpe.cli.arg_types import positive_int
from vitpe.engine.metrics_file import append_record, read_records, save_records
from vitpe.loading.checkpoint import save_atomic
from vitpe.machine import described

BASELINE = "timm NaFlexViT"
SEQ_LENS = (16, 36, 64, 100, 144)
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
PATCH = 8


def build_model(pos_embed: str, num_classes: int) -> torch.nn.Module:
    from timm.models.naflexvit import NaFlexVit, NaFlexVitCfg

    rope = pos_embed == "rope_mixed"
    cfg = NaFlexVitCfg(patch_size=PATCH, embed_dim=192, depth=6, num_heads=3, mlp_ratio=2.0, class_token=False,
                       global_pool="avg", fc_norm=True, pos_embed="none" if rope else "learned",
                       pos_embed_grid_size=(8, 8), rope_type="mixed" if rope else "")
    return NaFlexVit(cfg=cfg, num_classes=num_classes)


class OneSizeACall(torch.nn.Module):
    """``model`` (timm's NaFlexViT on plain image tensors) over a list of images of many sizes: one call per size,
    the logits (B, classes) in the list's order."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: list[torch.Tensor]) -> torch.Tensor:
        layout = GridLayout([tuple(x.shape[-2:]) for x in images], num_prefix_tokens=0)  # its groups: images by size
        logits = torch.empty(len(images), self.model.num_classes)
        for group in layout.groups:
            logits[group.rows] = self.model(torch.stack([images[i] for i in group.members])).float()
        return logits


def evaluate_at(model: torch.nn.Module, folder: Path, short_side: int, batch: int, limit: int = 0) -> dict:
    """Loss, accuracy and count on the test split (its first ``limit`` images; 0: all) at native aspect, the short
    side at ``short_side``: vitpe's native views and evaluation loop."""
    index = open_index(folder, "test")
    index = Selection(index, range(min(limit, len(index)))) if limit else index
    loader = native_evaluation(index, short_side, batch, patch=PATCH, mean=list(MEAN), std=list(STD))
    return evaluate(OneSizeACall(model), loader, torch.device("cpu"), precision="fp32")


def find_folder(root: str, dataset: str) -> Path:
    try:
        return find_named_folder(root, dataset)
    except DataError as err:
        sys.exit(f"error: {err}")


def train(args: argparse.Namespace) -> int:
    from timm.data import ImageDataset
    from timm.data.naflex_loader import create_naflex_loader
    from timm.optim import create_optimizer_v2
    from timm.scheduler import CosineLRScheduler

    folder = find_folder(args.data_root, args.dataset)
    out = args.out
    torch.manual_seed(args.seed)
    dataset = ImageDataset(str(folder / "train"))
    classes = sorted(p.name for p in (folder / "train").iterdir() if p.is_dir())
    model = build_model(args.pos_embed, len(classes))
    optimizer = create_optimizer_v2(model, "adamw", lr=args.lr, weight_decay=0.05)
    loader = create_naflex_loader(dataset, patch_size=PATCH, train_seq_lens=SEQ_LENS, batch_size=args.batch_size,
                                  is_training=True, scale=(0.35, 1.0), ratio=(3 / 4, 4 / 3), hflip=0.5,
                                  color_jitter=0.0, interpolation="bicubic", mean=MEAN, std=STD,
                                  num_workers=args.workers, seed=args.seed, use_prefetcher=False, pin_memory=False,
                                  device=torch.device("cpu"), persistent_workers=False)
    steps = len(loader)
    total = args.epochs * steps
    warmup = min(3 * steps, max(total - 1, 0))  # train.py's: 3 epochs, the cosine after them
    scheduler = CosineLRScheduler(optimizer, t_initial=max(total - warmup, 1), lr_min=1e-5, warmup_t=warmup,
                                  warmup_lr_init=args.lr * 1e-3, warmup_prefix=True, t_in_epochs=False)
    start_epoch, elapsed = 0, 0.0
    if args.resume:
        saved = torch.load(out / "checkpoint.pt", weights_only=True)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        start_epoch, elapsed = saved["epoch"], saved["elapsed_s"]
        save_records(read_records(out / "metrics.jsonl")[:start_epoch], out / "metrics.jsonl")
    else:
        out.mkdir(parents=True, exist_ok=False)
        write_text_atomic(json.dumps({**{k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                                      "baseline": BASELINE, "seq_lens": SEQ_LENS}, indent=1) + "\n",
                          out / "config.json")
    for epoch in range(start_epoch, args.epochs):
        loader.dataset.set_epoch(epoch)  # the NaFlex wrapper draws its epoch's batches from it
        model.train()
        began = time.perf_counter()
        loss_sum = correct = seen = 0.0
        for step, (inputs, targets) in enumerate(loader):
            logits = model(inputs)
            loss = F.cross_entropy(logits, targets, label_smoothing=0.1)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step_update(epoch * steps + step + 1)
            loss_sum += loss.item() * len(targets)
            correct += (logits.argmax(-1) == targets).sum().item()
            seen += len(targets)
        train_s = time.perf_counter() - began
        result = evaluate_at(model, folder, 64, 128)
        elapsed += time.perf_counter() - began
        record = {"epoch": epoch + 1, "train_loss": loss_sum / seen, "train_acc": correct / seen,
                  "test_loss": result["loss"], "test_acc": result["acc"], "img_per_s": seen / train_s,
                  "elapsed_s": elapsed, "machine": described(), "baseline": BASELINE,
                  "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        save_atomic({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch + 1,
                     "elapsed_s": elapsed, "classes": classes}, out / "checkpoint.pt")
        append_record(record, out / "metrics.jsonl")
        print(f"epoch {epoch + 1}/{args.epochs}  train_loss {record['train_loss']:.4f}  test_acc {result['acc']:.4f}",
              flush=True)
    return 0


def evaluate_sizes(args: argparse.Namespace) -> int:
    run = args.evaluate
    config = json.loads((run / "config.json").read_text())
    saved = torch.load(run / "checkpoint.pt", weights_only=True)
    model = build_model(config["pos_embed"], len(saved["classes"]))
    model.load_state_dict(saved["model"])
    folder = find_folder(args.data_root, config["dataset"])
    records = []
    for size in args.sizes:
        result = evaluate_at(model, folder, size, args.batch_size, args.limit)
        records.append({"run": run.name, "pe": f"naflex_{config['pos_embed']}", "resolution": size,
                        "train_resolution": 64, "pe_resize": "timm", "accuracy": result["acc"],
                        "loss": result["loss"], "n": result["n"], "precision": "fp32", "aspect": "native"})
        print(f"{size} px: {100 * result['acc']:.2f}%", flush=True)
    write_text_atomic(json.dumps(records, indent=1) + "\n", run / "resolution.json")
    return 0


def sizes(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1 or any(v % PATCH for v in values):
        raise argparse.ArgumentTypeError(f"expected short sides in px, multiples of {PATCH}, e.g. 48,64,96")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="the run folder to train into")
    parser.add_argument("--resume", action="store_true", help="continue --out from its last finished epoch")
    parser.add_argument("--evaluate", type=Path, help="a finished run folder: evaluate it at --sizes")
    parser.add_argument("--sizes", type=sizes, default=[48, 64, 96, 128, 160, 192, 256, 320])
    parser.add_argument("--limit", type=int, default=0, help="--evaluate: the first N test images (0: all)")
    parser.add_argument("--pos-embed", choices=("learned", "rope_mixed"), default="learned")
    parser.add_argument("--dataset", choices=("imagewoof", "imagenette"), default="imagewoof",
                        help="the image folder under the data root (its official folder names)")
    parser.add_argument("--data-root", default=os.environ.get("VITPE_DATA", "./data"))
    parser.add_argument("--epochs", type=positive_int, default=35)
    parser.add_argument("--batch-size", type=positive_int, default=39,
                        help="images a batch of 144 patches (timm's loader: tokens a step = this x 144)")
    parser.add_argument("--lr", type=float, default=1.5e-3)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.evaluate:
        return evaluate_sizes(args)
    if args.out is None:
        parser.error("give --out RUN_DIR to train (or --evaluate RUN_DIR)")
    if args.resume != (args.out / "checkpoint.pt").is_file():
        parser.error(f"{args.out}: " + ("no checkpoint to resume" if args.resume else
                                        "already holds a run: --resume continues it"))
    if args.resume:  # the run's own settings; where its data is, how many epochs and threads: this command's
        saved = json.loads((args.out / "config.json").read_text())
        for key in ("pos_embed", "dataset", "batch_size", "lr", "seed"):
            setattr(args, key, saved[key])
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
