"""The run's stop requests: Ctrl-C, SIGTERM, SIGHUP, and an --out that moved away."""

from __future__ import annotations

import signal
import time
from types import FrameType
from typing import Any

from ..io.out_dir import OutDir
from .interrupts import cut_short_here
from .records import Moved, RunReport, Stop

#: How often a run makes sure --out is still where it found it, in seconds.
OUT_CHECK_SECONDS = 0.25


class StopRequests:
    """Ctrl-C, SIGTERM (cron's timeout, kill) and SIGHUP (a closed terminal or ssh session)
    ask the run to stop at its next safe point, and so does an --out that is no longer where
    the run found it.

    The handlers only set a flag, which the run checks between steps, so no
    exception lands inside a half-done step (a lock, a queue, a file write);
    only a step marked interruptible (interrupts.py) ends at once. A second
    Ctrl-C stops at once. --out is looked at every OUT_CHECK_SECONDS.
    """

    _SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self, out: OutDir) -> None:
        self.out = out
        self.requested = False
        #: The signal that asked for the stop (0 before one did).
        self.signal = 0
        self._previous: dict[int, Any] = {}
        self._next_look = 0.0

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        self.signal = self.signal or signum
        if cut_short_here():  # a read or write in this thread (interrupts.py)
            raise Stop()

    def honour(self, report: RunReport) -> None:
        """Mark `report` interrupted by a stop requested that no check raised: one that
        came as the inputs ended (a stream's writer stopped with gccl closes stdin) or while
        the summary was written. The run then ends by that signal, not as a finished run."""
        if self.requested and not (report.interrupted or report.stopped_by):
            report.interrupted = True
            report.signal = self.signal

    def check(self) -> None:
        """Raise Stop if a stop was requested, Moved if --out is gone."""
        if self.requested:
            raise Stop()
        now = time.monotonic()
        if now >= self._next_look:
            self._next_look = now + OUT_CHECK_SECONDS
            moved = self.out.moved()
            if moved:
                raise Moved(moved)

    def __enter__(self) -> StopRequests:
        try:
            for signum in self._SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        except ValueError:  # not the main thread (an embedding program): leave signals alone
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
