"""The model a config describes: a ViT, or for ``task: text`` a TextClassifier; and whether its PE works at the
config's training sizes."""

from __future__ import annotations

import torch

from vitpe.config import Config, ConfigError, reference_length, reference_size
from vitpe.models.text import TextClassifier
from vitpe.models.vit import ViT
from vitpe.pe import ResizeError


def build_model(config: Config, num_classes: int, vocab: list[str] | None = None) -> ViT | TextClassifier:
    """The config's model: a ViT, or for ``task: text`` a TextClassifier over the tokens of ``vocab``."""
    m = config.model
    common = dict(num_classes=num_classes, dim=m.dim, depth=m.depth, heads=m.heads, mlp_ratio=m.mlp_ratio, pe=m.pe,
                  pe_options=dict(m.pe_options), pe_resize=m.pe_resize, pool=m.pool, drop_path=m.drop_path,
                  drop_rate=m.drop_rate, mlp=m.mlp, mlp_norm=m.mlp_norm, pe_combine=m.pe_combine, pos_drop=m.pos_drop)
    if config.task == "text":
        if vocab is None:
            raise ValueError("a text model needs its vocabulary")
        return TextClassifier(len(vocab), max_len=reference_length(config), **common)
    return ViT(img_size=reference_size(config), patch_size=m.patch_size, class_token=m.class_token,
               reg_tokens=m.reg_tokens, layer_scale_init=m.layer_scale_init, fc_norm=m.fc_norm, norm_eps=m.norm_eps,
               qkv_bias=m.qkv_bias, stem=m.stem, **common)


def check_training_sizes(model: ViT | TextClassifier, config: Config) -> None:
    """Raise a :class:`ConfigError` naming the size where ``model``'s PE cannot work in its resize mode at one of the
    config's training sizes, or at its evaluation size (a learned table asked to extrapolate to a larger grid),
    before any training step. Draws nothing from the random streams."""
    if config.task == "text":
        grids = [(config.data.max_len,)]
    else:
        p = config.model.patch_size
        grids = [(size // p, size // p) for size in dict.fromkeys([*config.train.img_sizes, reference_size(config)])]
    pe, was_training = model.pe, model.pe.training
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        pe.eval()
        try:
            for grid in grids:
                pe.prepare(grid)
        except ResizeError as err:
            raise ConfigError(f"model.pe {config.model.pe} cannot work at the training grid {grid} in the "
                              f"{pe.resize} mode: {err}") from None
        finally:
            pe.train(was_training)
