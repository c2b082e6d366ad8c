"""Frequency scaling between "interpolate" and "extrapolate": the ``ntk`` and ``yarn`` resize modes.

A PE made of frequencies (sinusoidal, rotary) meets a grid larger than its reference one. ``extrapolate`` keeps
every frequency and lets positions continue (angles never seen in training); ``interpolate`` divides every frequency
by the scale ``s`` (positions squeezed into the trained range, local detail blurred). The two modes here keep the
high frequencies and interpolate the low ones, per axis on images (the scale of axis ``a`` is
``s_a = max(n_a / n_ref_a, 1)``: a smaller axis is not scaled), on integer positions as in ``extrapolate``:

* ``ntk`` (NTK-aware scaling, bloc97 2023): the frequency base ``b`` becomes ``b * s^(d / (d - 2))`` for rotary
  (or sinusoidal) dimension ``d`` per axis. For a ladder ``w_k = b^(-2k/d)`` that multiplies ``w_k`` by
  ``s^(-2k / (d - 2))``: the highest frequency is kept, the lowest divided by ``s``. Written per frequency,
  ``w * s^(-(d / (d - 2)) * e)`` with ``e = log(w_max / w) / log(b)`` clamped to ``[0, (d - 2) / d]``, it applies to
  learned frequencies too (RoPE-Mixed's, with its initial base).
* ``yarn`` (YaRN / NTK-by-parts, Peng et al. 2023): per frequency, ``r = L * w / (2 pi)`` turns over the reference
  extent ``L``; ``gamma = clamp((r - alpha) / (beta - alpha), 0, 1)`` and ``w' = gamma * w + (1 - gamma) * w / s``:
  a frequency that turns more than ``beta`` times over the trained extent has been seen at every phase and is kept,
  one that turns less than ``alpha`` times is interpolated, a ramp between. YaRN's LLM defaults (alpha 1, beta 32 for
  contexts of thousands of tokens) would interpolate every frequency of an 8 x 8 grid, whose fastest rotary
  frequency turns 1.3 times over 8 positions; vitpe's defaults are ``alpha = 1/4``, ``beta = 1``: a frequency that
  completes a full turn inside the trained extent is kept. Rotary PEs also scale q and k by the attention temperature
  ``0.1 ln(s_N) + 1`` (YaRN's), where ``s_N`` is the ratio of grid tokens to reference tokens (in 1D, YaRN's ``s``).

Both are the identity at scale 1, so at the reference grid (and on smaller grids) they are ``extrapolate``.
"""

from __future__ import annotations

import math
import torch

from vitpe.pe.grid import RESIZE_MODES, Grid, grid_scales

SCALED_MODES = ("ntk", "yarn")
YARN_ALPHA, YARN_BETA = 0.25, 1.0


def ntk_frequencies(freqs: torch.Tensor, scale: float, base: float, dim: int, highest: float = 1.0) -> torch.Tensor:
    """NTK-aware scaling of ``freqs`` (any shape, signed) for a ladder of base ``base`` over rotary dimension ``dim``
    whose highest frequency is ``highest``: ``w * s^(-(d / (d - 2)) * e)``, ``e = log(highest / |w|) / log(base)``
    clamped to ``[0, (d - 2) / d]``."""
    if scale == 1.0:
        return freqs
    reach = (dim - 2) / dim
    exponent = (torch.log(highest / freqs.abs().clamp_min(1e-30)) / math.log(base)).clamp(0.0, reach)
    return freqs * scale ** (-exponent / reach)


def yarn_frequencies(freqs: torch.Tensor, scale: float, extent: float, alpha: float = YARN_ALPHA,
                     beta: float = YARN_BETA) -> torch.Tensor:
    """YaRN's by-parts scaling of ``freqs`` (any shape, signed) for a reference extent ``extent`` (in the units the
    frequencies multiply): kept above ``beta`` turns over the extent, divided by ``scale`` below ``alpha``."""
    if scale == 1.0:
        return freqs
    turns = extent * freqs.abs() / (2 * math.pi)
    kept = ((turns - alpha) / (beta - alpha)).clamp(0.0, 1.0)
    return freqs * (kept + (1.0 - kept) / scale)


def yarn_temperature(grid: Grid, ref_grid: Grid) -> float:
    """YaRN's attention temperature ``0.1 ln(s) + 1``, ``s`` the ratio of grid tokens to reference tokens (at least
    1); q and k are each multiplied by it."""
    ratio = max(math.prod(grid) / math.prod(ref_grid), 1.0)
    return 0.1 * math.log(ratio) + 1.0


class ScaledFrequencies:
    """Mixin of the PEs made of frequencies: the ``ntk`` and ``yarn`` modes on top of the basic two, and YaRN's
    ramp (options ``yarn_alpha``, ``yarn_beta``). Call :meth:`_init_scaling` in ``__init__``; :meth:`scaled` gives an
    axis's frequencies in the current mode, :meth:`temperature` YaRN's q, k factor."""

    resize_modes = RESIZE_MODES

    def _init_scaling(self, yarn_alpha: float, yarn_beta: float) -> None:
        if not (0 <= yarn_alpha < yarn_beta and math.isfinite(yarn_beta)):
            raise ValueError(f"{self.name}: yarn_alpha and yarn_beta must satisfy 0 <= yarn_alpha < yarn_beta (turns "
                             f"over the reference extent), got {yarn_alpha} and {yarn_beta}")
        self.yarn_alpha, self.yarn_beta = float(yarn_alpha), float(yarn_beta)

    def scaled(self, freqs: torch.Tensor, grid: Grid, axis: int, *, base: float, dim: int, extent: float | None = None,
               highest: float = 1.0) -> torch.Tensor:
        """``freqs`` of grid axis ``axis`` as this PE's resize mode has them at ``grid`` (unchanged outside ``ntk``
        and ``yarn``): ``base`` and ``dim`` are the ladder's (for ``ntk``), ``extent`` the reference extent in the
        units the frequencies multiply (default: the reference grid's cells on that axis)."""
        mode: str = self.resize  # type: ignore[attr-defined]
        if mode not in SCALED_MODES:
            return freqs
        scale = grid_scales(grid, self.grid)[axis]  # type: ignore[attr-defined]
        if mode == "ntk":
            return ntk_frequencies(freqs, scale, base, dim, highest)
        extent = float(self.grid[axis]) if extent is None else extent  # type: ignore[attr-defined]
        return yarn_frequencies(freqs, scale, extent, self.yarn_alpha, self.yarn_beta)

    def temperature(self, grid: Grid) -> float:
        """YaRN's factor on q and k at ``grid`` in ``yarn`` mode, else 1."""
        return yarn_temperature(grid, self.grid) if self.resize == "yarn" else 1.0  # type: ignore[attr-defined]

