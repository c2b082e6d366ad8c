"""argparse types for counts and sizes: a bad number is refused as it is parsed, in one line that names the flag
(``argument --batch-size: must be a whole number >= 1, not '0'``), instead of a traceback deep in a run or a silent
fallback (a batch of 0 quietly becoming 1, a negative limit quietly meaning "all")."""

from __future__ import annotations

import argparse


def _whole_number(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= {least}, not {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be a whole number >= {least}, not {text!r}")
    return value


def positive_int(text: str) -> int:
    """A count that must be at least 1 (a batch size, a number of rounds, a model width)."""
    return _whole_number(text, 1)


def non_negative_int(text: str) -> int:
    """A count where 0 has a meaning of its own ("all", "none", "in this process")."""
    return _whole_number(text, 0)


def positive_float(text: str) -> float:
    """A ratio or scale that must be above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number > 0, not {text!r}") from None
    if not value > 0 or value == float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, not {text!r}")
    return value


def positive_int_list(text: str) -> tuple[int, ...]:
    """``"32,64"`` -> ``(32, 64)``: comma-separated whole numbers, each at least 1, at least one of them."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"must be whole numbers >= 1, comma-separated (e.g. 32,64), not {text!r}")
    try:
        return tuple(positive_int(p) for p in parts)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"must be whole numbers >= 1, comma-separated (e.g. 32,64), not {text!r}") from None
