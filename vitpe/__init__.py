"""vitpe: pluggable position encodings for Vision Transformers, with resolution transfer built in."""

from vitpe import pe
from vitpe.loading.convert import from_timm
from vitpe.models import TextClassifier, ViT

__version__ = "0.1.0"
__all__ = ["TextClassifier", "ViT", "from_timm", "pe", "__version__"]
