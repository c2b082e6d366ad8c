"""Models built on the PE interface: the ViT backbone (and its timm presets)."""

from vitpe.models import presets  # noqa: F401  (registers the vitpe_* names in timm)
from vitpe.models.attention import Attention, Block
from vitpe.models.vit import ViT

__all__ = ["Attention", "Block", "ViT"]
