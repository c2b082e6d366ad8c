"""The glibc allocator tuning that train.py, eval.py and the benchmark apply on CPU."""

import platform

import pytest
import torch

from vitpe.engine.cpu_malloc import keep_freed_memory


def test_applies_on_glibc_and_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("VITPE_CPU_MALLOC", "0")
    assert keep_freed_memory() is False
    monkeypatch.setenv("VITPE_CPU_MALLOC", "1")
    assert keep_freed_memory() is (platform.libc_ver()[0] == "glibc")
    big = torch.ones(64, 1024, 1024)  # 256 MiB from the heap now; still correct memory
    assert float(big.sum()) == 64 * 1024 * 1024


def test_a_bad_setting_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("VITPE_CPU_MALLOC", "yes")
    with pytest.raises(ValueError, match="VITPE_CPU_MALLOC must be 0 .* or 1"):
        keep_freed_memory()
