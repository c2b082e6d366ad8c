"""Files written whole or not at all: a crash, a signal or a full disk leaves the previous file (or none) and no
temporary file behind, and a reader never sees half of one. Checkpoints, configs, metrics, evaluation reports and
benchmark results are all written this way."""

from __future__ import annotations

import io
import os
import secrets
from pathlib import Path
from typing import Any, BinaryIO, Callable


def write_atomic(path: str | os.PathLike, write: Callable[[BinaryIO], Any]) -> None:
    """``write(f)`` to a temporary file in ``path``'s folder, fsync, then rename it over ``path``: a crash or a full
    disk leaves the previous file whole and no temporary file behind. The file gets the permissions of any new file
    (0666 less the umask), not ``mkstemp``'s owner-only 0600, so a group that shares runs can read them."""
    path = Path(path)
    fd, tmp = _new_temporary_file(path)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _new_temporary_file(path: Path) -> tuple[int, str]:
    """A new, empty file beside ``path`` under a name no other writer holds, opened for writing, created as
    ``open()`` creates files (0666 less the umask)."""
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666), str(tmp)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def write_text_atomic(text: str, path: str | os.PathLike) -> None:
    """Write ``text`` to ``path`` atomically (:func:`write_atomic`)."""
    write_atomic(path, lambda f: f.write(text.encode()))


def write_bytes_atomic(data: bytes, path: str | os.PathLike) -> None:
    """Write ``data`` to ``path`` atomically (:func:`write_atomic`)."""
    write_atomic(path, lambda f: f.write(data))


def save_figure_atomic(fig: Any, path: str | os.PathLike, **savefig: Any) -> None:
    """Render the matplotlib figure ``fig`` (format from ``path``'s suffix) and write it atomically; the figure is
    closed either way."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format=Path(path).suffix.lstrip(".") or "png", **savefig)
    finally:
        plt.close(fig)
    write_bytes_atomic(buffer.getvalue(), path)
