"""Start a run from another vitpe run: ``model.init=run:RUN_DIR`` (its last checkpoint) or
``model.init=run:RUN_DIR@CHECKPOINT`` (e.g. ``best.pt``, a file in RUN_DIR or a path) -- to fine-tune a model at
another image size or sequence length, with its positions interpolated or extrapolated.

The architecture comes from the source run's config, its reference grid included: ``model.img_size`` (images) or
``model.max_len`` (text) stays the source's unless given, so the PE meets the new training size in the run's
``model.pe_resize`` mode -- ``interpolate`` squeezes the new grid into the trained positions (Position Interpolation,
DeiT's resampled table), ``extrapolate`` continues them, ``ntk`` and ``yarn`` scale the frequencies. Given explicitly,
a new reference size moves the PE's reference grid instead: learned tables are resampled once, on load (bicubic).
A different patch size is an error (the patch embedding would need resampling, FlexiViT's way). The optimiser and
the schedule start afresh; images keep the source's normalisation, text its vocabulary. The new run folder records
where it started in ``init.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vitpe.config import Config, ConfigError, config_from_dict, reference_length, reference_size
from vitpe.loading.checkpoint import CheckpointError, build_from_checkpoint, load_checkpoint
from vitpe.loading.convert import Converted
from vitpe.loading.pretrained import ARCHITECTURE_KEYS, Pretrained

PREFIX = "run:"


def parse_run_spec(spec: str) -> tuple[Path, Path]:
    """``"run:DIR"`` -> (DIR, DIR/checkpoint.pt); ``"run:DIR@FILE"`` -> (DIR, DIR/FILE, or FILE where that is a
    path of its own). A folder that is not a vitpe run, or a checkpoint that is not there, is a :class:`ConfigError`."""
    folder, _, file = spec[len(PREFIX):].partition("@")
    if not spec.startswith(PREFIX) or not folder:
        raise ConfigError(f"model.init {spec!r}: expected run:RUN_DIR or run:RUN_DIR@CHECKPOINT (e.g. "
                          f"run:runs/detail/rope_mixed_s0@best.pt)")
    run = Path(folder)
    if not (run / "config.yaml").is_file():
        raise ConfigError(f"model.init {spec!r}: {run} is not a vitpe run folder (no config.yaml); give the out_dir "
                          f"of a train.py run")
    checkpoint = run / (file or "checkpoint.pt")
    if file and not checkpoint.is_file() and Path(file).is_file():
        checkpoint = Path(file)
    if not checkpoint.is_file():
        raise ConfigError(f"model.init {spec!r}: no checkpoint at {checkpoint}; a run folder holds checkpoint.pt "
                          f"(the last epoch) and best.pt")
    return run, checkpoint


def load_run(spec: str) -> Pretrained:
    """The weights, architecture and data settings of the run of ``spec``, as a :class:`Pretrained`."""
    run, path = parse_run_spec(spec)
    try:
        ckpt = load_checkpoint(path)
        model = build_from_checkpoint(ckpt)
    except CheckpointError as err:
        raise ConfigError(f"model.init {spec!r}: {err}") from None
    source = config_from_dict(ckpt["config"], for_training=False)
    m = source.model
    kwargs: dict[str, Any] = {key: getattr(m, key) for key in ARCHITECTURE_KEYS}
    kwargs.update(pe=m.pe, pe_options=dict(m.pe_options), pe_resize=m.pe_resize)
    if source.task == "text":
        kwargs["max_len"] = reference_length(source)
    else:
        kwargs["img_size"] = reference_size(source)
    normalization = ckpt.get("normalization") or {"mean": [], "std": []}
    state = ckpt["train_state"] if isinstance(ckpt.get("train_state"), dict) else {}
    origin = {"spec": spec, "run": str(run), "checkpoint": str(path), "epoch": state.get("epoch"),
              "step": state.get("global_step"), "task": source.task, "classes": list(ckpt["classes"])}
    return Pretrained(spec, Converted(kwargs, model.state_dict()), list(normalization["mean"]),
                      list(normalization["std"]), {}, vocab=ckpt.get("vocab"), origin=origin)


def check_compatible(config: Config, source: Pretrained, given: set[str]) -> None:
    """A run started from ``source`` trains the same task with the same patch size; one clear line otherwise. The
    patch size is the source's unless the user set ``model.patch_size`` (in ``given``): a config's own default
    (4) says nothing about a patch-2 source."""
    origin = source.origin
    if origin.get("task") and origin["task"] != config.task:
        raise ConfigError(f"model.init {source.spec!r}: that run is a {origin['task']} model; this config trains "
                          f"task={config.task}")
    patch = source.converted.vit_kwargs.get("patch_size")
    if config.task == "image" and "model.patch_size" in given and config.model.patch_size != patch:
        raise ConfigError(f"model.patch_size={config.model.patch_size}, but {source.spec} was trained with patch "
                          f"{patch}; fine-tuning keeps the patch size (a new one would need its patch embedding "
                          f"resampled): drop model.patch_size, and change the image size instead")
