"""vitpe: pluggable position encodings for Vision Transformers, with resolution transfer built in.

``import vitpe.pe`` needs torch alone: the models (``vitpe.ViT``, ``vitpe.TextClassifier``) and timm conversion
(``vitpe.from_timm``), which need timm, are imported when first used. Where timm is imported already
(``import timm, vitpe``), vitpe's model presets are registered in it at once, as they are whenever vitpe's models
are imported."""

import sys
from importlib import import_module
from typing import Any

from vitpe import pe

if "timm" in sys.modules:  # timm in use: its create_model knows vitpe's presets from here on
    import_module("vitpe.models")

__version__ = "0.1.0"
__all__ = ["TextClassifier", "ViT", "from_timm", "pe", "__version__"]

#: The names imported on first use, and the module each comes from.
LAZY = {"ViT": "vitpe.models", "TextClassifier": "vitpe.models", "from_timm": "vitpe.loading.convert"}


def __getattr__(name: str) -> Any:
    if name in LAZY:
        value = getattr(import_module(LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'vitpe' has no attribute {name!r}")
