"""Orders of scored names: each name's rank, and Spearman's rank correlation of two scorings (the recipe's PE order
against the 3-epoch grid's and s-chh's; one table's order against another's in a sentence)."""

from __future__ import annotations

import statistics


def ranks(scores: dict[str, float]) -> dict[str, int]:
    """Each name's place, 1 for the highest score (names with equal scores in the order given)."""
    return {name: rank for rank, name in enumerate(sorted(scores, key=lambda n: -scores[n]), start=1)}


def tied_ranks(scores: dict[str, float]) -> dict[str, float]:
    """Each name's rank, 1 for the highest score, names with equal scores sharing the mean of their places (numbers
    as a table shows them tie: 77.2 and 77.2)."""
    places: dict[float, list[int]] = {}
    for name, place in ranks(scores).items():
        places.setdefault(scores[name], []).append(place)
    return {name: statistics.fmean(places[scores[name]]) for name in scores}


def spearman(a: dict[str, float], b: dict[str, float]) -> float:
    """Spearman's rank correlation of two scorings over the names they share: the Pearson correlation of their ranks,
    ties sharing a mean rank; an error when fewer than three are shared, where it says nothing."""
    shared = [k for k in a if k in b]
    if len(shared) < 3:
        raise ValueError(f"a rank correlation needs three or more shared names, not {len(shared)}: {shared}")
    rank_a, rank_b = tied_ranks({k: a[k] for k in shared}), tied_ranks({k: b[k] for k in shared})
    return statistics.correlation([rank_a[k] for k in shared], [rank_b[k] for k in shared])
