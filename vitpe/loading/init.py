"""``model.init``: the weights a run starts from -- a pretrained timm model (``timm:NAME[@FILE]``,
:mod:`vitpe.loading.pretrained`) or a vitpe run (``run:RUN_DIR[@CHECKPOINT]``, :mod:`vitpe.loading.run_init`)."""

from __future__ import annotations

from vitpe.config import Config, ConfigError
from vitpe.loading import pretrained, run_init
from vitpe.loading.pretrained import Pretrained


def load_init(config: Config, given: set[str]) -> Pretrained:
    """The weights ``config.model.init`` names, checked against the run's task and the keys the user set
    (``given``, dotted)."""
    spec = config.model.init
    if spec.startswith(run_init.PREFIX):
        source = run_init.load_run(spec)
        run_init.check_compatible(config, source, given)
        return source
    if spec.startswith(pretrained.PREFIX):
        return pretrained.load_pretrained(spec)
    raise ConfigError(f"model.init {spec!r}: give timm:NAME[@WEIGHTS_FILE] or run:RUN_DIR[@CHECKPOINT]")
