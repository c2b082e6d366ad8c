"""Stop cleanly when asked: SIGTERM (what schedulers send before they kill) and SIGINT (Ctrl-C).

The handlers only record the request. The training loop asks :meth:`StopRequests.should_stop` after every optimiser
step; the run then writes a checkpoint at that step (atomically, as always) and raises :class:`Preempted`, which
train.py turns into one line and the exit code :data:`PREEMPTED_EXIT`. Under torchrun every rank takes part in the
question (one tiny all-reduce per step), so all ranks stop at the same step even when the signal reaches them at
different times. A second Ctrl-C stops at once, without a new checkpoint (the last one stays intact).
"""

from __future__ import annotations

import signal
from typing import Any

import torch

from vitpe.engine.distributed import DistInfo, all_reduce_sum

#: Exit code of a run stopped by SIGTERM / SIGINT after writing its checkpoint (EX_TEMPFAIL: "try again later").
PREEMPTED_EXIT = 75


class Preempted(Exception):
    """The run stopped on a signal after checkpointing; ``--resume`` continues it exactly."""


class StopRequests:
    """Records SIGTERM / SIGINT while installed (``with StopRequests() as stops: ...``)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now
        self.signum = signum

    def __enter__(self) -> "StopRequests":
        for s in self.SIGNALS:
            self._previous[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""

    def should_stop(self, device: torch.device, dist_info: DistInfo) -> bool:
        """Whether any rank was asked to stop (the same answer on every rank)."""
        asked = float(self.signum is not None)
        if dist_info.enabled:
            asked = all_reduce_sum([asked], device, dist_info)[0]
        return asked > 0
