"""A decoded image set kept on disk, so that 13,000 photographs are decoded once rather than by every run.

The cache of one split of one folder at one stored size is one file. It holds the uint8 images, the labels, the class
names and the *fingerprint* of the source files it was decoded from: every file's path (relative to the split's
folder), size in bytes and modification time, and every file's SHA-256. A run that finds a cache with the same
fingerprint loads it (about a second for Imagenette's 9,469 training images). Where only modification times differ
(a folder copied or extracted again: a fresh machine, a container, ``cp`` without ``-p``), the files whose time
changed are hashed (well under a second for all of Imagenette) and, when their contents are the same, the cache is
used and its times brought up to date. A cache whose files have changed is *stale*: the run says so in one line,
decodes the folder again and replaces it. The file is written whole or not at all (:mod:`vitpe.atomic_files`) and
read with ``torch.load(weights_only=True)``, so a cache file cannot run code.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Callable

import torch

from vitpe.atomic_files import write_atomic

CACHE_FORMAT = 2  # 2: each source file's SHA-256 kept beside its size and time
Fingerprint = list[tuple[str, int, int]]  # (path relative to the split folder, size in bytes, mtime in ns)


def default_cache_dir() -> Path:
    """``$VITPE_CACHE`` when set, else ``~/.cache/vitpe``."""
    return Path(os.environ.get("VITPE_CACHE") or Path.home() / ".cache" / "vitpe")


def fingerprint(folder: Path, files: list[Path]) -> Fingerprint:
    """What identifies ``files`` (inside ``folder``) as they are now: relative path, size and modification time."""
    rows = []
    for path in files:
        stat = path.stat()
        rows.append((path.relative_to(folder).as_posix(), stat.st_size, stat.st_mtime_ns))
    return rows


def file_digests(folder: Path, names: list[str]) -> list[str]:
    """The SHA-256 (hex) of each file ``names`` (relative to ``folder``): what the cache compares where a file's
    modification time changed but its size did not."""
    return [file_digest(folder / name) for name in names]


def file_digest(path: Path) -> str:
    """``path``'s SHA-256 (hex); "" for a file that cannot be read (decoding names it)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def cache_path(cache_dir: Path, folder: Path, size: int, extra: str = "") -> Path:
    """The one cache file of ``folder`` stored at ``size`` px: named by the folder's name and a hash of its absolute
    path (two folders of the same name do not share a cache)."""
    key = hashlib.sha256(f"{folder.resolve()}|{size}|{extra}".encode()).hexdigest()[:16]
    return cache_dir / f"{folder.parent.name}-{folder.name}-{size}px-{key}.pt"


def describe_change(old: Fingerprint, new: Fingerprint) -> str:
    """``"3 files added, 1 removed, 2 changed"``: how the source files differ from those a cache was made of."""
    before, after = {row[0]: row[1:] for row in old}, {row[0]: row[1:] for row in new}
    added = len(after.keys() - before.keys())
    removed = len(before.keys() - after.keys())
    changed = sum(before[name] != after[name] for name in before.keys() & after.keys())
    return f"{added} files added, {removed} removed, {changed} changed"


def same_contents(saved: Fingerprint, digests: list[str], folder: Path, prints: Fingerprint) -> bool:
    """Whether the files of ``prints`` are those of a cache's ``saved`` fingerprint and ``digests`` although some
    modification times differ: the same paths and sizes, and the files whose time changed hash as they did."""
    if [row[:2] for row in saved] != [row[:2] for row in prints]:
        return False
    touched = [i for i, (old, new) in enumerate(zip(saved, prints)) if old != new]
    now = file_digests(folder, [prints[i][0] for i in touched])
    return all(digest and digests[i] == digest for i, digest in zip(touched, now))


def write_cache(path: Path, entry: dict) -> None:
    """``entry`` to ``path``, whole or not at all; a disk that cannot take it is reported and skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda f: torch.save(entry, f))
    except OSError as err:
        print(f"vitpe: could not write the decoded cache {path} ({err}); set data.cache_dir or VITPE_CACHE to a "
              f"writable folder, or data.cache_dir=off", file=sys.stderr)


def load_or_decode(path: Path, folder: Path, prints: Fingerprint, decode: Callable[[], dict]) -> dict:
    """The cached entry at ``path`` when it was made from the files of ``folder`` with fingerprint ``prints`` (or
    from files of the same contents, :func:`same_contents`), else ``decode()``'s, written to ``path`` atomically.
    ``decode`` returns a dict of tensors and lists (``images``, ``labels``, ``classes``, ...). A cache that cannot
    be read or was made from other files is replaced, with one line on stderr saying why; one that cannot be written
    (a read-only disk) is reported and skipped: the run goes on."""
    if path.is_file():
        try:
            entry = torch.load(path, map_location="cpu", weights_only=True)
            reason = "" if entry.get("format") == CACHE_FORMAT else "another cache format"
        except Exception as err:  # noqa: BLE001 -- truncated, corrupt or foreign: decode again
            entry, reason = {}, f"unreadable ({type(err).__name__})"
        if not reason:
            saved = [tuple(row) for row in entry["fingerprint"]]
            if saved == prints:
                return entry
            if same_contents(saved, entry["digests"], folder, prints):  # only the times moved: keep it, times updated
                entry["fingerprint"] = [list(row) for row in prints]
                write_cache(path, entry)
                return entry
            reason = f"stale: {describe_change(saved, prints)} since it was made"
        print(f"vitpe: the decoded cache {path} is {reason}; decoding the images again", file=sys.stderr)
    digests = file_digests(folder, [row[0] for row in prints])  # before decoding: a file changed meanwhile is stale
    entry = dict(decode(), format=CACHE_FORMAT, fingerprint=[list(row) for row in prints], digests=digests)
    write_cache(path, entry)
    return entry
