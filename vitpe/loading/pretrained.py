"""Start a run from a pretrained timm model: ``model.init=timm:NAME`` (weights from timm's hub) or
``model.init=timm:NAME@FILE`` (a local weights file, loaded by timm's own loader).

The architecture comes from the pretrained model: its keys (width, depth, heads, patch, pooling, register tokens,
LayerScale, norms) fill the run's ``model`` section, and one of them given explicitly with another value is an error.
What may differ from the pretrained model:

* the classes: a data set with another number of classes gets a new head;
* the image size (``model.img_size`` / ``train.img_sizes``): learned tables are resampled on load;
* the PE: ``model.pe`` given explicitly and different from the pretrained one replaces it (e.g. ``model.pe=rope_mixed``
  on an absolute-PE model: the table is dropped, the rotation added and trained from its init). ``pe_options`` and
  ``pe_resize`` given explicitly override the converted ones.

Images are normalised with the pretrained model's mean and std (timm's data config), not the data set's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from vitpe.config import Config, ConfigError
from vitpe.loading.convert import Converted, convert
from vitpe.loading.hub_reach import offline_weights

PREFIX = "timm:"
#: ModelConfig keys that a converted model determines (ViT keyword of the same name).
ARCHITECTURE_KEYS = ("dim", "depth", "heads", "mlp_ratio", "patch_size", "pool", "class_token", "reg_tokens",
                     "layer_scale_init", "fc_norm", "norm_eps", "qkv_bias", "mlp", "mlp_norm", "stem")
PE_KEYS = ("pe", "pe_options", "pe_resize")


@dataclass
class Pretrained:
    """Weights to start a run from: a pretrained timm model converted for vitpe (and timm's data config for it), or
    a vitpe run (:mod:`vitpe.loading.run_init`: its vocabulary for text, and where it comes from in ``origin``)."""

    spec: str
    converted: Converted
    mean: list[float]
    std: list[float]
    data_config: dict[str, Any]
    vocab: list[str] | None = None
    origin: dict[str, Any] = field(default_factory=dict)


def parse_spec(spec: str, where: str = "model.init") -> tuple[str, str | None]:
    """``"timm:NAME"`` -> (NAME, None); ``"timm:NAME@FILE"`` -> (NAME, FILE); errors start with ``where`` (the key
    or command that was given ``spec``)."""
    if not spec.startswith(PREFIX) or len(spec) == len(PREFIX):
        raise ConfigError(f"{where} {spec!r}: expected timm:MODEL_NAME or timm:MODEL_NAME@WEIGHTS_FILE "
                          f"(e.g. timm:vit_small_patch16_rope_mixed_224.naver_in1k)")
    name, _, file = spec[len(PREFIX):].partition("@")
    if file and not Path(file).is_file():
        raise ConfigError(f"{where} {spec!r}: no weights file at {file}; give the path of a file of {name}'s "
                          f"weights (.safetensors, .pth or .bin)")
    return name, file or None


def refuse_code_in_weights(file: str, spec: str, where: str = "model.init") -> None:
    """Read a pickled weights file with ``weights_only=True`` before timm does: timm 1.0.31 reads it so, but vitpe
    allows older timm and torch, where a pickle's code would run. A safetensors file holds no code."""
    if Path(file).suffix == ".safetensors":
        return
    try:
        torch.load(file, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 -- any failure of the safe reader: refused, nothing in the file ran
        # torch's message goes on to suggest weights_only=False; keep only what the file holds that is refused
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        why = next((line for line in lines if "GLOBAL" in line or line.startswith("Unsupported")),
                   lines[0].split(". ")[0] if lines else "")
        raise ConfigError(f"{where} {spec!r}: {file} is not a plain weights file that can be read safely "
                          f"({type(err).__name__}: {why}); nothing in it was run. Give the model's .safetensors, "
                          f".pth or .bin weights") from None


def load_pretrained(spec: str, where: str = "model.init") -> Pretrained:
    """Create the timm model of ``spec`` with its weights and convert it; errors start with ``where``."""
    import timm
    from timm.data import resolve_data_config

    name, file = parse_spec(spec, where)
    kwargs: dict[str, Any] = {"pretrained": True}
    if file is None and timm.is_model(name):
        file = offline_weights(name, spec, where)  # no hub: the cached file at once, or one line, not a minute
    if file is not None:
        refuse_code_in_weights(file, spec, where)
        kwargs["pretrained_cfg_overlay"] = {"file": file}
    try:
        model = timm.create_model(name, **kwargs)
    except RuntimeError as err:
        if "Unknown model" in str(err) or "unknown model" in str(err).lower():
            raise ConfigError(f"{where} {spec!r}: timm has no model {name!r}") from None
        raise ConfigError(f"{where} {spec!r}: timm could not load the weights ({err}); give a local weights file "
                          f"as timm:{name}@/path/to/weights") from None
    except (OSError, ValueError) as err:
        source = f"from {file}" if file else "(no network, or not downloadable here?)"
        raise ConfigError(f"{where} {spec!r}: the weights could not be loaded {source}: {err}; give a local weights "
                          f"file as timm:{name}@/path/to/weights") from None
    data_config = resolve_data_config({}, model=model)
    return Pretrained(spec, convert(model), list(data_config["mean"]), list(data_config["std"]), data_config)


def apply_architecture(config: Config, pretrained: Pretrained, given: set[str]) -> list[str]:
    """Fill ``config.model`` from the pretrained model; ``given`` holds the dotted keys the user set. Returns lines
    saying what was taken and what changes."""
    vit = pretrained.converted.vit_kwargs
    m = config.model
    for key in ARCHITECTURE_KEYS:
        value = vit[key]
        if f"model.{key}" in given and getattr(m, key) != value:
            raise ConfigError(f"model.{key}={getattr(m, key)!r} but {pretrained.spec} has {value!r}; drop the key "
                              f"(the architecture comes from the pretrained model)")
        setattr(m, key, value)
    notes = [f"model: architecture from {pretrained.spec}"]
    for key, derived in (("img_size", "train.img_sizes"), ("max_len", "data.max_len")):  # a vitpe run's reference
        if key not in vit or not pretrained.origin:  # a timm model's tables are resampled to the training size
            continue
        if f"model.{key}" in given and getattr(m, key) != vit[key]:
            notes.append(f"model: reference {key} {vit[key]} -> {getattr(m, key)} (learned position tables are "
                         f"resampled once, on load)")
        else:
            setattr(m, key, vit[key])
            notes.append(f"model: the reference {key} stays {vit[key]}: the PE meets other sizes in its "
                         f"{m.pe_resize if 'model.pe_resize' in given else vit.get('pe_resize')} mode "
                         f"(model.{key} moves it)")
    if "model.pe" not in given or m.pe == vit["pe"]:
        m.pe = vit["pe"]
        if "model.pe_options" not in given:
            m.pe_options = dict(vit.get("pe_options", {}))
        if "model.pe_resize" not in given:
            m.pe_resize = vit.get("pe_resize", "interpolate")
    else:
        notes.append(f"model: position encoding {vit['pe']} replaced by {m.pe} (trained from its initialisation)")
    return notes


def load_weights(model: torch.nn.Module, pretrained: Pretrained, config: Config) -> list[str]:
    """Load the converted weights into the run's freshly built model: all of them, except the head when the classes
    differ and the PE when the run replaced it. Anything else that does not fit is an error."""
    state = dict(pretrained.converted.state_dict)
    notes = []
    if config.model.pe != pretrained.converted.vit_kwargs["pe"]:
        state = {k: v for k, v in state.items() if not k.startswith("pe.")}
    head = model.state_dict().get("head.weight")
    if head is not None and ("head.weight" not in state or state["head.weight"].shape != head.shape):
        state = {k: v for k, v in state.items() if not k.startswith("head.")}
        notes.append(f"model: new head for {head.shape[0]} classes")
    missing, unexpected = model.load_state_dict(state, strict=False)
    fresh = [k for k in missing if not (k.startswith("pe.") or k.startswith("head."))]
    if fresh or unexpected:
        raise ConfigError(f"{pretrained.spec}: the converted weights do not fit the run's model (missing "
                          f"{fresh[:4]}, unexpected {unexpected[:4]})")
    return notes
