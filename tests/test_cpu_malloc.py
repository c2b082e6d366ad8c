"""The glibc allocator tuning that train.py, eval.py and the benchmark apply on CPU."""

import os
import platform
import resource
import subprocess
import sys

import pytest

from vitpe.engine.cpu_malloc import keep_freed_memory


FRESH_BLOCK_FAULTS = """
import resource, torch
from vitpe.engine.cpu_malloc import keep_freed_memory
applied = keep_freed_memory()
def faults_of_a_new_block():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = torch.ones(16, 1024, 1024)  # 64 MiB written: above glibc's default mmap threshold
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del block
    return faults
faults = [faults_of_a_new_block() for _ in range(6)]  # the first blocks fault in either way (the heap grows)
print(applied, max(faults[3:]))
"""


def _second_block(setting: str) -> tuple[bool, int]:
    """In a fresh process (mallopt's settings are per process): whether the tuning applied, and the most page faults
    of a 64 MiB tensor allocated after equal ones were freed, once the heap has grown to hold one."""
    env = {**os.environ, "VITPE_CPU_MALLOC": setting}
    out = subprocess.run([sys.executable, "-c", FRESH_BLOCK_FAULTS], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    return out[0] == "True", int(out[1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc" or not hasattr(resource, "getrusage"),
                    reason="the tuning is glibc's mallopt; page faults are counted by getrusage")
def test_a_freed_block_is_reused_without_page_faults_and_the_setting_turns_it_off():
    tuned, tuned_faults = _second_block("1")
    untouched, untouched_faults = _second_block("0")
    assert tuned and not untouched
    assert untouched_faults > 8000  # glibc unmapped the first block: every page of the second faults again
    assert tuned_faults < untouched_faults / 20  # kept in the heap: reused as it is


def test_a_bad_setting_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("VITPE_CPU_MALLOC", "yes")
    with pytest.raises(ValueError, match="VITPE_CPU_MALLOC must be 0 .* or 1"):
        keep_freed_memory()
