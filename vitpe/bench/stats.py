"""Speed ratios from interleaved rounds, paired round by round, with a bootstrap confidence interval.

The benchmark times every variant once per round. On a shared virtual machine a memory-bound step jitters from one
step to the next (measured here: the same ViT step at 64 px over twelve consecutive steps, 3.2-4.5 s; a 64 MB copy
±6-12%, a matrix product ±2%), so a ratio of two medians over nine rounds can be off by several percent, and every
overhead shares the error of the one reference median. Two things make a figure trustworthy:

- the ratio is taken *within* each round (``reference[r] / times[r]``) and its median over rounds is the estimate,
  so a slow drift of the machine between rounds cancels;
- the rounds are resampled with replacement (a percentile bootstrap, seeded) to give an interval for that median, so
  a reader sees whether a difference of a few percent is one the run can resolve.
"""

from __future__ import annotations

import random
import statistics
from typing import Sequence

CONFIDENCE = 0.90
RESAMPLES = 2000


def paired_speed_ratio(times: Sequence[float], reference: Sequence[float], confidence: float = CONFIDENCE,
                       resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float, float]:
    """``(estimate, low, high)`` of how many times faster a variant runs than the reference (above 1: faster).

    ``times`` and ``reference`` are seconds per step of the two, round by round (the same rounds, same order). The
    estimate is the median over rounds of ``reference[r] / times[r]``; ``low`` and ``high`` bound the central
    ``confidence`` share of that median over ``resamples`` bootstrap resamples of the rounds.
    """
    if len(times) != len(reference) or not times:
        raise ValueError(f"need the same, non-zero number of rounds for both; got {len(times)} and {len(reference)}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie between 0 and 1, not {confidence}")
    ratios = [ref / t for t, ref in zip(times, reference)]
    draw = random.Random(seed).choices
    medians = sorted(statistics.median(draw(ratios, k=len(ratios))) for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = medians[int(tail * (resamples - 1))]
    high = medians[int(round((1 - tail) * (resamples - 1)))]
    return statistics.median(ratios), low, high
