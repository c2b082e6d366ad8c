"""Orders of scored names: each name's rank, and Spearman's rank correlation of two scorings (the recipe's PE order
against the 3-epoch grid's and s-chh's; one table's order against another's in a sentence)."""

from __future__ import annotations


def ranks(scores: dict[str, float]) -> dict[str, int]:
    """Each name's rank, 1 for the highest score."""
    return {name: rank for rank, name in enumerate(sorted(scores, key=lambda n: -scores[n]), start=1)}


def spearman(a: dict[str, float], b: dict[str, float]) -> float:
    """Spearman's rank correlation of two scorings over the names they share (no ties expected: mean accuracies);
    an error when fewer than three are shared, where the correlation says nothing."""
    shared = [k for k in a if k in b]
    if len(shared) < 3:
        raise ValueError(f"a rank correlation needs three or more shared names, not {len(shared)}: {shared}")
    rank_a, rank_b = ranks({k: a[k] for k in shared}), ranks({k: b[k] for k in shared})
    n = len(shared)
    return 1 - 6 * sum((rank_a[k] - rank_b[k]) ** 2 for k in shared) / (n * (n * n - 1))
