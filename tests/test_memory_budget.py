"""The in-memory path within its means: a decoded split peaks at about its own size (decoded into place, reordered in
place, statistics in chunks), and a split that cannot fit is refused before decoding, in one line -- tested in
subprocesses under a memory limit (``RLIMIT_AS``), not by filling the machine."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from vitpe.data.loader import channel_stats
from vitpe.data import memory_budget
from vitpe.data.memory_budget import GIB, available_memory, check_fits
from vitpe.data import DataError

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc")


def jpeg_folder(root: Path, per_class: int, size=(150, 200)) -> Path:
    from PIL import Image

    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for c in range(2):
            (root / split / f"c{c}").mkdir(parents=True)
            for i in range(per_class if split == "train" else 2):
                pixels = rng.integers(0, 256, (*size, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(root / split / f"c{c}" / f"{i}.jpg", quality=90)
    return root


def run_python(code: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


PEAK = """
    import resource, sys
    from pathlib import Path
    import torch
    from vitpe.config import load_config
    from vitpe.data.from_config import build_run_data

    def status(key):
        return int(next(l for l in Path('/proc/self/status').read_text().splitlines() if l.startswith(key)).split()[1])

    config = load_config('configs/imagenette.yaml', ['data.dataset=imagefolder', 'data.root={root}',
                                                    'data.img_size=160', 'data.cache_dir={cache}'])
    for attempt in range(2):  # decoded (and the cache written), then loaded from the cache
        Path('/proc/self/clear_refs').write_text('5')  # the peak starts again from here
        before = status('VmRSS:')
        data = build_run_data(config, None, torch.device('cpu'))
        print((status('VmHWM:') - before) * 1024, data.train.images.numel() + data.test.images.numel())
        del data
"""


@pytest.mark.slow
def test_a_decoded_split_peaks_at_about_its_own_size(tmp_path):
    folder = jpeg_folder(tmp_path / "data", per_class=600)  # 1,204 images: 92 MB decoded at 160 px
    done = run_python(PEAK.format(root=folder, cache=tmp_path / "cache"))
    assert done.returncode == 0, done.stderr[-3000:]
    for line in done.stdout.split("\n")[:2]:
        peak, decoded = (int(v) for v in line.split())
        assert decoded == 1204 * 3 * 160 * 160
        assert peak <= 1.5 * decoded, f"peak {peak / 2**20:.0f} MB for {decoded / 2**20:.0f} MB decoded"


REFUSED = """
    import resource, sys
    from pathlib import Path
    from vitpe.cli import train

    vm = int(next(l for l in Path('/proc/self/status').read_text().splitlines() if l.startswith('VmSize:')).split()[1])
    resource.setrlimit(resource.RLIMIT_AS, (vm * 1024 + 400 * 2**20, resource.RLIM_INFINITY))  # 400 MB more
    sys.exit(train.main(['--config', 'configs/imagenette.yaml', 'data.dataset=imagefolder', 'data.root={root}',
                         'data.img_size={size}', 'data.cache_dir=off', 'out_dir={out}', 'train.epochs=1',
                         'model.dim=32', 'model.depth=1', 'model.heads=2', 'train.img_sizes=[8]',
                         'train.img_size_epochs=[]', 'model.img_size=8', 'train.batch_size=8', 'train.compile=false',
                         '--no-progress']))
"""


@pytest.mark.slow
def test_a_split_that_cannot_fit_is_refused_before_decoding_in_one_line(tmp_path):
    folder = jpeg_folder(tmp_path / "data", per_class=300)
    big = run_python(REFUSED.format(root=folder, size=512, out=tmp_path / "big"))  # 600 x 786 kB = 472 MB
    assert big.returncode == 2, big.stderr[-3000:]
    assert big.stderr.count("\n") == 1
    assert "needs 0.5 GiB of memory decoded (with its peak) but this process has" in big.stderr
    assert "use data.loader=stream" in big.stderr and not (tmp_path / "big").exists()
    small = run_python(REFUSED.format(root=folder, size=32, out=tmp_path / "small"))  # the same limit: 1.8 MB
    assert small.returncode == 0, small.stderr[-3000:]


def test_statistics_in_chunks_are_the_whole_sets(tmp_path):
    images = torch.randint(0, 256, (37, 3, 9, 11), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    whole = images.double().div(255).transpose(0, 1).reshape(3, -1)
    for chunk in (1, 300, 2**20):  # a row at a time, a few rows, everything at once
        mean, std = channel_stats(images, chunk_values=chunk)
        assert np.allclose(mean, whole.mean(1).tolist(), rtol=1e-12)
        assert np.allclose(std, whole.std(1).tolist(), rtol=1e-12)


def test_the_budget_is_the_least_room_and_a_refusal_says_what_to_do(monkeypatch):
    assert 0 < available_memory() < 2**63  # this machine's own figures are read (they move between reads)
    # Pinned figures, so that the arithmetic is checked without racing the machine's free memory.
    system = {"MemAvailable": 10 * GIB}
    real_proc_values = memory_budget._proc_values
    monkeypatch.setattr(memory_budget, "_proc_values",
                        lambda path, *keys: system if path == "/proc/meminfo" else real_proc_values(path, *keys))
    monkeypatch.setattr(memory_budget, "cgroup_room", lambda: None)
    assert available_memory() == 10 * GIB
    monkeypatch.setattr(memory_budget, "cgroup_room", lambda: 4 * GIB)
    assert available_memory() == 4 * GIB  # the group's limit is the least room
    check_fits(3 * GIB, "a small set")  # 3.75 GiB with its peak: fits
    with pytest.raises(DataError, match=r"^imagewoof at 320 px needs 5\.0 GiB .* has 4\.0 GiB .* use data\.loader=stream"):
        check_fits(4 * GIB, "imagewoof at 320 px")
