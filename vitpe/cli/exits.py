"""How train.py and eval.py end: one line on stderr and an exit code, never a traceback (unless ``--debug``).

====  ===============================================================================
code  meaning
====  ===============================================================================
0     done
2     an error in the input (config, data, checkpoint, file system): the line says what and what to do
75    preempted (SIGTERM / SIGINT): a checkpoint was written at the last step; ``--resume`` continues exactly
130   interrupted (train.py: a second Ctrl-C): stopped at once; the line says what was kept and how to go on
143   terminated (SIGTERM) where no step can be finished first (eval.py, the benchmark, train.py before its loop):
      stopped at once; the line says what was kept and how to go on
1     an unexpected error (a bug): rerun with ``--debug`` for the traceback
====  ===============================================================================
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import sys
import threading
from typing import Callable, Iterator

from vitpe.config import ConfigError
from vitpe.data import DataError
from vitpe.data.stream_loader import worker_death
from vitpe.engine.loop import NonFiniteLossError
from vitpe.engine.preemption import PREEMPTED_EXIT, Preempted
from vitpe.engine.run_lock import RunLockedError
from vitpe.loading.checkpoint import CheckpointError
from vitpe.pe import ResizeError

INPUT_ERRORS = (ConfigError, DataError, CheckpointError, NonFiniteLossError, ResizeError, RunLockedError, ValueError)


TERMINATED_EXIT = 128 + signal.SIGTERM


class Terminated(BaseException):
    """SIGTERM reached a command outside the training loop (whose own handler checkpoints first)."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


@contextlib.contextmanager
def sigterm_stops_at_once() -> Iterator[None]:
    """Inside the block SIGTERM raises :class:`Terminated`, so the command can say what it kept before it exits (by
    default Python dies on it without a word); the training loop's preemption handler takes over inside it."""
    if threading.current_thread() is not threading.main_thread():  # signal handlers belong to the main thread
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def describe_os_error(err: OSError, go_on: str) -> str:
    """An operating-system error as one actionable sentence; ``go_on`` says how the command continues once the cause
    is fixed (e.g. "--resume the run")."""
    where = f" ({err.filename})" if err.filename else ""
    if err.errno == errno.ENOSPC:
        return (f"no space left on the device{where}; nothing was half-written (every file is written whole or not at "
                f"all): free some space, then {go_on}")
    if isinstance(err, (PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)) or \
            err.errno in (errno.EROFS, errno.EACCES):
        return f"cannot write or read{where}: {err.strerror}; choose another output folder or fix its permissions"
    return f"{err.strerror or err}{where}"


def add_debug_flag(parser: argparse.ArgumentParser) -> None:
    """The ``--debug`` flag every command has (``VITPE_DEBUG=1`` sets it too, in :func:`run_cli`)."""
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (also VITPE_DEBUG=1)")


def run_cli(body: Callable[[], None], debug: bool, interrupted: str, go_on: str) -> int:
    """Run ``body`` and turn its outcome into an exit code, printing one line for anything but success.
    ``debug`` (or ``VITPE_DEBUG`` in the environment): the traceback instead. ``interrupted`` is that line for Ctrl-C
    and SIGTERM (what the command kept, and how to go on); ``go_on`` how the command continues after a fault it names
    (a full disk)."""
    debug = debug or bool(os.environ.get("VITPE_DEBUG"))
    try:
        with sigterm_stops_at_once():
            body()
    except Preempted as stop:
        print(str(stop), file=sys.stderr)
        return PREEMPTED_EXIT
    except (Terminated, KeyboardInterrupt) as stop:
        if debug:
            raise
        terminated = isinstance(stop, Terminated)
        print(f"{'terminated (SIGTERM)' if terminated else 'interrupted'}: {interrupted}", file=sys.stderr)
        return TERMINATED_EXIT if terminated else 130
    except (*INPUT_ERRORS, OSError) as err:
        if debug:
            raise
        print(f"error: {describe_os_error(err, go_on) if isinstance(err, OSError) else err}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 -- the last line of defence of a command-line tool
        if debug:
            raise
        if line := worker_death(err):  # torch raises it wherever the process is when a worker dies
            print(f"error: {line}", file=sys.stderr)
            return 2
        print(f"error: unexpected {type(err).__name__}: {err} (rerun with --debug for the traceback, and please "
              f"report it)", file=sys.stderr)
        return 1
    return 0
