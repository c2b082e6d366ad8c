"""Paired speed ratios and their bootstrap interval (vitpe.bench.stats)."""

import random

import pytest

from vitpe.bench.stats import paired_speed_ratio


def test_a_drift_shared_by_a_round_cancels_in_the_paired_ratio():
    rng = random.Random(1)
    drift = [rng.uniform(0.7, 1.4) for _ in range(9)]  # the machine 30% faster or 40% slower from round to round
    reference = [1.0 * d for d in drift]
    slower = [1.1 * d for d in drift]  # a variant 10% slower in every round
    ratio, low, high = paired_speed_ratio(slower, reference)
    assert ratio == pytest.approx(1 / 1.1) and low == pytest.approx(1 / 1.1) and high == pytest.approx(1 / 1.1)


def test_the_interval_widens_with_jitter_and_holds_the_true_ratio():
    rng = random.Random(2)

    def jittered(level: float, spread: float, rounds: int) -> list[float]:
        return [level * rng.uniform(1 - spread, 1 + spread) for _ in range(rounds)]

    quiet = paired_speed_ratio(jittered(1.05, 0.01, 15), jittered(1.0, 0.01, 15))
    noisy = paired_speed_ratio(jittered(1.05, 0.10, 15), jittered(1.0, 0.10, 15))
    for ratio, low, high in (quiet, noisy):
        assert low <= ratio <= high and low < 1 / 1.05 < high
    assert noisy[2] - noisy[1] > 3 * (quiet[2] - quiet[1])


def test_the_interval_is_reproducible_and_bad_input_is_refused():
    times, reference = [1.0, 1.2, 0.9, 1.1, 1.05], [1.0, 1.0, 1.0, 1.1, 0.95]
    assert paired_speed_ratio(times, reference) == paired_speed_ratio(times, reference)
    with pytest.raises(ValueError, match="same, non-zero number of rounds"):
        paired_speed_ratio([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="same, non-zero number of rounds"):
        paired_speed_ratio([], [])
    with pytest.raises(ValueError, match="confidence"):
        paired_speed_ratio(times, reference, confidence=1.5)
