"""The model a config describes: a ViT, or for ``task: text`` a TextClassifier."""

from __future__ import annotations

from vitpe.config import Config, reference_size
from vitpe.models.text import TextClassifier
from vitpe.models.vit import ViT


def build_model(config: Config, num_classes: int, vocab: list[str] | None = None) -> ViT | TextClassifier:
    """The config's model: a ViT, or for ``task: text`` a TextClassifier over the tokens of ``vocab``."""
    m = config.model
    common = dict(num_classes=num_classes, dim=m.dim, depth=m.depth, heads=m.heads, mlp_ratio=m.mlp_ratio, pe=m.pe,
                  pe_options=dict(m.pe_options), pe_resize=m.pe_resize, pool=m.pool, drop_path=m.drop_path,
                  drop_rate=m.drop_rate)
    if config.task == "text":
        if vocab is None:
            raise ValueError("a text model needs its vocabulary")
        return TextClassifier(len(vocab), max_len=config.data.max_len, **common)
    return ViT(img_size=reference_size(config), patch_size=m.patch_size, class_token=m.class_token,
               reg_tokens=m.reg_tokens, layer_scale_init=m.layer_scale_init, fc_norm=m.fc_norm, norm_eps=m.norm_eps,
               qkv_bias=m.qkv_bias, **common)
