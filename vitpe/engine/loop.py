"""One training epoch and one evaluation pass."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from vitpe.data import step_seed
from vitpe.data.loader import ShardedBatches
from vitpe.engine.distributed import DistInfo, all_reduce_sum
from vitpe.engine.precision import autocast


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite."""


#: Steps between the host's reads of the running loss on a GPU: each read waits for the device, so reading every step
#: would keep the host from queueing the next step while the GPU runs this one. On the CPU there is nothing to wait
#: for, and the loss is read every step.
GPU_SYNC_EVERY = 25


def sync_every(device: torch.device) -> int:
    """How many steps the host lets the device run ahead between reads of the running sums."""
    return 1 if device.type == "cpu" else GPU_SYNC_EVERY


class PendingSums:
    """The loss and correct-prediction sums of the steps since the host last read them, kept on the device."""

    def __init__(self, device: torch.device) -> None:
        self.loss = torch.zeros((), device=device, dtype=torch.float64)
        self.correct = torch.zeros((), device=device, dtype=torch.float64)
        self.first_step: int | None = None

    def add(self, loss: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor, step: int) -> None:
        self.first_step = step if self.first_step is None else self.first_step
        self.loss += loss.detach().double() * len(labels)
        self.correct += (logits.detach().argmax(-1) == labels).sum()

    def read_into(self, state: TrainState, last_step: int) -> None:
        """Add the pending sums to ``state`` (one wait for the device), or raise :class:`NonFiniteLossError` naming the
        steps where the loss stopped being finite."""
        loss, correct = torch.stack([self.loss, self.correct]).tolist()
        if not math.isfinite(loss):
            steps = f"step {last_step}" if self.first_step == last_step else \
                f"one of steps {self.first_step}-{last_step}"
            raise NonFiniteLossError(
                f"the training loss became {loss} at epoch {state.epoch + 1}, {steps}; the last good checkpoint is "
                f"kept. Lower train.lr or raise train.warmup_epochs / train.grad_clip")
        state.loss_sum += loss
        state.correct += correct
        self.loss.zero_()
        self.correct.zero_()
        self.first_step = None


@dataclass
class TrainState:
    """Where a run stands; saved in every checkpoint."""

    epoch: int = 0  # epochs completed
    step_in_epoch: int = 0  # optimiser steps done in the current epoch
    global_step: int = 0
    best_acc: float = -1.0
    elapsed_s: float = 0.0
    world: int = 1  # processes that trained it (a resume on another number keeps the global batch)
    # running sums of the current epoch, so a mid-epoch resume reports the same epoch metrics
    loss_sum: float = 0.0
    correct: float = 0.0
    seen: float = 0.0


def forward(model: torch.nn.Module, inputs: torch.Tensor | tuple) -> torch.Tensor:
    """Logits for a batch's inputs: images, or a tuple such as (tokens, mask) unpacked into the model."""
    return model(*inputs) if isinstance(inputs, tuple) else model(inputs)


def train_one_epoch(model: torch.nn.Module, loader: ShardedBatches, optimizer: torch.optim.Optimizer, scheduler: Any,
                    state: TrainState, *, seed: int, label_smoothing: float, grad_clip: float,
                    mixup: Callable | None, ema: Any, dist_info: DistInfo, device: torch.device,
                    on_step: Callable[[TrainState], None] | None = None, progress: bool = True,
                    rate_key: str = "img_per_s", precision: str = "auto", sync_steps: int = 1) -> dict[str, float]:
    """Train ``state.epoch`` from ``state.step_in_epoch`` to its end; returns loss / accuracy / throughput (examples
    per second under ``rate_key``). Batches are ``(inputs, labels)``; a tuple of inputs is unpacked into the model.
    ``precision``: :mod:`vitpe.engine.precision`. The host reads the running loss every ``sync_steps`` steps and at
    the epoch's end (:func:`sync_every`); ``on_step`` is called there, with ``state`` up to date."""
    model.train()
    pending = PendingSums(device)
    start = time.perf_counter()
    done_examples = 0
    bar = tqdm(loader.epoch(state.epoch, state.step_in_epoch), total=len(loader), initial=state.step_in_epoch,
               desc=f"epoch {state.epoch + 1}", disable=not (progress and dist_info.is_main), leave=False,
               dynamic_ncols=True)
    for inputs, labels in bar:
        # dropout / drop-path (torch) and mixup (numpy) draw from generators seeded per step: resumable anywhere
        rng_seed = step_seed(seed, state.epoch, state.step_in_epoch, salt=99 + dist_info.rank)
        torch.manual_seed(rng_seed)
        np.random.seed(rng_seed % 2**32)
        targets = labels
        if mixup is not None:
            inputs, targets = mixup(inputs, labels)
        with autocast(device, precision):
            logits = forward(model, inputs)
            if targets.dim() == 2:  # soft targets from mixup / cutmix (smoothing already applied)
                loss = torch.sum(-targets * F.log_softmax(logits.float(), dim=-1), dim=-1).mean()
            else:
                loss = F.cross_entropy(logits.float(), targets, label_smoothing=label_smoothing)
        pending.add(loss, logits, labels, state.step_in_epoch)
        synced = (state.step_in_epoch + 1) % sync_steps == 0 or state.step_in_epoch + 1 == len(loader)
        if synced:  # before this step's update: a non-finite loss stops the run with the update unmade
            pending.read_into(state, state.step_in_epoch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        state.global_step += 1
        state.step_in_epoch += 1
        scheduler.step_update(state.global_step)
        if ema is not None:
            ema.update(model, step=state.global_step)
        state.seen += len(labels)
        done_examples += len(labels)
        if not synced:
            continue  # the device runs ahead; the host reads the sums at the next sync
        bar.set_postfix(loss=f"{state.loss_sum / state.seen:.3f}", acc=f"{state.correct / state.seen:.3f}",
                        img_s=f"{done_examples / (time.perf_counter() - start):.0f}")
        if on_step is not None:
            on_step(state)
    seconds = time.perf_counter() - start
    loss_sum, correct, seen, done = all_reduce_sum([state.loss_sum, state.correct, state.seen, done_examples],
                                                   device, dist_info)
    return {"train_loss": loss_sum / max(seen, 1), "train_acc": correct / max(seen, 1),
            rate_key: done / max(seconds, 1e-9)}


@torch.inference_mode()
def evaluate(model: torch.nn.Module, loader: ShardedBatches, device: torch.device,
             dist_info: DistInfo = DistInfo(), precision: str = "auto") -> dict[str, float]:
    """Mean cross-entropy and accuracy (a fraction) over the loader's examples (summed over ranks), computed in
    ``precision`` (:mod:`vitpe.engine.precision`)."""
    model.eval()
    loss_sum = correct = seen = 0.0
    for inputs, labels in loader.epoch(0):
        with autocast(device, precision):
            logits = forward(model, inputs).float()
        loss_sum += F.cross_entropy(logits, labels, reduction="sum").item()
        correct += (logits.argmax(-1) == labels).sum().item()
        seen += len(labels)
    loss_sum, correct, seen = all_reduce_sum([loss_sum, correct, seen], device, dist_info)
    return {"loss": loss_sum / max(seen, 1), "acc": correct / max(seen, 1), "n": int(seen)}
