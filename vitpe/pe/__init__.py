"""Position encodings for Transformers on 1D and 2D grids, all behind one interface.

Example::

    import vitpe.pe
    vitpe.pe.available()                                   # registered names
    pe = vitpe.pe.build("rope_axial", dim=192, heads=3, grid=(8, 8), num_prefix_tokens=1)
    hooks = pe.bind((8, 8)).layer(i)                       # once per forward, then block i's hooks
    x = hooks.add_to_tokens(x)                             # tokens site
    q, k = hooks.rotate_qk(q, k)                           # q,k site
    bias = hooks.attention_bias()                          # logits site: added to the attention scores

See :mod:`vitpe.pe.bound` for the hooks, :mod:`vitpe.pe.base` for the interface and :mod:`vitpe.pe.grid` for the resize modes.
"""

from vitpe.pe import (  # noqa: F401  (each module registers its encoding)
    alibi,
    comrope,
    cpb,
    fire,
    learnable,
    liere,
    lookhere,
    none,
    pape,
    peg,
    relbias,
    rope_axial,
    rope_dinov3,
    rope_mixed,
    separable,
    string_rope,
    sincos,
    t5bias,
)
from vitpe.pe.attach import attach
from vitpe.pe.base import SITES, PositionEncoding, ResizeError
from vitpe.pe.bound import BoundEncoding, LayerHooks
from vitpe.pe.grid import RESIZE_MODES, Grid
from vitpe.pe.mixed import GridLayout, MixedState
from vitpe.pe.registry import available, build, get, options, register
from vitpe.pe.resample import resample_table

__all__ = [
    "SITES", "RESIZE_MODES", "BoundEncoding", "Grid", "GridLayout", "LayerHooks", "MixedState", "PositionEncoding",
    "ResizeError",
    "attach", "available", "build", "get", "options", "register", "resample_table",
]
