"""One owner per run folder: ``RUN/.lock`` names the process that trains it.

The lock is a file created atomically (``O_CREAT | O_EXCL``) holding the owner's pid, host, process start time and
start date. A second ``train.py`` on the same folder -- or a ``--resume`` while the run is still going -- stops with
one line naming the owner. A lock left by a process that died (SIGKILL, a crash, a reboot) on this host is detected
(no process with that pid and start time) and taken over with a message. A lock from another host cannot be checked
from here: the message says so and how to remove it. Evaluation reads run folders without the lock.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import time
from pathlib import Path


class RunLockedError(RuntimeError):
    """Another live process owns the run folder."""


def process_start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, from /proc), or None if there is no such process.
    With the pid it identifies a process even after its pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]  # field 22, counted after the command name
    except (OSError, IndexError):
        if not Path("/proc").is_dir():  # not Linux: fall back on "the pid exists"
            try:
                os.kill(pid, 0)
                return "unknown"
            except ProcessLookupError:
                return None
            except PermissionError:
                return "unknown"
        return None


class RunLock:
    """``with RunLock(folder): ...`` -- hold the folder's lock for the block; also :meth:`acquire` / :meth:`release`."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.path = Path(folder) / ".lock"
        self.held = False
        self.message = ""  # set when a stale lock was taken over

    def owner(self) -> dict | None:
        try:
            return json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):
            return None

    def _alive(self, owner: dict) -> bool | None:
        """Whether the owner still runs: True, False, or None when that cannot be told from this host."""
        if owner.get("host") != socket.gethostname():
            return None
        started = process_start_time(int(owner.get("pid", -1)))
        return started is not None and (started == owner.get("start") or "unknown" in (started, owner.get("start")))

    def acquire(self) -> "RunLock":
        me = {"pid": os.getpid(), "host": socket.gethostname(), "start": process_start_time(os.getpid()),
              "since": datetime.datetime.now().isoformat(timespec="seconds")}
        for _ in range(3):  # create, or take over a stale lock and create again
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = self.owner()
                if owner is None:  # being written this instant, or left unreadable: look again shortly
                    time.sleep(0.2)
                    if self.owner() is None:
                        self._stale("an unreadable lock", None)
                    continue
                alive = self._alive(owner)
                who = f"pid {owner.get('pid')} on {owner.get('host')} (since {owner.get('since')})"
                if alive is None:
                    raise RunLockedError(f"{self.path.parent} is locked by {who}, another host: if that run has "
                                         f"stopped, delete {self.path} and start again") from None
                if alive:
                    raise RunLockedError(f"{self.path.parent} is being trained by {who}; wait for it to finish or "
                                         f"stop it (it checkpoints on SIGTERM), then --resume") from None
                self._stale(f"the lock of {who}, which is no longer running", owner)
                continue
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
            self.held = True
            return self
        raise RunLockedError(f"could not lock {self.path.parent}: its lock keeps changing (another process?)")

    def _stale(self, what: str, owner: dict | None) -> None:
        if self.owner() == owner:  # still the same stale lock (another process may have taken it over meanwhile)
            self.message = f"took over {what} ({self.path})"
            self.path.unlink(missing_ok=True)

    def release(self) -> None:
        if self.held:
            owner = self.owner()
            if owner is not None and owner.get("pid") == os.getpid():
                self.path.unlink(missing_ok=True)
            self.held = False

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
