"""Whether a decoded image set fits in the memory this process may still use, asked before decoding it.

The in-memory path holds a split as one uint8 tensor (N, 3, S, S), and its peak is about that tensor alone (decoded
into place, statistics summed in chunks: :mod:`vitpe.data.loader`). A set that would not fit is refused in one line
that says how much it needs and names the stream loader, instead of being killed by the kernel without a word.

The memory this process may use is the least of what the system has available (``MemAvailable``), what its control
group allows beyond what the group already uses (cgroup v2 ``memory.max``, v1 ``memory.limit_in_bytes``), and what its
address-space and data limits (``ulimit -v``, ``ulimit -d``) leave.
"""

from __future__ import annotations

import resource
from pathlib import Path

from vitpe.data.datasets import DataError

#: The peak of a decoded split over its tensor's size (threads' decoding buffers, the labels, the cache's bytes):
#: measured peaks are 1.0-1.1x; a set is refused when this multiple does not fit.
PEAK_FACTOR = 1.25
GIB = 2**30


def _proc_values(path: str, *keys: str) -> dict[str, int]:
    """Fields of a ``/proc`` status file given in kB, as bytes (absent fields left out)."""
    values = {}
    try:
        for line in Path(path).read_text().splitlines():
            name, _, rest = line.partition(":")
            if name in keys and rest.split():
                values[name] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return values


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit


def cgroup_room() -> int | None:
    """What this process's control group still allows (its limit less its usage), or None without a limit."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: one unified hierarchy
            folder = Path("/sys/fs/cgroup") / path.lstrip("/")
            limit, used = _read_int(folder / "memory.max"), _read_int(folder / "memory.current")
        elif "memory" in controllers.split(","):
            folder = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            limit, used = _read_int(folder / "memory.limit_in_bytes"), _read_int(folder / "memory.usage_in_bytes")
        else:
            continue
        if limit is not None and used is not None and limit < 2**60:  # v1 writes "no limit" as a huge number
            return max(limit - used, 0)
    return None


def available_memory() -> int:
    """Bytes this process can still allocate: the least of the system's, its cgroup's and its rlimits' room."""
    rooms = []
    system = _proc_values("/proc/meminfo", "MemAvailable")
    if "MemAvailable" in system:
        rooms.append(system["MemAvailable"])
    if (room := cgroup_room()) is not None:
        rooms.append(room)
    status = _proc_values("/proc/self/status", "VmSize", "VmData")
    for limit, used in ((resource.RLIMIT_AS, "VmSize"), (resource.RLIMIT_DATA, "VmData")):
        soft = resource.getrlimit(limit)[0]
        if soft != resource.RLIM_INFINITY and used in status:
            rooms.append(max(soft - status[used], 0))
    return min(rooms) if rooms else 2**63


def check_fits(size: int, what: str) -> None:
    """A :class:`DataError` when ``size`` bytes of decoded images (times :data:`PEAK_FACTOR`) do not fit in
    :func:`available_memory`, saying what ``what`` needs and what to do instead."""
    need, room = size * PEAK_FACTOR, available_memory()
    if need > room:
        raise DataError(f"{what} needs {need / GIB:.1f} GiB of memory decoded (with its peak) but this process has "
                        f"{room / GIB:.1f} GiB available: use data.loader=stream (images decoded as batches need "
                        f"them), or a smaller data.img_size")
