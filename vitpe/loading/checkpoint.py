"""Checkpoints: written atomically, read with ``weights_only=True``, enough to rebuild the model on their own."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch

from vitpe.atomic_files import write_atomic
from vitpe.config import config_from_dict
from vitpe.loading.rotary_pairs import CHECKPOINT_KEY, LAYOUT, reorder_rotary_rows
from vitpe.models.from_config import build_model

#: What every checkpoint vitpe writes says about its layout (read back by :func:`upgrade_checkpoint`).
LAYOUT_ENTRIES = {CHECKPOINT_KEY: LAYOUT}

#: Entries only training reads back (optimizer moments, the schedule, the epoch, the wall time): evaluation does not.
TRAINING_ONLY = ("optimizer", "scheduler", "train_state")


class CheckpointError(RuntimeError):
    """A checkpoint is missing, corrupt or does not fit."""


def save_atomic(obj: Any, path: str | os.PathLike) -> None:
    """``torch.save`` ``obj`` to ``path`` atomically (:func:`write_atomic`)."""
    write_atomic(path, lambda f: torch.save(obj, f))


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint safely (``weights_only=True``); a missing or corrupt file is a :class:`CheckpointError`."""
    path = Path(path)
    if path.is_dir():
        path = path / "checkpoint.pt"
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} not found")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # noqa: BLE001 -- unpickling errors come in many types
        raise CheckpointError(f"checkpoint {path} is corrupt or not a vitpe checkpoint ({type(err).__name__}: "
                              f"{str(err).splitlines()[0] if str(err) else ''})") from None
    if not isinstance(ckpt, dict) or "config" not in ckpt or "model" not in ckpt:
        raise CheckpointError(f"checkpoint {path} has no 'config'/'model' entries: not a vitpe checkpoint")
    return ckpt


def upgrade_checkpoint(ckpt: dict[str, Any], model: torch.nn.Module,
                       optimizer: torch.optim.Optimizer | None = None) -> dict[str, Any]:
    """``ckpt`` in the current layout for ``model`` (built from its config): unchanged when it is already; a
    checkpoint of a rotary model saved before the interleaved pairs with its q and k rows reordered
    (:mod:`vitpe.loading.rotary_pairs`); a layout this vitpe does not know is a :class:`CheckpointError`."""
    layout = ckpt.get(CHECKPOINT_KEY)
    if layout == LAYOUT:
        return ckpt
    if layout is not None:
        raise CheckpointError(f"the checkpoint's rotary pairs are {layout!r}, a layout this vitpe does not know (it "
                              f"knows {LAYOUT!r}); read it with the vitpe version that wrote it")
    return reorder_rotary_rows(ckpt, model, optimizer)


def build_from_checkpoint(ckpt: dict[str, Any], use_ema: bool = False) -> torch.nn.Module:
    """The model a loaded checkpoint was trained with, its weights (the EMA weights when asked and present) loaded."""
    config = config_from_dict(ckpt["config"], for_training=False)
    model = build_model(config, num_classes=len(ckpt["classes"]), vocab=ckpt.get("vocab"))
    ckpt = upgrade_checkpoint(ckpt, model)  # a RoPE model saved before the interleaved pairs: rows reordered
    model.load_state_dict(ckpt["ema"] if use_ema and ckpt.get("ema") is not None else ckpt["model"])
    return model


def evaluation_fingerprint(ckpt: dict[str, Any]) -> str:
    """SHA-256 of what evaluating ``ckpt`` reads: its config (less ``out_dir``), weights, EMA weights, classes,
    normalisation and layout -- not :data:`TRAINING_ONLY`. A run retrained to the same weights (same config and seed
    on a CPU) has the same fingerprint although its file differs (the wall time is saved with it)."""
    digest = hashlib.sha256()
    kept = {key: value for key, value in ckpt.items() if key not in TRAINING_ONLY}
    kept["config"] = {key: value for key, value in ckpt["config"].items() if key != "out_dir"}
    _digest_value(kept, digest)
    return digest.hexdigest()


def _digest_value(value: Any, digest: "hashlib._Hash") -> None:
    """Feed ``value`` (nested dicts and lists of tensors and JSON values) to ``digest``, keys in sorted order."""
    if isinstance(value, torch.Tensor):
        flat = value.detach().cpu().contiguous().reshape(-1)  # 0-d tensors too: (n,) bytes
        digest.update(f"tensor {value.dtype} {tuple(value.shape)}:".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    elif isinstance(value, dict):
        digest.update(b"{")
        for key in sorted(value, key=str):
            digest.update(json.dumps(str(key)).encode() + b":")
            _digest_value(value[key], digest)
        digest.update(b"}")
    elif isinstance(value, (list, tuple)):
        digest.update(b"[")
        for item in value:
            _digest_value(item, digest)
        digest.update(b"]")
    else:
        digest.update(json.dumps(value, sort_keys=True, default=repr).encode() + b",")


def model_from_checkpoint(path: str | os.PathLike, use_ema: bool = True) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Rebuild the model a checkpoint file was trained with and load its weights (EMA weights when present)."""
    ckpt = load_checkpoint(path)
    return build_from_checkpoint(ckpt, use_ema), ckpt
