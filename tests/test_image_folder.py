"""Image folders and Imagenette: the layouts users download, non-square images, the decoded cache, bad input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from vitpe.data import DataError, load_folder_split, load_imagenette
from vitpe.data import decoded_cache
from vitpe.data import image_folder as image_folder_module

DATA = Path(os.environ.get("VITPE_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
COLOURS = {"n01440764": (255, 0, 0), "n02102040": (0, 0, 255), "n03000684": (0, 255, 0)}


def banded(width: int, height: int, centre: tuple[int, int, int]):
    """A wide image: black outer thirds, ``centre`` colour in the middle third (a centre crop sees only the colour)."""
    from PIL import Image

    image = Image.new("RGB", (width, height), (0, 0, 0))
    image.paste(Image.new("RGB", (width // 3 + 1, height), centre), (width // 3, 0))
    return image


def fake_imagenette(root: Path, n: int = 4, suffixes=(".JPEG",), classes=COLOURS, splits=("train", "val"),
                    size=(72, 24)) -> Path:
    """An official-looking ``imagenette2-160`` download: non-square images, one folder per WordNet id."""
    folder = root / "imagenette2-160"
    for split in splits:
        for wnid, colour in classes.items():
            (folder / split / wnid).mkdir(parents=True)
            for i in range(n):
                suffix = suffixes[i % len(suffixes)]
                banded(*size, colour).save(folder / split / wnid / f"{i}{suffix}",
                                           **({"quality": 95} if suffix.lower() in (".jpeg", ".jpg", ".webp") else {}))
    return folder


def test_official_layout_with_every_common_extension_is_found_and_centre_cropped(tmp_path):
    fake_imagenette(tmp_path, n=4, suffixes=(".JPEG", ".png", ".webp", ".jpg"))
    train = load_imagenette(tmp_path, "train", 12, cache_dir="off")
    assert train.images.shape == (12, 3, 12, 12) and train.images.dtype == torch.uint8
    assert train.classes == ["tench", "English springer", "chain saw"]
    for image, label in zip(train.images.float(), train.labels):  # the centre third of a 3:1 image is all colour
        wnid = list(COLOURS)[int(label)]
        expected = torch.tensor(COLOURS[wnid], dtype=torch.float)[:, None, None]
        assert (image[:, 1:-1, 1:-1] - expected).abs().max() < 40, wnid  # lossy formats keep within a few levels
    val = load_imagenette(tmp_path / "imagenette2-160", "test", 12, cache_dir="off")  # the folder itself; test = val
    assert len(val) == 12 and val.classes == train.classes


def test_images_come_in_one_fixed_shuffled_order_so_the_first_n_cover_the_classes(tmp_path):
    fake_imagenette(tmp_path, n=6)
    first = load_imagenette(tmp_path, "train", 8, cache_dir="off")
    again = load_imagenette(tmp_path, "train", 8, cache_dir=str(tmp_path / "cache"))
    assert torch.equal(first.labels, again.labels) and torch.equal(first.images, again.images)
    assert len(set(first.limit(6).labels.tolist())) >= 2  # class-sorted folders would give six of the first class
    assert sorted(first.labels.tolist()) == [0] * 6 + [1] * 6 + [2] * 6


def must_not_run(what: str):
    """A stand-in for a function that the test expects not to be called: calling it fails the test with ``what``."""
    def fail(*args, **kwargs):
        raise AssertionError(what)
    return fail


def test_the_decoded_cache_is_reused_and_replaced_when_the_files_change(tmp_path, monkeypatch, capsys):
    folder = fake_imagenette(tmp_path, n=2)
    cache = tmp_path / "cache"
    first = load_imagenette(tmp_path, "train", 8, cache_dir=str(cache))
    (written,) = cache.iterdir()
    assert written.suffix == ".pt" and not [p for p in cache.iterdir() if p.name.startswith(".")]

    with monkeypatch.context() as patch:
        patch.setattr(image_folder_module, "decode_square", must_not_run("decoded although the cache was fresh"))
        cached = load_imagenette(tmp_path, "train", 8, cache_dir=str(cache))
    assert torch.equal(cached.images, first.images) and capsys.readouterr().err == ""

    banded(72, 24, (255, 255, 255)).save(folder / "train" / "n01440764" / "0.JPEG", quality=95)  # a photo replaced
    os.utime(folder / "train" / "n01440764" / "0.JPEG", ns=(1, 1))
    (folder / "train" / "n02102040" / "9.png").parent.mkdir(exist_ok=True)
    banded(72, 24, (0, 0, 255)).save(folder / "train" / "n02102040" / "9.png")  # and one added
    fresh = load_imagenette(tmp_path, "train", 8, cache_dir=str(cache))
    assert "stale: 1 files added, 0 removed, 1 changed" in capsys.readouterr().err
    assert len(fresh) == 7 and (fresh.images.float().mean(dim=(1, 2, 3)) > 200).sum() == 1  # the white one is in
    assert [p.name for p in cache.iterdir()] == [written.name]  # replaced, not added beside
    load_imagenette(tmp_path, "train", 8, cache_dir=str(cache))
    assert capsys.readouterr().err == ""  # and now fresh again


def test_a_cache_outlives_a_copy_that_changes_only_the_files_times(tmp_path, monkeypatch, capsys):
    folder = fake_imagenette(tmp_path, n=2)
    cache = tmp_path / "cache"
    first = load_imagenette(tmp_path, "train", 8, cache_dir=str(cache))
    photos = sorted((folder / "train").rglob("*.*"))
    for i, photo in enumerate(photos):  # as a fresh copy of the folder leaves them: every time new, contents the same
        os.utime(photo, ns=(10**18 + i, 10**18 + i))

    with monkeypatch.context() as patch:
        patch.setattr(image_folder_module, "decode_square", must_not_run("decoded although only the times changed"))
        again = load_imagenette(tmp_path, "train", 8, cache_dir=str(cache))
        assert torch.equal(again.images, first.images) and capsys.readouterr().err == ""
        # the cache now has the new times: no hashing either
        patch.setattr(decoded_cache, "file_digests", must_not_run("hashed although the times were those of the cache"))
        load_imagenette(tmp_path, "train", 8, cache_dir=str(cache))


def test_a_file_of_the_same_size_and_new_contents_makes_the_cache_stale(tmp_path, capsys):
    files = [tmp_path / "a.bin", tmp_path / "b.bin"]
    for path in files:
        path.write_bytes(b"aaaa")
    decoded = []

    def decode() -> dict:
        decoded.append(1)
        return {"images": torch.tensor([len(decoded)])}

    cache = tmp_path / "cache.pt"
    decoded_cache.load_or_decode(cache, tmp_path, decoded_cache.fingerprint(tmp_path, files), decode)
    os.utime(files[0], ns=(1, 1))  # touched only
    entry = decoded_cache.load_or_decode(cache, tmp_path, decoded_cache.fingerprint(tmp_path, files), decode)
    assert len(decoded) == 1 and entry["images"].item() == 1 and capsys.readouterr().err == ""
    files[1].write_bytes(b"abba")  # the same size, other contents, a new time
    os.utime(files[1], ns=(2, 2))  # (new on a file system whose clock is coarse, too)
    entry = decoded_cache.load_or_decode(cache, tmp_path, decoded_cache.fingerprint(tmp_path, files), decode)
    assert len(decoded) == 2 and entry["images"].item() == 2
    assert "stale: 0 files added, 0 removed, 1 changed" in capsys.readouterr().err


def test_a_corrupt_cache_is_decoded_again(tmp_path, capsys):
    fake_imagenette(tmp_path, n=2)
    cache = tmp_path / "cache"
    first = load_imagenette(tmp_path, "train", 8, cache_dir=str(cache))
    (written,) = cache.iterdir()
    written.write_bytes(written.read_bytes()[:100])
    again = load_imagenette(tmp_path, "train", 8, cache_dir=str(cache))
    assert torch.equal(again.images, first.images) and "is unreadable" in capsys.readouterr().err


def test_a_missing_folder_says_where_the_files_go_and_how_to_download_them(tmp_path):
    with pytest.raises(DataError, match=r"Imagenette not found under .*torchvision\.datasets\.Imagenette\("):
        load_imagenette(tmp_path, "train", 8)
    fake_imagenette(tmp_path, splits=("train",))
    with pytest.raises(DataError, match=r"imagenette2-160/test not found: expected .*\{train,test\|val\}"):
        load_imagenette(tmp_path, "test", 8, cache_dir="off")


def test_an_unreadable_image_is_named_and_skipped_only_when_asked(tmp_path, capsys):
    folder = fake_imagenette(tmp_path, n=2)
    bad = folder / "train" / "n03000684" / "broken.jpg"
    bad.write_bytes(b"not an image")
    with pytest.raises(DataError, match=r"broken\.jpg is not a readable image"):
        load_imagenette(tmp_path, "train", 8, cache_dir="off")
    kept = load_imagenette(tmp_path, "train", 8, cache_dir=str(tmp_path / "cache"), skip_unreadable=True)
    assert len(kept) == 6 and "skipped 1 unreadable image(s) of 7" in capsys.readouterr().err
    assert sorted(kept.labels.tolist()) == [0, 0, 1, 1, 2, 2]  # labels still match their images


def test_classes_must_match_between_the_splits_and_none_may_be_empty(tmp_path):
    folder = fake_imagenette(tmp_path, n=1)
    (folder / "val" / "n03000684" / "0.JPEG").unlink()
    (folder / "val" / "n03000684").rmdir()
    with pytest.raises(DataError, match=r"only in .*train: \['n03000684'\]; only in .*val: none"):
        load_imagenette(tmp_path, "test", 8, cache_dir="off")
    (folder / "train" / "n09999999").mkdir()
    (folder / "train" / "n09999999" / "notes.txt").write_text("no images here")
    with pytest.raises(DataError, match=r"n09999999 hold no images"):
        load_imagenette(tmp_path, "train", 8, cache_dir="off")


def test_a_plain_image_folder_reads_test_or_val(tmp_path):
    from PIL import Image

    for split in ("train", "val"):
        for name, colour in (("cat", (255, 0, 0)), ("dog", (0, 0, 255))):
            (tmp_path / split / name).mkdir(parents=True)
            Image.new("RGB", (20, 30), colour).save(tmp_path / split / name / "a.png")
    test = load_folder_split(tmp_path, "test", 16, cache_dir="off")
    assert test.images.shape == (2, 3, 16, 16) and test.classes == ["cat", "dog"]
    for image, label in zip(test.images, test.labels.tolist()):  # each val/ image under its own class, its colour kept
        red, _, blue = image.float().mean(dim=(1, 2)).tolist()
        assert (red, blue) == ((255.0, 0.0) if test.classes[label] == "cat" else (0.0, 255.0))


def test_a_run_trains_on_an_image_folder_and_evaluates_at_larger_sizes(tmp_path):
    from vitpe.cli import evaluate as eval_cli
    from vitpe.cli import train as train_cli

    fake_imagenette(tmp_path / "data", n=4, size=(48, 32))
    run = tmp_path / "run"
    assert train_cli.main(["--config", "configs/imagenette.yaml", f"out_dir={run}", f"data.root={tmp_path / 'data'}",
                           f"data.cache_dir={tmp_path / 'cache'}", "data.img_size=32", "model.dim=32",
                           "model.depth=1", "model.heads=2", "train.epochs=2", "train.img_sizes=[8,16]",
                           "train.img_size_epochs=[1,1]", "train.batch_size=4", "model.img_size=16",
                           "train.compile=false", "--no-progress"]) == 0
    assert eval_cli.main([str(run), "--resolutions", "16,32", "--pe-resize", "interpolate,extrapolate",
                          "--out", str(tmp_path / "sweep")]) == 0
    assert (tmp_path / "sweep" / "resolution.json").is_file()


needs_imagenette = pytest.mark.skipif(not (DATA / "imagenette-160" / "val").is_dir(),
                                      reason="Imagenette not in VITPE_DATA")


@needs_imagenette
def test_real_imagenette_validation_set_loads_whole():
    val = load_imagenette(DATA, "test", 160, cache_dir="off")
    assert val.images.shape == (3925, 3, 160, 160) and val.images.dtype == torch.uint8
    assert len(val.classes) == 10 and val.classes[0] == "tench" and val.classes[-1] == "parachute"
    assert torch.bincount(val.labels).min() > 350
