import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from vitpe.data import BatchLoader, DataError, ImageSet, load_cifar, synthetic_images
from vitpe.data.loader import random_crop, random_resized_crops, resize_batch
from vitpe.data.safe_pickle import load_array_pickle

DATA = Path(os.environ.get("VITPE_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data"))
needs_cifar = pytest.mark.skipif(not (DATA / "cifar-10-batches-py").is_dir(), reason="CIFAR-10 not in VITPE_DATA")


@needs_cifar
def test_real_cifar10_loads_as_uint8():
    test = load_cifar(DATA, "cifar10", "test")
    assert test.images.shape == (10000, 3, 32, 32) and test.images.dtype == torch.uint8
    assert torch.bincount(test.labels).tolist() == [1000] * 10
    assert test.classes[0] == "airplane" and len(test.classes) == 10


def _fake_cifar(root: Path, key_type=str, n=20):
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    k = (lambda s: s.encode()) if key_type is bytes else (lambda s: s)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {k("data"): rng.integers(0, 255, (n, 3072), dtype=np.uint8), k("labels"): list(range(10)) * (n // 10)}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
    (folder / "batches.meta").write_bytes(pickle.dumps({k("label_names"): [k(f"c{i}") for i in range(10)]}))
    return folder


@pytest.mark.parametrize("key_type", [str, bytes])
def test_pickle_keys_as_str_or_bytes(tmp_path, key_type):
    _fake_cifar(tmp_path, key_type)
    train = load_cifar(tmp_path, "cifar10", "train")
    assert train.images.shape == (100, 3, 32, 32) and train.classes[3] == "c3"


def test_missing_data_is_one_clear_message(tmp_path):
    with pytest.raises(DataError, match="cifar-10-batches-py.*VITPE_DATA"):
        load_cifar(tmp_path / "nothing", "cifar10", "train")


def test_corrupt_data_is_one_clear_message(tmp_path):
    folder = _fake_cifar(tmp_path)
    (folder / "data_batch_3").write_bytes(b"not a pickle at all")
    with pytest.raises(DataError, match="data_batch_3 is corrupt"):
        load_cifar(tmp_path, "cifar10", "train")


def test_pickles_that_execute_code_are_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        load_array_pickle(pickle.dumps({"data": Evil()}))


def test_random_crop_keeps_content_and_shifts():
    images = torch.arange(2 * 1 * 4 * 4, dtype=torch.uint8).reshape(2, 1, 4, 4)
    out = random_crop(images, 0, torch.Generator())
    assert torch.equal(out, images)
    g = torch.Generator().manual_seed(0)
    out = random_crop(images, 2, g)
    assert out.shape == images.shape
    for b in range(2):  # every crop is a window of the zero-padded image
        padded = torch.nn.functional.pad(images[b, 0], (2, 2, 2, 2))
        windows = [padded[i:i + 4, j:j + 4] for i in range(5) for j in range(5)]
        assert any(torch.equal(out[b, 0], w) for w in windows)
    g = torch.Generator().manual_seed(0)
    mirrored = random_crop(images, 2, g, mode="reflect")
    assert mirrored.dtype == torch.uint8
    for b in range(2):  # ... or of the mirrored image: the border repeats image content, never zeros
        padded = torch.nn.functional.pad(images[b:b + 1].float(), (2, 2, 2, 2), mode="reflect")[0, 0].to(torch.uint8)
        windows = [padded[i:i + 4, j:j + 4] for i in range(5) for j in range(5)]
        assert any(torch.equal(mirrored[b, 0], w) for w in windows)


def test_random_resized_crops_are_windows_of_the_asked_area_resampled():
    images = torch.randn(6, 1, 8, 8)
    out = random_resized_crops(images, (4, 4), (0.25, 0.5), seed=1)
    assert out.shape == (6, 1, 4, 4) and torch.equal(out, random_resized_crops(images, (4, 4), (0.25, 0.5), seed=1))
    resample = lambda w: torch.nn.functional.interpolate(  # noqa: E731  (bicubic, anti-aliased: resize_batch's filter)
        w[None], size=(4, 4), mode="bicubic", align_corners=False, antialias=True)[0]
    # An independent search over every window whose area and aspect ratio are in range (up to rounding to whole
    # pixels): one of them, resampled, gives the crop
    areas = [(h, w) for h in range(1, 9) for w in range(1, 9) if 0.2 <= h * w / 64 <= 0.6 and 0.6 <= w / h <= 1.7]
    for image, crop in zip(images, out):
        assert any(torch.allclose(resample(image[:, i:i + h, j:j + w]), crop, atol=1e-6)
                   for h, w in areas for i in range(9 - h) for j in range(9 - w))
    whole = random_resized_crops(images, (4, 4), (1.0, 1.0), seed=1)  # the whole image: just resampled
    torch.testing.assert_close(whole, resize_batch(images, (4, 4)), atol=1e-6, rtol=0)


def test_a_loader_with_random_resized_crops_trains_at_its_size_and_resumes_exactly():
    data = synthetic_images(64, 32, seed=0)
    make = lambda: BatchLoader(data, 16, train=True, mean=[0.5] * 3, std=[0.25] * 3, img_sizes=[16],  # noqa: E731
                               crop_padding=0, crop_scale=[0.25, 1.0])
    full = list(make().epoch(1))
    assert {tuple(x.shape[-2:]) for x, _ in full} == {(16, 16)}
    assert all(torch.equal(a[0], b[0]) for a, b in zip(full[2:], make().epoch(1, start_step=2)))
    padded = BatchLoader(data, 16, train=True, mean=[0.5] * 3, std=[0.25] * 3, img_sizes=[16], crop_padding=0)
    assert not torch.equal(full[0][0], next(iter(padded.epoch(1)))[0])  # the crops changed the batch


def test_loader_is_deterministic_resumable_and_sharded():
    data = synthetic_images(64, 16, seed=0)
    make = lambda **kw: BatchLoader(data, 8, train=True, mean=[0.5] * 3, std=[0.25] * 3, seed=3, **kw)  # noqa: E731
    full = list(make().epoch(2))
    again = list(make().epoch(2, start_step=5))
    assert len(full) == 8 and all(torch.equal(a[0], b[0]) for a, b in zip(full[5:], again))
    assert not torch.equal(full[0][0], list(make().epoch(3))[0][0])  # a new permutation every epoch
    shards = [torch.cat([y for _, y in make(rank=r, world=2).epoch(1)]) for r in range(2)]
    assert len(shards[0]) == len(shards[1]) == 32


def test_multi_resolution_draws_sizes_per_batch():
    data = synthetic_images(256, 32, seed=0)
    loader = BatchLoader(data, 16, train=True, mean=[0.5] * 3, std=[0.25] * 3, img_sizes=[16, 24, 32])
    sizes = {x.shape[-1] for x, _ in loader.epoch(0)}
    assert sizes == {16, 24, 32}


def test_progressive_resizing_trains_each_size_for_its_epochs():
    data = synthetic_images(64, 32, seed=0)
    make = lambda: BatchLoader(data, 16, train=True, mean=[0.5] * 3, std=[0.25] * 3,  # noqa: E731
                               img_sizes=[16, 24, 32], size_epochs=[2, 1, 2])
    sizes = [{x.shape[-1] for x, _ in make().epoch(e)} for e in range(6)]
    assert sizes == [{16}, {16}, {24}, {32}, {32}, {32}]  # past the schedule: the last size
    resumed = list(make().epoch(2, start_step=2))
    assert all(torch.equal(a[0], b[0]) for a, b in zip(list(make().epoch(2))[2:], resumed))
    with pytest.raises(ValueError, match="one epoch count per image size"):
        BatchLoader(data, 16, train=True, mean=[0.5] * 3, std=[0.25] * 3, img_sizes=[16, 32], size_epochs=[1])


def test_eval_loader_keeps_every_image():
    data = ImageSet(torch.zeros(10, 3, 8, 8, dtype=torch.uint8), torch.arange(10), [str(i) for i in range(10)])
    loader = BatchLoader(data, 4, train=False, mean=[0.0] * 3, std=[1.0] * 3, img_sizes=[8])
    assert torch.equal(torch.cat([y for _, y in loader.epoch(0)]), torch.arange(10))


def test_cifar100_layout(tmp_path):
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name, n in (("train", 30), ("test", 10)):
        batch = {"data": rng.integers(0, 255, (n, 3072), dtype=np.uint8), "fine_labels": list(range(n)),
                 "coarse_labels": [0] * n}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
    (folder / "meta").write_bytes(pickle.dumps({"fine_label_names": [f"f{i}" for i in range(100)]}))
    test = load_cifar(tmp_path, "cifar100", "test")
    assert test.images.shape == (10, 3, 32, 32) and len(test.classes) == 100 and test.labels.tolist() == list(range(10))


def test_image_folder_layout(tmp_path):
    from PIL import Image

    from vitpe.data import load_folder_split

    for split in ("train", "test"):
        for label, colour in (("cat", (255, 0, 0)), ("dog", (0, 0, 255))):
            (tmp_path / split / label).mkdir(parents=True)
            for i in range(3):
                Image.new("RGB", (20 + i, 24), colour).save(tmp_path / split / label / f"{i}.png")
    train = load_folder_split(tmp_path, "train", 16, cache_dir="off")
    assert train.images.shape == (6, 3, 16, 16) and train.classes == ["cat", "dog"]
    red, blue = train.images[train.labels == 0], train.images[train.labels == 1]
    assert red[:, 0].float().mean() > 250 and blue[:, 2].float().mean() > 250
    with pytest.raises(DataError, match="not found"):
        load_folder_split(tmp_path / "missing", "train", 16)


RESIDENT_SETTINGS = [dict(crop_padding=4, crop_pad_mode="reflect"), dict(crop_padding=0, crop_scale=[0.25, 1.0]),
                     dict(crop_padding=2, randaugment="rand-m9-n2")]


@pytest.mark.parametrize("settings", RESIDENT_SETTINGS)
def test_images_kept_on_the_device_give_the_same_batches_and_resume_exactly(settings):
    """data.on_device: the uint8 images stay where the model trains and are augmented there; the draws stay on the
    CPU's seeded generators, so the batches are those of the loader that augments on the CPU."""
    data = synthetic_images(64, 16, seed=0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    make = lambda resident: BatchLoader(data, 8, train=True, mean=[0.5] * 3, std=[0.25] * 3, seed=3,  # noqa: E731
                                        img_sizes=[12, 16], device=device, resident=resident, **settings)
    resident, host = make(True), make(False)
    assert resident.images.device.type == device and host.images.device.type == "cpu"
    for (x, y), (x_host, y_host) in zip(resident.epoch(2), host.epoch(2)):
        assert x.device.type == device and torch.equal(y, y_host)
        torch.testing.assert_close(x, x_host, atol=1e-4, rtol=0)  # the same images; a GPU's resampling rounds
    full = list(make(True).epoch(1))
    assert all(torch.equal(a[0], b[0]) for a, b in zip(full[3:], make(True).epoch(1, start_step=3)))


def test_a_config_keeps_the_images_on_a_gpu_by_default_and_where_asked():
    from vitpe.config import Config
    from vitpe.data.from_config import images_on_device

    config = Config()
    assert not images_on_device(config, "cpu") and images_on_device(config, "cuda")  # by default: on a GPU only
    config.data.on_device = False
    assert not images_on_device(config, "cuda")
    config.data.on_device = True
    assert images_on_device(config, "cpu")
