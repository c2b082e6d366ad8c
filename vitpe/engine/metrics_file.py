"""``metrics.jsonl``: one JSON object per finished epoch, appended whole, read back tolerating a cut last line.

A record is appended with one write, flushed and fsynced, so a crash leaves at most one partial line at the end
(a full disk, a kill during the write). Reading skips such a last line -- the epoch it belonged to is trained again
from the checkpoint on resume, which rewrites the file atomically. A damaged line before the last one is corrupt data,
not a crash, and is an error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from vitpe.atomic_files import write_text_atomic
from vitpe.loading.checkpoint import CheckpointError


def append_record(record: dict[str, Any], path: str | os.PathLike) -> None:
    line = (json.dumps(record) + "\n").encode()
    with open(path, "ab") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def read_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of ``path`` (none when it does not exist), without a partial last line."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    records = []
    for i, line in enumerate(lines):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break  # cut short by a crash while it was written
            raise CheckpointError(f"{path}, line {i + 1}, is not a JSON record: the file is damaged; restore it or "
                                  f"start a new out_dir") from None
    return records


def save_records(records: list[dict[str, Any]], path: str | os.PathLike) -> None:
    """Replace ``path`` by ``records`` atomically (temporary file + rename)."""
    write_text_atomic("".join(json.dumps(r) + "\n" for r in records), path)
