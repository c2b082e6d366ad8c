"""Checks of a PE's numeric options when it is built (not at its first forward, or never): each names the PE and
the option, e.g. ``rope_axial: theta must be a positive number, got -1``."""

from __future__ import annotations

import math


def _finite_number(value: float, label: str, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{label} must be {what}, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{label} must be {what}, got {value!r}")
    return number


def positive_number(value: float, label: str) -> float:
    """``value`` as a finite float > 0 (a frequency base), or a ValueError naming ``label`` ("PE: option")."""
    number = _finite_number(value, label, "a positive number")
    if not number > 0:
        raise ValueError(f"{label} must be a positive number, got {value!r}")
    return number


def non_negative_number(value: float, label: str) -> float:
    """``value`` as a finite float >= 0 (an initial standard deviation), or a ValueError naming ``label``."""
    number = _finite_number(value, label, ">= 0")
    if not number >= 0:
        raise ValueError(f"{label} must be >= 0, got {value!r}")
    return number
