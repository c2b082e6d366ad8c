"""Position encodings for Transformers on 1D and 2D grids, all behind one interface.

Example::

    import vitpe.pe
    vitpe.pe.available()                                   # registered names
    pe = vitpe.pe.build("rope_axial", dim=192, heads=3, grid=(8, 8), num_prefix_tokens=1)
    hooks = pe.bind((8, 8)).layer(i)                       # once per forward, then block i's hooks
    x = hooks.add_to_tokens(x)                             # tokens site
    q, k = hooks.rotate_qk(q, k)                           # q,k site
    bias = hooks.attention_bias()                          # logits site: added to the attention scores

See :mod:`vitpe.pe.bound` for the hooks, :mod:`vitpe.pe.base` for the interface and :mod:`vitpe.pe.grid` for
the resize modes. Importing this package registers every PE (each module registers its class).
"""

from vitpe.pe.alibi import ALiBi
from vitpe.pe.attach import attach
from vitpe.pe.comrope import ComRoPE
from vitpe.pe.cpb import ContinuousPositionBias
from vitpe.pe.fire import FIRE
from vitpe.pe.learnable import LearnableEncoding
from vitpe.pe.liere import LieRE
from vitpe.pe.lookhere import LookHere
from vitpe.pe.none import NoEncoding
from vitpe.pe.pape import PaPE
from vitpe.pe.peg import PositionEncodingGenerator
from vitpe.pe.relbias import RelativePositionBias
from vitpe.pe.rope_axial import AxialRope
from vitpe.pe.rope_dinov3 import DinoV3Rope
from vitpe.pe.rope_mixed import MixedRope
from vitpe.pe.separable import SeparableEncoding
from vitpe.pe.sincos import SinCosEncoding
from vitpe.pe.string_rope import StringRope
from vitpe.pe.t5bias import T5RelativeBias
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
    # the PE classes (vitpe.pe.get(name) gives the one registered as name)
    "ALiBi", "AxialRope", "ComRoPE", "ContinuousPositionBias", "DinoV3Rope", "FIRE", "LearnableEncoding", "LieRE",
    "LookHere", "MixedRope", "NoEncoding", "PaPE", "PositionEncodingGenerator", "RelativePositionBias",
    "SeparableEncoding", "SinCosEncoding", "StringRope", "T5RelativeBias",
]
