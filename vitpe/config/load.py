"""A config from a mapping, a YAML file and overrides, resolved and checked; back to a mapping, a file and the key
that groups the seeds of one experiment."""

from __future__ import annotations

import dataclasses
import json
import os
import typing
from pathlib import Path
from typing import Any

import yaml

from vitpe.atomic_files import write_text_atomic
from vitpe.config.schedule import all_warmup_note, fit_size_schedule, reference_grid_note
from vitpe.config.schema import Config, ConfigError
from vitpe.config.strict import fill, parse_override, set_dotted, typed_override
from vitpe.config.validate import validate


def config_from_dict(data: dict[str, Any], overrides: typing.Sequence[str] = (), *, for_training: bool = True,
                     notes: list[str] | None = None) -> Config:
    """Build a :class:`Config` from a nested mapping plus dotted overrides, strictly. ``for_training=False``: the
    config of a saved run, to rebuild its model or name its group; the ranges of training-only values (learning
    rates, augmentation, ...) are then not checked, so a run saved before a check was added still evaluates.

    An override of the epochs or sizes of a progressive-resizing schedule adapts the schedule the mapping gives
    (:func:`fit_size_schedule`); what it did is appended to ``notes``, for the run's log."""
    tree = _as_tree(data)
    parsed = [typed_override(text) for text in overrides]
    for key, value in parsed:
        set_dotted(tree, key, value)
    config = fill(Config, tree)
    fitted = fit_size_schedule(config.train, {key for key, _ in parsed})
    validate(config, for_training=for_training)
    trained = for_training and config.task == "image"
    for note in (fitted, all_warmup_note(config.train) if for_training else None,
                 reference_grid_note(config) if trained else None):
        if note and notes is not None:
            notes.append(note)
    return config


def _as_tree(data: dict[str, Any]) -> dict[str, Any]:
    return yaml.safe_load(yaml.safe_dump(data)) or {}  # a deep copy with plain containers


def _read_yaml(path: str | os.PathLike | None) -> dict[str, Any]:
    if path is None:
        return {}
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} not found")
    try:
        return yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {err}") from None


def load_config(path: str | os.PathLike | None, overrides: typing.Sequence[str] = (), *,
                notes: list[str] | None = None) -> Config:
    """Read a YAML file (or start from defaults when ``path`` is None) and apply ``key=value`` overrides (what they
    changed beyond themselves is appended to ``notes``: :func:`config_from_dict`)."""
    return config_from_dict(_read_yaml(path), overrides, notes=notes)


def given_keys(path: str | os.PathLike | None, overrides: typing.Sequence[str] = ()) -> set[str]:
    """The dotted keys that a YAML file and overrides set explicitly (``{"model.dim", "train.lr", ...}``)."""
    tree = _as_tree(_read_yaml(path))
    for text in overrides:
        set_dotted(tree, *parse_override(text))

    def walk(node: Any, prefix: str) -> set[str]:
        if not isinstance(node, dict) or prefix.count(".") >= 2:
            return {prefix.rstrip(".")}
        return set().union(*(walk(v, f"{prefix}{k}.") for k, v in node.items())) if node else {prefix.rstrip(".")}

    return set().union(*(walk(v, f"{k}.") for k, v in tree.items())) if tree else set()


def to_dict(config: Config) -> dict[str, Any]:
    return dataclasses.asdict(config)


def group_key(config: dict[str, Any] | Config) -> str:
    """A resolved config without ``train.seed``, where the run happened (``out_dir``, ``data.root``,
    ``train.threads``) and how often it was evaluated (``train.eval_every``): runs that share it are the same
    experiment with other seeds.

    The config is filled through the current dataclasses first, so a run saved before a key was added (with its
    default value) groups with a run saved after.
    """
    tree = to_dict(config if isinstance(config, Config) else config_from_dict(config, for_training=False))
    tree.pop("out_dir", None)
    tree["data"].pop("root", None)
    for key in ("seed", "threads", "eval_every"):
        tree["train"].pop(key, None)
    return json.dumps(tree, sort_keys=True)


def dump_config(config: Config, path: str | os.PathLike) -> None:
    """Write the resolved config as YAML, atomically (temporary file + rename)."""
    write_text_atomic(yaml.safe_dump(to_dict(config), sort_keys=False), path)
