"""What ran a measurement: the platform, the CPU's model and caches, the GPU. The same benchmark differed by 3x in a
learned bias's overhead between two VMs of this project, and the same training by 3x in wall time, so every benchmark
result and every epoch of a training run says what ran it."""

from __future__ import annotations

import platform
import re
from pathlib import Path
from typing import Any

import torch


def cpu_model() -> dict[str, str]:
    """The CPU's model name and cache sizes, where Linux tells them (``/proc/cpuinfo``, sysfs): the same benchmark
    differed by 3x in a learned bias's overhead between two VMs of this project, so a result says what ran it."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
            level, kind = (index / "level").read_text().strip(), (index / "type").read_text().strip()
            if kind in ("Unified", "Data"):
                info[f"l{level}_cache"] = (index / "size").read_text().strip()
    except OSError:
        pass  # not Linux, or a restricted /proc: the result just says less
    return info


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux lists them (``flags`` on x86, ``Features`` on Arm, in ``/proc/cpuinfo``);
    empty where they cannot be read: then nothing is known either way, and callers should claim nothing."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def machine() -> dict[str, Any]:
    info = {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(), "cpu_threads": torch.get_num_threads(), **cpu_model()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def cpu_line(info: dict[str, Any]) -> str:
    caches = ", ".join(f"{key[:2].upper()} {info[key]}" for key in ("l2_cache", "l3_cache") if key in info)
    return f"{info.get('cpu_model', info['processor'])}{f' ({caches})' if caches else ''}"


def described(device: torch.device | str = "cpu", processes: int = 1) -> str:
    """One line naming what runs on ``device``: the GPU, or the CPU with its caches and torch's threads, e.g.
    ``"AMD EPYC (L2 1024K, L3 8192K), 1 thread"`` (what a training run records with every epoch); a run of several
    processes (torchrun) says how many, e.g. ``"AMD EPYC (...), 2 processes × 1 thread"`` or ``"4 × NVIDIA H200"``."""
    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        name = torch.cuda.get_device_name(torch.device(device))
        return name if processes == 1 else f"{processes} × {name}"
    threads = torch.get_num_threads()
    each = f"{threads} thread{'s' if threads > 1 else ''}"
    return f"{cpu_line(machine())}, {each if processes == 1 else f'{processes} processes × {each}'}"


_ONE_THREAD_PROCESSES = re.compile(r", (\d+) processes × 1 thread$")
_THREADS = re.compile(r", (\d+ (?:threads?|processes × \d+ threads?))$")


def cpu_of(description: str) -> str:
    """The CPU part of a :func:`described` line, without its threads or processes (``"AMD EPYC (...), 2 threads"`` →
    ``"AMD EPYC (...)"``); a GPU line unchanged."""
    return _THREADS.sub("", description)


def threads_of(description: str) -> str:
    """The threads part of a :func:`described` line, what :func:`cpu_of` leaves out (``"AMD EPYC (...), 2 threads"``
    → ``"2 threads"``); "" for a GPU line or a line that does not say."""
    match = _THREADS.search(description)
    return match.group(1) if match else ""


def as_one_process(description: str) -> str:
    """The :func:`described` line of one process on as many CPU cores as ``description``'s one-thread processes use
    (``"AMD EPYC (...), 2 processes × 1 thread"`` → ``"AMD EPYC (...), 2 threads"``); any other line unchanged."""
    return _ONE_THREAD_PROCESSES.sub(r", \1 threads", description)


def checked_device(name: str, flag: str = "--device") -> torch.device:
    """``name`` as a torch device that exists on this machine; one line naming ``flag`` when it does not (an unknown
    device type, or CUDA where none is available)."""
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"{flag} {name!r} is not a device: use cpu or cuda (cuda:N for one of several GPUs)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{flag} {name}: no CUDA device is available on this machine; use {flag} cpu")
    return device
