"""python -m vitpe.data.shards: an image folder written as webdataset tar shards and read back -- by vitpe's index
and by webdataset's own reader -- as the same images and labels; bad input in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import CLASSES, photo_folder
from vitpe.data import DataError
from vitpe.data.shards import write_shards
from vitpe.data.stream_index import INDEX_FILE, FolderIndex, ShardIndex

ROOT = Path(__file__).resolve().parents[1]


def source_samples(folder: Path, split: str) -> dict[str, tuple[bytes, int]]:
    index = FolderIndex(folder, split)
    return {index.paths[i]: (index.read(i), int(index.labels[i])) for i in range(len(index))}


@pytest.fixture
def shards(tmp_path):
    folder = photo_folder(tmp_path / "photos", per_class=5)  # 15 images a split
    counts = write_shards(folder, tmp_path / "shards", shard_size=4, progress=False)
    assert counts == {"train": 15, "val": 15}
    return folder, tmp_path / "shards"


def test_the_shards_hold_every_image_as_it_was_with_its_label(shards):
    folder, out = shards
    assert sorted(p.name for p in (out / "train").iterdir()) == [f"00000{i}.tar" for i in range(4)] + [INDEX_FILE]
    assert json.loads((out / "classes.json").read_text())["classes"] == list(CLASSES)
    for split in ("train", "val"):
        index, source = ShardIndex(out, split), source_samples(folder, split)
        assert len(index) == 15 and index.classes == list(CLASSES)
        seen = {}
        for i in range(len(index)):
            data = index.read(i)
            match = [path for path, (bytes_, _) in source.items() if bytes_ == data]
            assert len(match) == 1
            seen[match[0]] = int(index.labels[i])
        assert seen == {path: label for path, (_, label) in source.items()}
        assert index.labels.tolist() != sorted(index.labels.tolist())  # written in a shuffled order


def test_webdatasets_own_reader_reads_the_same_samples(shards):
    import webdataset as wds

    folder, out = shards
    source = source_samples(folder, "train")
    urls = [str(p) for p in sorted((out / "train").glob("*.tar"))]
    read = {}
    for sample in wds.WebDataset(urls, shardshuffle=False):
        image = next(v for k, v in sample.items() if k.lower() in ("jpeg", "png", "webp"))
        read[sample["txt"].decode()] = (image, int(sample["cls"]))
    assert read == source


def test_shards_without_an_index_are_scanned_to_the_same_index(shards):
    _, out = shards
    written = ShardIndex(out, "train")
    (out / "train" / INDEX_FILE).unlink()
    scanned = ShardIndex(out, "train")
    for name in ("shard", "offset", "size", "labels"):
        assert np.array_equal(getattr(written, name), getattr(scanned, name))


def test_bad_shards_and_a_used_folder_are_one_line(shards, tmp_path):
    folder, out = shards
    with pytest.raises(DataError, match=r"is not empty: write the shards into a new folder"):
        write_shards(folder, out, shard_size=4, progress=False)
    (out / "train" / INDEX_FILE).write_bytes(b"garbage")
    with pytest.raises(DataError, match=r"index\.npz is unreadable .*delete it"):
        ShardIndex(out, "train")
    (out / "train" / INDEX_FILE).unlink()
    (out / "train" / "000001.tar").write_bytes(b"\0" * 100 + b"not a tar")
    with pytest.raises(DataError, match=r"000001\.tar is not a readable tar shard"):
        ShardIndex(out, "train")
    with pytest.raises(DataError, match=r"holds no \.tar shards"):
        ShardIndex(folder, "train")
    done = subprocess.run([sys.executable, "-m", "vitpe.data.shards", str(tmp_path / "nowhere"), str(tmp_path / "x")],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "nowhere/train not found" in done.stderr
