"""Models from saved weights: vitpe's own checkpoints (:mod:`~vitpe.loading.checkpoint`, with the upgrade of older
layouts in :mod:`~vitpe.loading.rotary_pairs`), and pretrained timm models converted with the same logits
(:mod:`~vitpe.loading.convert`, and ``model.init=timm:...`` in :mod:`~vitpe.loading.pretrained`)."""
