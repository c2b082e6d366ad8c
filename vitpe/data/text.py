"""Text data: a whitespace vocabulary, token sets padded in memory, and SST-2 in its GLUE tsv layout.

A :class:`TextSet` holds ``tokens`` int64 (N, Lmax) right-padded with ``PAD_ID``, ``lengths`` (N,), ``labels`` (N,) and
class names. Token ids 0-2 are the specials ``<pad>``, ``<unk>`` and ``<cls>`` in every vocabulary (the text model
prepends ``<cls>`` itself, so data never contains it).
"""

from __future__ import annotations

import csv
import json
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import torch

from vitpe.atomic_files import write_text_atomic
from vitpe.data.datasets import DataError

PAD, UNK, CLS = "<pad>", "<unk>", "<cls>"
SPECIALS = (PAD, UNK, CLS)
PAD_ID, UNK_ID, CLS_ID = 0, 1, 2


class Vocabulary:
    """Token strings <-> ids; ids 0, 1, 2 are ``<pad>``, ``<unk>``, ``<cls>``. Unknown words map to ``<unk>``."""

    def __init__(self, tokens: Sequence[str]) -> None:
        tokens = list(tokens)
        if tuple(tokens[:3]) != SPECIALS:
            raise DataError(f"a vocabulary must start with {list(SPECIALS)}; got {tokens[:3]}")
        if len(set(tokens)) != len(tokens):
            raise DataError("the vocabulary has duplicate tokens")
        self.tokens = tokens
        self.index = {t: i for i, t in enumerate(tokens)}

    @classmethod
    def build(cls, texts: Iterable[str], min_freq: int = 1, max_size: int = 0) -> "Vocabulary":
        """Words of ``texts`` (split on whitespace) seen at least ``min_freq`` times, most frequent first (ties in
        alphabetical order, so the vocabulary is the same on every machine), at most ``max_size`` entries in all."""
        counts = Counter(word for text in texts for word in text.split())
        words = sorted((w for w, c in counts.items() if c >= min_freq and w not in SPECIALS),
                       key=lambda w: (-counts[w], w))
        if max_size:
            words = words[: max(max_size - len(SPECIALS), 0)]
        return cls([*SPECIALS, *words])

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, text: str) -> list[int]:
        return [self.index.get(word, UNK_ID) for word in text.split()]

    def decode(self, ids: Iterable[int]) -> str:
        return " ".join(self.tokens[i] for i in ids if i != PAD_ID)

    def save(self, path: str | Path) -> None:
        write_text_atomic(json.dumps(self.tokens, ensure_ascii=False, indent=0) + "\n", path)

    @classmethod
    def load(cls, path: str | Path) -> "Vocabulary":
        try:
            tokens = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
            raise DataError(f"cannot read the vocabulary {path} ({err})") from None
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise DataError(f"{path} is not a vocabulary (expected a JSON list of strings)")
        return cls(tokens)


@dataclass
class TextSet:
    tokens: torch.Tensor  # (N, Lmax) int64, right-padded with PAD_ID
    lengths: torch.Tensor  # (N,) int64, real tokens per row (>= 1)
    labels: torch.Tensor  # (N,) int64
    classes: list[str]

    def __len__(self) -> int:
        return len(self.labels)

    def _take(self, rows: slice) -> "TextSet":
        lengths = self.lengths[rows]
        width = int(lengths.max()) if len(lengths) else 0
        return TextSet(self.tokens[rows, :width], lengths, self.labels[rows], self.classes)

    def limit(self, n: int) -> "TextSet":
        """The first ``n`` sequences (all when ``n`` is 0)."""
        return self if n <= 0 else self._take(slice(0, n))

    def split(self, n_holdout: int) -> tuple["TextSet", "TextSet"]:
        """(rest, last ``n_holdout`` sequences): a deterministic validation split carved from the end."""
        cut = len(self) - n_holdout
        if n_holdout <= 0 or cut <= 0:
            raise DataError(f"cannot hold out {n_holdout} of {len(self)} sequences")
        return self._take(slice(0, cut)), self._take(slice(cut, None))

    def length_stats(self) -> dict[str, float]:
        """Token counts per sequence: mean, median, 95th percentile, max."""
        values = sorted(self.lengths.tolist())
        return {"n": len(values), "mean": round(statistics.fmean(values), 2), "median": statistics.median(values),
                "p95": values[min(int(0.95 * len(values)), len(values) - 1)], "max": values[-1]}


def pad_sequences(sequences: Sequence[Sequence[int]], labels: Sequence[int], classes: list[str],
                  max_len: int = 0) -> TextSet:
    """Right-pad token id lists into a :class:`TextSet`, truncating each to ``max_len`` tokens when it is > 0."""
    if max_len:
        sequences = [s[:max_len] for s in sequences]
    lengths = torch.tensor([max(len(s), 1) for s in sequences], dtype=torch.long)  # an empty text keeps one <pad>
    tokens = torch.full((len(sequences), int(lengths.max()) if len(sequences) else 0), PAD_ID, dtype=torch.long)
    for row, seq in enumerate(sequences):
        tokens[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    return TextSet(tokens, lengths, torch.tensor(list(labels), dtype=torch.long), classes)


SST2_CLASSES = ["negative", "positive"]
SST2_SPLITS = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}


def read_sst2(root: str | Path, split: str) -> tuple[list[str], list[int]]:
    """Sentences and labels of an SST-2 split from ``root/sst2/<split>.tsv`` (header ``sentence<TAB>label``)."""
    if split not in SST2_SPLITS:
        raise DataError(f"unknown SST-2 split {split!r}; choose one of {list(SST2_SPLITS)}")
    path = Path(root) / "sst2" / SST2_SPLITS[split]
    if not path.is_file():
        raise DataError(f"SST-2 not found: expected {path} (GLUE SST-2 tsv files train.tsv, dev.tsv, test.tsv with "
                        f"a 'sentence<TAB>label' header). Put them under <data.root>/sst2/ or set VITPE_DATA")
    sentences, labels = [], []
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None or [h.strip() for h in header[:2]] != ["sentence", "label"]:
            raise DataError(f"{path}: expected the header 'sentence<TAB>label', got {header!r}")
        for line, row in enumerate(reader, start=2):
            if len(row) < 2 or row[1].strip() not in ("0", "1"):
                raise DataError(f"{path}, line {line}: expected 'sentence<TAB>0 or 1', got {row!r}")
            sentences.append(row[0])
            labels.append(int(row[1]))
    if not sentences:
        raise DataError(f"{path} holds no examples")
    return sentences, labels


def load_sst2(root: str | Path, split: str, vocab: Vocabulary, max_len: int = 0) -> TextSet:
    """An SST-2 split encoded with ``vocab`` (truncated to ``max_len`` tokens when > 0)."""
    sentences, labels = read_sst2(root, split)
    return pad_sequences([vocab.encode(s) for s in sentences], labels, SST2_CLASSES, max_len)
