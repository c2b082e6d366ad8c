"""``none`` -- no position information: the order-blind control.

Site: none. With mean pooling a Transformer without PE is a function of the *set* of tokens (permutation invariant),
which is what every other PE is compared against. Works on any grid; holds no parameters.
"""

from __future__ import annotations

from vitpe.pe.base import PositionEncoding
from vitpe.pe.registry import register


@register("none")
class NoEncoding(PositionEncoding):
    """No position encoding. All three hooks are the identity / no bias."""

    site = "none"
