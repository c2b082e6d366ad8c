"""Models built on the PE interface: the ViT backbone (and its timm presets) and the 1D text classifier."""

from vitpe.models import presets  # noqa: F401  (registers the vitpe_* names in timm)
from vitpe.models.attention import Attention, Block
from vitpe.models.text import TextClassifier
from vitpe.models.vit import ViT

__all__ = ["Attention", "Block", "TextClassifier", "ViT"]
