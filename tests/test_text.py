"""The text side: vocabulary, SST-2 reader, synthetic tasks, loader, and the TextClassifier with every 1D PE."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
import torch

import vitpe.pe
from vitpe import TextClassifier
from vitpe.data import DataError
from vitpe.data.synthetic_text import A_ID, B_ID, TASKS, label_of, synthetic_text
from vitpe.data.text import CLS_ID, PAD_ID, UNK_ID, Vocabulary, load_sst2, pad_sequences, read_sst2
from vitpe.data.text_loader import TextBatchLoader

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("VITPE_DATA", ROOT / ".." / "shared" / "data"))
PES_1D = [name for name in vitpe.pe.available() if 1 in vitpe.pe.get(name).grid_dims]
needs_sst2 = pytest.mark.skipif(not (DATA / "sst2" / "train.tsv").is_file(), reason="SST-2 not in VITPE_DATA")


# ------------------------------------------------------------------------------------------------------ vocabulary
def test_vocabulary_is_deterministic_and_round_trips(tmp_path):
    texts = ["the cat sat", "the dog sat", "a cat"]
    vocab = Vocabulary.build(texts)
    assert vocab.tokens[:3] == ["<pad>", "<unk>", "<cls>"]
    assert vocab.tokens[3:] == ["cat", "sat", "the", "a", "dog"]  # by count, ties alphabetical
    assert vocab.encode("the zebra sat") == [vocab.index["the"], UNK_ID, vocab.index["sat"]]
    assert vocab.decode(vocab.encode("the cat sat") + [PAD_ID]) == "the cat sat"
    vocab.save(tmp_path / "vocab.json")
    assert Vocabulary.load(tmp_path / "vocab.json").tokens == vocab.tokens
    assert Vocabulary.build(texts, min_freq=2).tokens[3:] == ["cat", "sat", "the"]
    assert len(Vocabulary.build(texts, max_size=5)) == 5


def test_bad_vocabulary_files_are_data_errors(tmp_path):
    (tmp_path / "v.json").write_text("{not json")
    with pytest.raises(DataError, match="cannot read the vocabulary"):
        Vocabulary.load(tmp_path / "v.json")
    (tmp_path / "v.json").write_text('["a", "b"]')
    with pytest.raises(DataError, match="must start with"):
        Vocabulary.load(tmp_path / "v.json")


def test_pad_sequences_right_pads_and_truncates():
    data = pad_sequences([[5, 6, 7], [8], []], [0, 1, 0], ["n", "p"], max_len=2)
    assert data.tokens.tolist() == [[5, 6], [8, PAD_ID], [PAD_ID, PAD_ID]]
    assert data.lengths.tolist() == [2, 1, 1]
    assert data.limit(2).tokens.shape == (2, 2)


# ----------------------------------------------------------------------------------------------------------- SST-2
@needs_sst2
def test_sst2_reads_every_split_with_the_expected_sizes():
    sizes = {"train": 67349, "dev": 872, "test": 1821}
    for split, n in sizes.items():
        sentences, labels = read_sst2(DATA, split)
        assert len(sentences) == len(labels) == n
        assert set(labels) == {0, 1}
    vocab = Vocabulary.build(read_sst2(DATA, "train")[0], min_freq=2)
    dev = load_sst2(DATA, "dev", vocab)
    stats, train_stats = dev.length_stats(), load_sst2(DATA, "train", vocab).length_stats()
    assert stats["mean"] > 2 * train_stats["mean"]  # GLUE train is mostly short phrases, dev full sentences


def test_missing_or_malformed_sst2_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="SST-2 not found.*VITPE_DATA"):
        read_sst2(tmp_path, "train")
    (tmp_path / "sst2").mkdir()
    (tmp_path / "sst2" / "dev.tsv").write_text("sentence\tlabel\ngood film\t1\nbad film\tmaybe\n")
    with pytest.raises(DataError, match="line 3"):
        read_sst2(tmp_path, "dev")
    with pytest.raises(DataError, match="unknown SST-2 split"):
        read_sst2(tmp_path, "validation")


# ------------------------------------------------------------------------------------------------- synthetic tasks
@pytest.mark.parametrize("task", TASKS)
def test_synthetic_tasks_are_balanced_deterministic_and_correct(task):
    data = synthetic_text(task, 2000, 12, 40, seed=3)
    assert abs(data.labels.float().mean().item() - 0.5) < 0.001
    assert 12 <= data.lengths.min() and data.lengths.max() <= 40
    assert len(set(data.lengths.tolist())) > 20  # lengths spread over the range
    assert torch.equal(synthetic_text(task, 2000, 12, 40, seed=3).tokens, data.tokens)
    assert not torch.equal(synthetic_text(task, 2000, 12, 40, seed=4).tokens, data.tokens)
    for row, length, label in zip(data.tokens, data.lengths, data.labels):
        assert label_of(task, row[:length].tolist()) == label
        assert (row[length:] == PAD_ID).all() and (row[:length] > CLS_ID).all()


@pytest.mark.parametrize("task", TASKS)
def test_a_bag_of_words_cannot_tell_the_labels_apart(task):
    data = synthetic_text(task, 4000, 16, 32, seed=0)
    counts = {0: Counter(), 1: Counter()}
    for row, label in zip(data.tokens, data.labels.tolist()):
        counts[label][(int((row == A_ID).sum()), int((row == B_ID).sum()))] += 1
    for key in counts[0] | counts[1]:  # the (number of A, number of B) distribution is the same for both labels
        assert abs(counts[0][key] - counts[1][key]) / 2000 < 0.04, key


def test_synthetic_arguments_are_checked():
    with pytest.raises(ValueError, match="unknown synthetic task"):
        synthetic_text("parity", 10, 8, 8)
    with pytest.raises(ValueError, match="min_len"):
        synthetic_text("order", 10, 4, 8)


def test_text_loader_cuts_batches_to_their_longest_sequence():
    data = pad_sequences([[5] * 3, [6] * 7, [7] * 2, [8] * 4], [0, 1, 0, 1], ["n", "p"])
    loader = TextBatchLoader(data, 2, train=False)
    (tokens, mask), labels = next(loader.epoch(0))
    assert tokens.shape == (2, 7) and mask.sum(1).tolist() == [3, 7] and labels.tolist() == [0, 1]
    train = TextBatchLoader(data, 2, train=True, seed=5)
    assert [b[1].tolist() for b in train.epoch(1)] == [b[1].tolist() for b in train.epoch(1)]


def test_a_width_multiple_pads_batches_to_a_few_widths():
    """Compiled training: one static graph per width, so the widths are few -- every batch padded to a multiple of 8,
    at most the set's width -- and the extra columns are padding."""
    lengths = [3, 7, 9, 16, 20, 21]
    data = pad_sequences([[5] * n for n in lengths], [0, 1] * 3, ["n", "p"])
    loader = TextBatchLoader(data, 2, train=False, width_multiple=8)
    assert loader.widths() == [8, 16, 21]  # 21: the set's width, not 24
    batches = list(loader.epoch(0))
    assert [t.shape[1] for (t, _), _ in batches] == [8, 16, 21]
    assert [m.sum(1).tolist() for (_, m), _ in batches] == [[3, 7], [9, 16], [20, 21]]
    assert all(((t == PAD_ID) | m).all() and (t[m] != PAD_ID).all() for (t, m), _ in batches)
    assert TextBatchLoader(data, 2, train=False).widths() == sorted(lengths)
    with pytest.raises(ValueError, match="width_multiple"):
        TextBatchLoader(data, 2, train=False, width_multiple=0)


def test_training_batches_come_from_length_buckets():
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 53, (3000,), generator=g).tolist()
    data = pad_sequences([[5] * n for n in lengths], [0] * 3000, ["n", "p"])

    def padding(loader, epoch):
        return sum(t.numel() for (t, _), _ in loader.epoch(epoch)) / sum(int(m.sum()) for (_, m), _ in
                                                                            loader.epoch(epoch))

    bucketed, plain = TextBatchLoader(data, 32, train=True, seed=1), TextBatchLoader(data, 32, train=True, seed=1,
                                                                                      bucket=0)
    assert padding(bucketed, 0) < 1.1 < 1.5 < padding(plain, 0)
    seen = bucketed._indices(0)
    assert len(seen) == len(set(seen.tolist())) == len(bucketed) * 32  # each sequence at most once per epoch
    assert torch.equal(bucketed._indices(3), TextBatchLoader(data, 32, train=True, seed=1)._indices(3))
    assert not torch.equal(bucketed._indices(3), bucketed._indices(4))


def test_word_dropout_replaces_real_training_tokens_by_unk_reproducibly():
    data = pad_sequences([[5 + i % 40] * (10 + i % 20) for i in range(400)], [i % 2 for i in range(400)], ["n", "p"])
    loader = TextBatchLoader(data, 50, train=True, seed=2, word_dropout=0.25)
    batches = list(loader.epoch(0))
    dropped = sum(int(((t == UNK_ID) & m).sum()) for (t, m), _ in batches)
    real = sum(int(m.sum()) for (_, m), _ in batches)
    assert 0.2 < dropped / real < 0.3
    assert all(not ((t == UNK_ID) & ~m).any() for (t, m), _ in batches)  # padding is never touched
    assert all(torch.equal(a[0][0], b[0][0]) for a, b in zip(batches, loader.epoch(0)))  # same seed, same drops
    evaluation = TextBatchLoader(data, 50, train=False, word_dropout=0.25)
    assert not any((t == UNK_ID).any() for (t, _), _ in evaluation.epoch(0))
    with pytest.raises(ValueError, match="word_dropout"):
        TextBatchLoader(data, 50, train=True, word_dropout=1.0)


# ----------------------------------------------------------------------------------------------------------- model
def _model(pe: str, pool: str = "cls", max_len: int = 12, **kwargs) -> TextClassifier:
    torch.manual_seed(0)
    return TextClassifier(50, 3, max_len=max_len, dim=32, depth=2, heads=2, pe=pe, pool=pool, **kwargs).eval()


@pytest.mark.parametrize("pool", ["cls", "mean"])
@pytest.mark.parametrize("pe", PES_1D)
def test_padding_never_changes_the_real_tokens_logits(pe, pool):
    model = _model(pe, pool)
    g = torch.Generator().manual_seed(1)
    lengths = [9, 5, 2]
    tokens = torch.randint(3, 50, (3, 12), generator=g)
    alone = torch.cat([model(tokens[i:i + 1, :n]) for i, n in enumerate(lengths)])  # (3, C), no padding at all
    for width in (9, 12):  # padded to the batch's longest sequence, and further
        mask = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]
        padded = tokens[:, :width].masked_fill(~mask, PAD_ID)
        torch.testing.assert_close(model(padded, mask), alone, atol=1e-5, rtol=1e-5)


def test_positions_matter_for_every_pe_but_none():
    tokens = torch.randint(3, 50, (2, 10), generator=torch.Generator().manual_seed(2))
    shuffled = tokens[:, torch.randperm(10, generator=torch.Generator().manual_seed(3))]
    for pe in PES_1D:
        model = _model(pe, "mean")
        same = (model(tokens) - model(shuffled)).abs().max().item() < 1e-6  # float rounding only
        assert same == (pe == "none"), pe


@pytest.mark.slow
@pytest.mark.parametrize("pe", PES_1D)
def test_every_1d_pe_trains(pe):
    # mean pooling: with a class token, a logits-site bias of the last block only reaches the class token's row,
    # which prefix tokens do not get, so that block's table would get no gradient (see the README's PE notes)
    model = _model(pe, "mean").train()
    data = synthetic_text("order", 64, 8, 12, vocab_size=50, seed=0)
    loader = TextBatchLoader(data, 64, train=False)
    (tokens, mask), labels = next(loader.epoch(0))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    before = {n: p.detach().clone() for n, p in model.pe.named_parameters()}
    losses = []
    for _ in range(8):
        loss = torch.nn.functional.cross_entropy(model(tokens, mask), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.05, losses
    for name, p in model.pe.named_parameters():  # the PE's own parameters learn too
        assert not torch.equal(p, before[name]), name


def test_longer_sequences_follow_the_resize_mode():
    learnable = _model("learnable", max_len=8)
    long = torch.randint(3, 50, (2, 20))
    assert learnable(long).shape == (2, 3)  # interpolated table
    learnable.set_pe_resize("extrapolate")
    with pytest.raises(vitpe.pe.ResizeError, match="interpolate"):
        learnable(long)
    rope = _model("rope_axial", max_len=8)
    interpolated = rope(long)
    rope.set_pe_resize("extrapolate")
    assert not torch.allclose(rope(long), interpolated)
    short = long[:, :6]  # within max_len the mode does not matter: the reference positions, cropped
    a = rope(short)
    rope.set_pe_resize("interpolate")
    torch.testing.assert_close(rope(short), a)


def test_learned_tables_start_at_the_token_scale():
    assert _model("learnable").pe.pos_embed.std().item() == pytest.approx(1.0, rel=0.15)
    assert _model("learnable", pe_options={"init_std": 0.02}).pe.pos_embed.std().item() == pytest.approx(0.02, rel=0.15)
    tokens = torch.randint(3, 50, (64, 12))
    assert _model("sincos").embed(tokens).mul(_model("sincos").embed_scale).std().item() == pytest.approx(1.0, rel=0.15)


def test_bad_inputs_are_clear_errors():
    model = _model("sincos")
    tokens = torch.randint(3, 50, (2, 6))
    with pytest.raises(ValueError, match="int64"):
        model(tokens.float())
    left_padded = torch.tensor([[True] * 6, [False, False] + [True] * 4])
    with pytest.raises(ValueError, match="mask\\[:, 0\\]"):
        model(tokens, left_padded)
    holes = torch.tensor([[True] * 6, [True, False, True, True, True, True]])
    with pytest.raises(ValueError, match="right-padded"):
        model(tokens, holes)
    with pytest.raises(ValueError, match="2D grids only"):
        _model("separable")
    with pytest.raises(ValueError, match="unknown pool"):
        _model("sincos", pool="max")
