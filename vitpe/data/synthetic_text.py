"""Synthetic order-sensitive sequence tasks that a bag of words cannot solve.

Sequences are random filler words with a few marker tokens ``A`` and ``B`` placed among them. The number of A's and
of B's (1 to ``max_marks`` each) is drawn the same way for both labels, so the multiset of tokens says nothing about
the label: a model without positions stays at chance, and a model that learned absolute positions at one length has
to cope with positions it never saw when tested on longer sequences.

- ``order``: label 1 iff some A comes before some B (label 0: every B precedes every A).
- ``adjacent``: label 1 iff the bigram "A B" occurs (label 0: no A is directly followed by a B; "B A" may occur).

Labels alternate 0, 1, 0, 1 ... before a seeded shuffle, so every set is balanced to within one example.
"""

from __future__ import annotations

import numpy as np

from vitpe.data.text import SPECIALS, TextSet, Vocabulary, pad_sequences

TASKS = ("order", "adjacent")
A_ID, B_ID = len(SPECIALS), len(SPECIALS) + 1
CLASSES = {"order": ["B before A", "A before B"], "adjacent": ["no A B", "A B"]}


def synthetic_vocabulary(size: int) -> Vocabulary:
    """Specials, the markers ``A`` and ``B``, then filler words ``w0``, ``w1``, ... (``size`` entries in all)."""
    if size < len(SPECIALS) + 3:
        raise ValueError(f"a synthetic vocabulary needs at least {len(SPECIALS) + 3} entries, got {size}")
    return Vocabulary([*SPECIALS, "A", "B", *(f"w{i}" for i in range(size - len(SPECIALS) - 2))])


def _positive(task: str, positions: np.ndarray, marks: np.ndarray) -> bool:
    """Does the arrangement (sorted ``positions`` holding the markers ``marks``) have label 1?"""
    if task == "order":
        return bool(np.any(marks == A_ID) and np.any(marks == B_ID)
                    and positions[marks == A_ID].min() < positions[marks == B_ID].max())
    follows = (marks[:-1] == A_ID) & (marks[1:] == B_ID) & (positions[1:] - positions[:-1] == 1)
    return bool(follows.any())


def _arrange(task: str, label: int, length: int, n_a: int, n_b: int, rng: np.random.Generator
             ) -> tuple[np.ndarray, np.ndarray]:
    """Marker positions (sorted) and markers with the requested label."""
    marks = np.array([A_ID] * n_a + [B_ID] * n_b)
    if task == "adjacent" and label == 1:  # plant one "A B", scatter the rest anywhere else
        start = int(rng.integers(0, length - 1))
        free = np.setdiff1d(np.arange(length), [start, start + 1])
        rest = rng.choice(free, size=n_a + n_b - 2, replace=False)
        positions = np.concatenate([[start, start + 1], rest])
        order = np.argsort(positions)
        return positions[order], np.concatenate([[A_ID, B_ID], marks[1:-1]])[order]
    if task == "order" and label == 0:  # every B before every A
        return np.sort(rng.choice(length, size=n_a + n_b, replace=False)), marks[::-1].copy()
    for _ in range(1000):  # rejection: the wanted label has probability >= 1/2 here
        positions = np.sort(rng.choice(length, size=n_a + n_b, replace=False))
        shuffled = rng.permutation(marks)
        if _positive(task, positions, shuffled) == bool(label):
            return positions, shuffled
    raise RuntimeError(f"could not draw a {task} example with label {label} at length {length}")


def synthetic_text(task: str, n: int, min_len: int, max_len: int, vocab_size: int = 64, max_marks: int = 3,
                   seed: int = 0) -> TextSet:
    """``n`` sequences of the ``task`` with lengths uniform in [``min_len``, ``max_len``], deterministic in ``seed``."""
    if task not in TASKS:
        raise ValueError(f"unknown synthetic task {task!r}; choose one of {list(TASKS)}")
    if not 2 * max_marks <= min_len <= max_len:
        raise ValueError(f"need 2 * max_marks ({2 * max_marks}) <= min_len ({min_len}) <= max_len ({max_len})")
    if n < 1:
        raise ValueError(f"need at least one example, got n={n}")
    rng = np.random.default_rng(seed)
    n_fillers = len(synthetic_vocabulary(vocab_size)) - B_ID - 1
    sequences, labels = [], []
    for i in range(n):
        label = i % 2
        length = int(rng.integers(min_len, max_len + 1))
        n_a, n_b = (int(v) for v in rng.integers(1, max_marks + 1, size=2))
        seq = rng.integers(B_ID + 1, B_ID + 1 + n_fillers, size=length)
        positions, marks = _arrange(task, label, length, n_a, n_b, rng)
        seq[positions] = marks
        sequences.append(seq.tolist())
        labels.append(label)
    order = rng.permutation(n)
    return pad_sequences([sequences[i] for i in order], [labels[i] for i in order], CLASSES[task])


def label_of(task: str, tokens: list[int]) -> int:
    """The true label of a token id sequence (an independent check of the generator)."""
    a = [i for i, t in enumerate(tokens) if t == A_ID]
    b = [i for i, t in enumerate(tokens) if t == B_ID]
    if task == "order":
        return int(bool(a) and bool(b) and min(a) < max(b))
    return int(any(i + 1 in b for i in a))
