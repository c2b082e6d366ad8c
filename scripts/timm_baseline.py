"""The anchor vitpe's CIFAR-10 recipe is measured against: a plain training loop around timm's VisionTransformer.

    VITPE_DATA=/path/to/data python scripts/timm_baseline.py --out runs/timm_baseline [--seed 0] [--epochs 10]

ViT dim 128, depth 6, 4 heads, MLP ratio 2, patch 4, global average pooling and no class token; AdamW lr 1e-3, weight
decay 0.05 (not on norms, biases or the position table: timm's own parameter groups), label smoothing 0.1, gradient
clipping 1.0, one warm-up epoch then cosine to 1e-5 per step, batch 128, reflect-pad-4 random crop + horizontal flip
applied to whole batches, the full test split evaluated after every epoch. It reads the same CIFAR-10 files as train.py
and writes OUT/metrics.jsonl in train.py's format (``test_acc`` a fraction, ``elapsed_s`` training + evaluation,
``machine`` the CPU and threads that ran the epoch). ``--precision bf16`` runs the same loop under bf16 autocast (the
counterpart of ``train.precision=bf16``), labelled ``timm plain loop, bf16``: a row of its own, never the recipe's
time anchor.

After every epoch it also writes OUT/checkpoint.pt (model, optimiser, step, elapsed time and the generator that draws
orders, crops and flips), so ``--resume`` continues an interrupted baseline from its last finished epoch with exactly
the numbers of an uninterrupted run; ``elapsed_s`` counts the time of the runs only, not the pause.
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
from timm.models.vision_transformer import VisionTransformer
from timm.optim import create_optimizer_v2
from timm.scheduler import CosineLRScheduler

from vitpe.atomic_files import write_text_atomic
from vitpe.cli.arg_types import non_negative_int, positive_int
from vitpe.data import DataError, channel_stats, load_cifar
from vitpe.data.loader import random_crop, random_hflip
from vitpe.engine.metrics_file import append_record, read_records, save_records
from vitpe.engine.precision import autocast
from vitpe.loading.checkpoint import save_atomic
from vitpe.machine import described

BASELINE = "timm plain loop"  # the label scripts/summarise.py gives these runs


def augment(images: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Reflect-pad by 4, crop back to 32 at a random offset per image, flip half (the batched crop and flip vitpe's
    loader uses); uint8 (B, 3, 32, 32) in and out."""
    return random_hflip(random_crop(images, 4, g, mode="reflect"), g)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--data-root", default=os.environ.get("VITPE_DATA", "./data"))
    parser.add_argument("--epochs", type=positive_int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-limit", type=non_negative_int, default=0,
                        help="use the first N training images (0 = all)")
    parser.add_argument("--test-limit", type=non_negative_int, default=0, help="(0 = all)")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                        help="fp32: the plain loop; bf16: bf16 autocast on the CPU too (train.precision=bf16's "
                             "counterpart), a row of its own: 'timm plain loop, bf16'")
    parser.add_argument("--resume", action="store_true", help="continue the baseline in --out from its checkpoint")
    args = parser.parse_args(argv)
    checkpoint_path, metrics_path = args.out / "checkpoint.pt", args.out / "metrics.jsonl"
    if args.resume and not checkpoint_path.exists():
        print(f"error: {args.out} holds no baseline checkpoint to resume; run without --resume", file=sys.stderr)
        return 2
    if not args.resume and metrics_path.exists():
        print(f"error: {args.out} already holds a baseline run; choose another --out (or --resume it)",
              file=sys.stderr)
        return 2
    try:
        train, test = load_cifar(args.data_root, "cifar10", "train"), load_cifar(args.data_root, "cifar10", "test")
    except DataError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    train, test = train.limit(args.train_limit), test.limit(args.test_limit)
    mean, std = (torch.tensor(s).view(1, 3, 1, 1) for s in channel_stats(train.images))  # (1, 3, 1, 1) each

    torch.manual_seed(args.seed)
    model = VisionTransformer(img_size=32, patch_size=4, num_classes=10, embed_dim=128, depth=6, num_heads=4,
                              mlp_ratio=2.0, class_token=False, global_pool="avg")
    batch, steps = 128, len(train) // 128
    optimizer = create_optimizer_v2(model, "adamw", lr=1e-3, weight_decay=0.05)
    scheduler = CosineLRScheduler(optimizer, t_initial=max((args.epochs - 1) * steps, 1), lr_min=1e-5, warmup_t=steps,
                                  warmup_lr_init=1e-5, warmup_prefix=True, t_in_epochs=False)
    config = {**{k: v for k, v in vars(args).items() if k != "resume"}, "out": str(args.out),
              "baseline": BASELINE if args.precision == "fp32" else f"{BASELINE}, {args.precision}"}
    device = torch.device("cpu")
    g = torch.Generator().manual_seed(args.seed)
    step, first_epoch, elapsed_before = 0, 0, 0.0
    if args.resume:
        state = torch.load(checkpoint_path, map_location="cpu", weights_only=True)
        if state["config"] != config:
            print(f"error: {checkpoint_path} was written with other options ({state['config']}); resume with those",
                  file=sys.stderr)
            return 2
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        g.set_state(state["generator"])
        step, first_epoch, elapsed_before = state["step"], state["epoch"], state["elapsed_s"]
        save_records(read_records(metrics_path)[:first_epoch], metrics_path)  # drop a record past the checkpoint
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(json.dumps(config, indent=1) + "\n", args.out / "config.json")
    started = time.perf_counter() - elapsed_before
    for epoch in range(first_epoch, args.epochs):
        model.train()
        order = torch.randperm(len(train), generator=g)
        loss_sum = correct = 0.0
        for i in range(steps):
            idx = order[i * batch:(i + 1) * batch]
            x = (augment(train.images[idx], g) / 255 - mean) / std
            with autocast(device, args.precision):
                logits = model(x)
                loss = F.cross_entropy(logits.float(), train.labels[idx], label_smoothing=0.1)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step += 1
            scheduler.step_update(step)
            loss_sum += loss.item() * len(idx)
            correct += (logits.argmax(-1) == train.labels[idx]).sum().item()
        model.eval()
        right = 0
        with torch.inference_mode(), autocast(device, args.precision):
            for i in range(0, len(test), 500):
                x = (test.images[i:i + 500].float() / 255 - mean) / std
                right += (model(x).argmax(-1) == test.labels[i:i + 500]).sum().item()
        record = {"epoch": epoch + 1, "step": step, "train_loss": loss_sum / (steps * batch),
                  "train_acc": correct / (steps * batch), "test_acc": right / len(test),
                  "elapsed_s": time.perf_counter() - started,
                  "machine": described(),  # what ran the epoch: wall times compare only on one kind of machine
                  "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}  # and when
        append_record(record, metrics_path)
        save_atomic({"config": config, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                     "generator": g.get_state(), "step": step, "epoch": epoch + 1,
                     "elapsed_s": record["elapsed_s"]}, checkpoint_path)
        print(f"epoch {epoch + 1}/{args.epochs}  train_loss {record['train_loss']:.4f}  test_acc "
              f"{record['test_acc']:.4f}  {record['elapsed_s']:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
