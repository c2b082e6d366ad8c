"""Train a ViT (or, with ``task: text``, the text classifier) with any registered position encoding.

    python train.py --config configs/cifar10.yaml [key=value ...]     e.g. model.pe=rope_mixed train.epochs=5
    python train.py --resume RUN_DIR                                   continue a run where it stopped
    torchrun --nproc_per_node=N train.py --config ...                  DistributedDataParallel

One process owns a run folder (RUN_DIR/.lock). SIGTERM or Ctrl-C stops after the current step with a checkpoint at
that step and exit code 75; --resume then continues exactly. Errors are one line (--debug shows the traceback);
exit codes in vitpe/cli/exits.py.

The run folder (``out_dir``) receives config.yaml (resolved), metrics.jsonl (one record per epoch),
checkpoint.pt (last, written atomically every epoch and every ``train.checkpoint_every`` steps) and best.pt;
text runs also vocab.json and data_stats.json (tokens per sequence in each split); a run started from another
(``model.init=run:DIR``) also init.json (which run, checkpoint, epoch and step).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
from timm.data import Mixup
from timm.utils import ModelEmaV3

from vitpe.atomic_files import write_text_atomic
from vitpe.cli.exits import add_debug_flag, run_cli
from vitpe.config import (Config, ConfigError, config_from_dict, dump_config, given_keys, load_config, to_dict,
                          validate)
from vitpe.data.from_config import RunData, build_run_data
from vitpe.data.text import Vocabulary
from vitpe.engine.batchnorm_stats import recompute_batchnorm_stats
from vitpe.engine.compiled import SizeCompiled, blank_images, blank_sequences, missing_compiler
from vitpe.engine.cpu_malloc import keep_freed_memory
from vitpe.engine.distributed import DistInfo, all_reduce_sum, init_distributed, shutdown
from vitpe.engine.global_batchnorm import synchronise_batchnorm
from vitpe.engine.loop import TrainState, evaluate, sync_every, train_one_epoch
from vitpe.engine.metrics_file import append_record, read_records, save_records
from vitpe.engine.optimizer import build_optimizer, build_scheduler
from vitpe.engine.precision import emulated_bf16_note, fast_in_float32_note, resolve_precision
from vitpe.engine.preemption import Preempted, StopRequests
from vitpe.engine.run_lock import RunLock, RunLockedError
from vitpe.loading.checkpoint import LAYOUT_ENTRIES, CheckpointError, load_checkpoint, save_atomic, upgrade_checkpoint
from vitpe.loading.init import load_init
from vitpe.loading.pretrained import apply_architecture, load_weights
from vitpe.machine import described
from vitpe.models.from_config import build_model, check_training_sizes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="YAML config (see configs/)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue the run saved in RUN_DIR")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (summary lines only)")
    add_debug_flag(parser)
    parser.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. train.epochs=5")
    args = parser.parse_intermixed_args(argv)  # overrides may come before or after the flags
    if not args.config and not args.resume:
        parser.error("give --config FILE (and optional key=value overrides) or --resume RUN_DIR")
    return args


def resolve_config(args: argparse.Namespace, notes: list[str]):
    """The run's config, and its checkpoint when resuming (a resume with a different config is an error); what the
    overrides changed beyond themselves (a progressive schedule scaled to ``train.epochs``) goes to ``notes``."""
    if not args.resume:
        return load_config(args.config, args.overrides, notes=notes), None
    ckpt = load_checkpoint(Path(args.resume) / "checkpoint.pt")
    config = config_from_dict(ckpt["config"])
    if args.config or args.overrides:
        asked = to_dict(load_config(args.config, [*args.overrides, f"out_dir={config.out_dir}"]))
        saved = to_dict(config)
        diff = [f"{s}.{k}" for s in saved if isinstance(saved[s], dict) for k in saved[s] if saved[s][k] != asked[s][k]]
        diff += [k for k in saved if not isinstance(saved[k], dict) and saved[k] != asked[k]]
        if diff:
            raise CheckpointError(f"{args.resume} was trained with another config (differs in {', '.join(diff)}); "
                                  f"resume it without --config/overrides, or start a new out_dir")
    config.out_dir = str(Path(args.resume))
    return config, ckpt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        with StopRequests() as stops:
            run(args, stops)

    return run_cli(body, debug=args.debug,
                   interrupted="stopped at once, without a new checkpoint; the last checkpoint is intact (--resume "
                               "continues from it)", go_on="--resume the run")


def lock_run_folder(out_dir: Path, dist_info: DistInfo, device: torch.device) -> RunLock | None:
    """Rank 0 takes the run folder's lock; every rank learns whether it could (and stops together if not)."""
    lock, failure = None, ""
    if dist_info.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        try:
            lock = RunLock(out_dir).acquire()
            if lock.message:
                print(lock.message, flush=True)
        except RunLockedError as err:
            failure = str(err)
    if all_reduce_sum([float(bool(failure))], device, dist_info)[0]:
        raise RunLockedError(failure or f"rank 0 could not lock {out_dir}")
    return lock


def run(args: argparse.Namespace, stops: StopRequests) -> None:
    # ---- config and devices
    notes: list[str] = []
    config, ckpt = resolve_config(args, notes)
    t = config.train
    if ckpt is not None and ckpt["train_state"]["epoch"] >= t.epochs:
        epochs = f"{t.epochs} epoch" + ("s" if t.epochs != 1 else "")
        print(f"{args.resume} has finished its {epochs}: nothing to resume. To train it further, start a new run "
              f"from it: python train.py --config CONFIG model.init=run:{args.resume} out_dir=NEW_DIR", flush=True)
        return
    device = torch.device("cuda" if t.device == "auto" and torch.cuda.is_available() else
                          "cpu" if t.device == "auto" else t.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device is cuda but no CUDA device is available; use train.device=cpu")
    if t.compile and (missing := missing_compiler(device)):
        raise ConfigError(missing)
    if t.threads:
        torch.set_num_threads(t.threads)
    for note in (fast_in_float32_note(device, t.precision), emulated_bf16_note(device, t.precision)):
        if note:
            notes.append(note)
    t.precision = resolve_precision(device, t.precision)  # saved resolved: a resumed or evaluated run computes alike
    keep_freed_memory(device)
    dist_info = init_distributed(device.type)
    if device.type == "cuda":
        device = torch.device("cuda", dist_info.local_rank)
    out_dir = Path(config.out_dir)
    created = not out_dir.exists()
    lock = lock_run_folder(out_dir, dist_info, device)
    try:
        if ckpt is None and (out_dir / "checkpoint.pt").exists():
            raise ConfigError(f"{out_dir} already holds a run; continue it with --resume {out_dir} or choose another "
                              f"out_dir")
        for note in notes if dist_info.is_main else ():
            print(note, flush=True)
        train(args, config, ckpt, device, dist_info, stops)
    finally:
        if lock is not None:
            lock.release()
            if created and not any(out_dir.iterdir()):  # stopped before writing anything: leave no empty folder
                out_dir.rmdir()
        shutdown(dist_info)


def keep_global_batch(config: Config, saved_world: int, world: int) -> str:
    """A run resumed on ``world`` processes after training on ``saved_world`` keeps its global batch: each process
    then takes ``global / world`` images a step (``train.batch_size`` is per process), so the steps, the learning-rate
    schedule and the sampler's place (the step within the epoch's permutation) carry on unchanged. Returns a note, or
    "" when nothing changes."""
    batch = config.train.batch_size
    if saved_world == world:
        return ""
    total = batch * saved_world
    if total % world:
        raise ConfigError(f"this run trained with a global batch of {total} ({saved_world} processes x {batch}), which "
                          f"{world} processes cannot share evenly: resume it on a number of processes that divides "
                          f"{total}")
    config.train.batch_size = total // world
    return (f"resumed on {world} process(es) after {saved_world}: train.batch_size {batch} -> {total // world} per "
            f"process, the same global batch of {total}; the epoch's permutation continues at the same step")


def recalibrate_batchnorm(models: list[torch.nn.Module], data, device: torch.device, precision: str,
                          verbose: bool) -> None:
    """``train.recalibrate_bn``: each model's BatchNorm statistics recomputed on the training images as the test
    loader sees them (its size, no augmentation)."""
    size = data.test.img_sizes[0]
    clean = data.train.as_evaluated(size, data.test.batch_size)
    for model in models:
        seen = recompute_batchnorm_stats(model, clean.epoch(), device, precision)
    if verbose:
        print(f"BatchNorm statistics recomputed on {seen} training images at {size[0]}x{size[1]} px", flush=True)


def evaluations(model: torch.nn.Module, ema: ModelEmaV3 | None, data: RunData, config: Config, device: torch.device,
                dist_info: DistInfo) -> dict:
    """An epoch's evaluation for its metrics record: test loss and accuracy (and the size the test loader ran at),
    validation's with ``data.val_split``, the EMA model's test accuracy with ``train.ema``."""
    precision = config.train.precision
    test = evaluate(model, data.test, device, dist_info, precision)
    record = {"test_loss": test["loss"], "test_acc": test["acc"]}
    if config.task == "image":  # the size the test loader ran at (vitpe.config.eval_size: the last training size)
        record["test_img_size"] = data.test.img_sizes[0][0]
    if data.val is not None:
        val = evaluate(model, data.val, device, dist_info, precision)
        record.update(val_loss=val["loss"], val_acc=val["acc"])
    if ema is not None:
        record["test_acc_ema"] = evaluate(ema.module, data.test, device, dist_info, precision)["acc"]
    return record


def train(args: argparse.Namespace, config, ckpt: dict | None, device: torch.device, dist_info: DistInfo,
          stops: StopRequests) -> None:
    t, out_dir = config.train, Path(config.out_dir)
    pretrained = None
    if ckpt is None and config.model.init:  # a timm model or a vitpe run sets the architecture and the normalisation
        given = given_keys(args.config, args.overrides)
        pretrained = load_init(config, given)
        notes = apply_architecture(config, pretrained, given)
        validate(config)
        for note in notes if dist_info.is_main else ():
            print(note, flush=True)

    # ---- data
    if ckpt is not None:
        note = keep_global_batch(config, ckpt["train_state"].get("world", 1), dist_info.world)
        if note and dist_info.is_main:
            print(note, flush=True)
    data = build_run_data(config, ckpt, device, rank=dist_info.rank, world=dist_info.world,
                          normalization=dict(mean=pretrained.mean, std=pretrained.std) if pretrained and
                          pretrained.mean else None, vocab=pretrained.vocab if pretrained else None)
    num_classes = len(data.classes)
    for split, stats in data.stats.items() if dist_info.is_main else ():
        print(f"{split}: {stats['n']} sequences, tokens per sequence mean {stats['mean']}, median "
              f"{stats['median']}, p95 {stats['p95']}, max {stats['max']}", flush=True)

    # ---- model, optimiser, schedule, EMA, mixup
    torch.manual_seed(t.seed)
    vocab = data.checkpoint_extras.get("vocab")
    model = build_model(config, num_classes, vocab)
    if pretrained is not None:
        notes = load_weights(model, pretrained, config)
        for note in notes if dist_info.is_main else ():
            print(note, flush=True)
    check_training_sizes(model, config)  # a PE that cannot work at a training size in its mode: before any step
    if dist_info.enabled:  # BatchNorm over the global batch, as one process would see it
        model = synchronise_batchnorm(model, device)
    model = model.to(device)
    optimizer = build_optimizer(config, model)
    scheduler = build_scheduler(config, optimizer, len(data.train))
    ema = ModelEmaV3(model, decay=t.ema) if t.ema > 0 else None
    mixup = Mixup(mixup_alpha=config.data.mixup, cutmix_alpha=config.data.cutmix,
                  label_smoothing=t.label_smoothing, num_classes=num_classes) \
        if config.data.mixup > 0 or config.data.cutmix > 0 else None
    state = TrainState(world=dist_info.world)
    if ckpt is not None:
        ckpt = upgrade_checkpoint(ckpt, model, optimizer)  # saved before the interleaved rotary pairs: reordered
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        if ema is not None:
            ema.module.load_state_dict(ckpt["ema"])
        state = TrainState(**ckpt["train_state"])
        state.world = dist_info.world
        if not dist_info.is_main:  # the saved running sums are already those of every rank: count them once
            state.loss_sum = state.correct = state.seen = 0.0
    train_model = model
    if t.compile:  # one static graph per training size, or per padded text width (vitpe.engine.compiled)
        examples = blank_sequences(data.train.widths()) if config.task == "text" else \
            blank_images(data.train.img_sizes, model.in_chans)
        train_model = SizeCompiled(model, examples, t.precision, mode=t.compile_mode)
    if dist_info.enabled:
        train_model = torch.nn.parallel.DistributedDataParallel(
            train_model, device_ids=[device.index] if device.type == "cuda" else None)

    # ---- run folder
    metrics_path = out_dir / "metrics.jsonl"
    if dist_info.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        dump_config(config, out_dir / "config.yaml")
        if vocab is not None:
            Vocabulary(vocab).save(out_dir / "vocab.json")
        if data.stats:
            write_text_atomic(json.dumps(data.stats, indent=1) + "\n", out_dir / "data_stats.json")
        if pretrained is not None and pretrained.origin:  # where a run started from another run
            write_text_atomic(json.dumps(pretrained.origin, indent=1) + "\n", out_dir / "init.json")
        kept = [r for r in read_records(metrics_path) if r["epoch"] <= state.epoch] if ckpt is not None else []
        save_records(kept, metrics_path)  # drop records past the checkpoint (and a line a crash cut short)

    def checkpoint(path: Path) -> None:  # called on every rank; rank 0 writes
        saved_state = dataclasses.asdict(state)
        if state.step_in_epoch:  # mid-epoch (a preemption, checkpoint_every): the epoch's time so far counts too,
            saved_state["elapsed_s"] += time.perf_counter() - started  # or a resumed run would report less time
        if dist_info.enabled:  # the running sums of all ranks, so a resumed epoch reports what an unbroken one would
            sums = all_reduce_sum([state.loss_sum, state.correct, state.seen], device, dist_info)
            saved_state.update(zip(("loss_sum", "correct", "seen"), sums))
        if dist_info.is_main:
            save_atomic({
                "config": to_dict(config), "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "ema": ema.module.state_dict() if ema is not None else None,
                "train_state": saved_state, "classes": data.classes, **data.checkpoint_extras,
                "torch": str(torch.__version__), **LAYOUT_ENTRIES,
            }, path)

    def stop_if_asked(s: TrainState, saved: bool) -> None:
        if stops.should_stop(device, dist_info):  # every rank answers the same, at the same step
            if not saved:
                checkpoint(out_dir / "checkpoint.pt")
            raise Preempted(f"preempted by {stops.name or 'a signal on another rank'} at epoch {s.epoch + 1}, step "
                            f"{s.step_in_epoch}: checkpoint written; continue with: python train.py --resume "
                            f"{out_dir}")

    checked_at = [state.global_step]  # the step of the last call: on a GPU the loop calls every few steps

    def on_step(s: TrainState) -> None:
        every = t.checkpoint_every
        saved = bool(every and s.global_step // every > checked_at[0] // every and s.step_in_epoch < len(data.train))
        checked_at[0] = s.global_step
        if saved:
            checkpoint(out_dir / "checkpoint.pt")
        stop_if_asked(s, saved)

    # ---- loop
    rate_key = "seq_per_s" if config.task == "text" else "img_per_s"
    machine = described(device, dist_info.world)  # every epoch says what ran it: times compare on one kind only
    while state.epoch < t.epochs:
        started = time.perf_counter()  # when this epoch (or its resumed part) began; checkpoint() reads it too
        train_metrics = train_one_epoch(
            train_model, data.train, optimizer, scheduler, state, seed=t.seed, label_smoothing=t.label_smoothing,
            grad_clip=t.grad_clip, mixup=mixup, ema=ema, dist_info=dist_info, device=device, on_step=on_step,
            progress=not args.no_progress, rate_key=rate_key, precision=t.precision, sync_steps=sync_every(device))
        last_epoch = state.epoch + 1 == t.epochs
        if t.recalibrate_bn and last_epoch:  # evaluated with clean statistics
            recalibrate_batchnorm([model] + ([ema.module] if ema is not None else []), data, device, t.precision,
                                  dist_info.is_main)
        record = {"epoch": state.epoch + 1, "step": state.global_step, **train_metrics}
        if t.img_size_epochs:  # progressive resizing: the epoch's training size
            record["img_size"] = data.train.size_of_epoch(state.epoch)[0]
        evaluated = last_epoch or (state.epoch + 1) % t.eval_every == 0
        if evaluated:
            record.update(evaluations(model, ema, data, config, device, dist_info))
        state.elapsed_s += time.perf_counter() - started
        record.update(lr=optimizer.param_groups[0]["lr"], elapsed_s=state.elapsed_s, machine=machine,
                      finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))  # runs side by side?
        state.epoch, state.step_in_epoch = state.epoch + 1, 0
        state.loss_sum = state.correct = state.seen = 0.0
        score = record.get("val_acc", record.get("test_acc", -1.0))  # an epoch without evaluation is never the best
        is_best = score > state.best_acc
        state.best_acc = max(state.best_acc, score)
        if dist_info.is_main:
            append_record(record, metrics_path)
        checkpoint(out_dir / "checkpoint.pt")
        if is_best:
            checkpoint(out_dir / "best.pt")
        if dist_info.is_main:
            tested = f"test_loss {record['test_loss']:.4f}  test_acc {record['test_acc']:.4f}  " if evaluated else ""
            print(f"epoch {record['epoch']}/{t.epochs}  train_loss {record['train_loss']:.4f}  "
                  f"train_acc {record['train_acc']:.4f}  {tested}{record[rate_key]:.0f} {rate_key[:-6]}/s  "
                  f"{record['elapsed_s']:.0f}s", flush=True)
        if state.epoch < t.epochs:
            stop_if_asked(state, saved=True)


if __name__ == "__main__":
    sys.exit(main())
