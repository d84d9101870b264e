"""What a run reports: one Record per input, the run's outcome, and the exit code."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import (
    EXIT_HANGUP,
    EXIT_INTERRUPTED,
    EXIT_NO_INPUTS,
    EXIT_OK,
    EXIT_SOME_FAILED,
    EXIT_TERMINATED,
)
from ..io.inputs import InputItem
from ..io.output_paths import OutputPaths


@dataclass
class Record:
    """What became of one input: a summary.csv row and a --json line."""

    item: InputItem
    status: str = "pending"
    message: str = ""
    width: int | None = None
    height: int | None = None
    #: A volume's planes (None for an image).
    depth: int | None = None
    dtype: str = ""
    components: int | None = None
    kept: int | None = None
    seconds: float = 0.0
    outputs: dict[str, str] = field(default_factory=dict)
    #: The backend that labeled it (cpu, cuda; --device auto may use both in one run).
    backend: str = ""

    def row(self) -> list[object]:
        """The summary.csv row (a NUL in a name, which no file can hold, written as \\0)."""
        return [
            str(self.item.path).replace("\0", "\\0"),
            "" if self.item.page is None else self.item.page + 1,
            "" if self.width is None else self.width,
            "" if self.height is None else self.height,
            "" if self.depth is None else self.depth,
            self.dtype,
            "" if self.components is None else self.components,
            "" if self.kept is None else self.kept,
            self.status,
            self.message.replace("\0", "\\0"),
            f"{self.seconds:.4f}",
        ]

    def as_json(self) -> dict[str, Any]:
        """The --json object."""
        return {
            "path": str(self.item.path),
            "page": None if self.item.page is None else self.item.page + 1,
            "status": self.status,
            "message": self.message,
            "width": self.width,
            "height": self.height,
            "depth": self.depth,
            "dtype": self.dtype,
            "components": self.components,
            "kept": self.kept,
            "seconds": round(self.seconds, 6),
            "outputs": self.outputs,
            "backend": self.backend,
        }


class Reporter(Protocol):
    """Where a run tells the user what happens (progress, errors, --json lines)."""

    def start(self, total: int | None) -> None:
        """The run is about to process `total` inputs (None: as many as arrive)."""

    def finished(self, record: Record) -> None:
        """One input is done, whatever its status."""

    def notice(self, message: str) -> None:
        """A one-line message for the user."""


@dataclass
class RunReport:
    """The outcome of a run: how many inputs ended with each status, and the records of a
    run with a list of inputs (one whose inputs arrived over time keeps none: its rows
    are in summary.csv)."""

    counts: Counter[str] = field(default_factory=Counter)
    records: list[Record] = field(default_factory=list)
    interrupted: bool = False
    #: The signal that interrupted the run (SIGINT for Ctrl-C, SIGTERM or SIGHUP).
    signal: int = 0
    #: --fail-fast ended the run at a failure.
    failed_fast: bool = False
    #: Why the run had to stop (--out moved away), when it had to.
    stopped_by: str = ""
    summary: Path | None = None
    seconds: float = 0.0

    def count(self, status: str) -> int:
        """How many inputs ended with `status`."""
        return self.counts[status]

    @property
    def total(self) -> int:
        """How many inputs the run had."""
        return sum(self.counts.values())


class Stop(Exception):
    """Ends the run early (Ctrl-C, SIGTERM, SIGHUP); the summary is still written."""


class Moved(Stop):
    """A folder the run works in (--out, a watched folder) was moved, replaced or deleted:
    the run stops, and says why (the message)."""


class FailFast(Stop):
    """--fail-fast: the first failure ends the run (not an interruption)."""

    #: The message of each input the run did not reach.
    MESSAGE = "stopped after a failure (--fail-fast)"


#: An input that needs labeling, with the files it will produce.
Admitted = tuple[Record, OutputPaths]


class Outcomes:
    """Where each finished record goes: the reporter, the summary, then --fail-fast's stop
    at a failure."""

    def __init__(
        self, reporter: Reporter, fail_fast: bool, summary: Callable[[Record], None] | None = None
    ) -> None:
        self.reporter = reporter
        self.fail_fast = fail_fast
        self.summary = summary

    def finished(self, record: Record) -> None:
        """Report a record whose status is final; under --fail-fast a failure ends the run.

        The summary takes it first: the report (a --json line to a reader that
        stalls) may be cut short by a stop request, the row is in by then.
        """
        if self.summary is not None:
            self.summary(record)
        self.reporter.finished(record)
        if self.fail_fast and record.status == "failed":
            raise FailFast()

    def fail(self, record: Record, message: str) -> None:
        """Finish a record as failed, with the reason."""
        record.status = "failed"
        record.message = message
        self.finished(record)


def exit_code(report: RunReport) -> int:
    """0 all done, 1 some failed, 3 nothing to label, 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP
    (README.md, "Exit codes")."""
    if report.interrupted:
        by_signal: dict[int, int] = {signal.SIGTERM: EXIT_TERMINATED, signal.SIGHUP: EXIT_HANGUP}
        return by_signal.get(report.signal, EXIT_INTERRUPTED)
    if report.count("failed"):
        return EXIT_SOME_FAILED
    if report.count("no-images") == report.total:  # none at all, or only empty folders
        return EXIT_NO_INPUTS
    return EXIT_OK
