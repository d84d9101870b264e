"""What a command says on stderr: one-line messages, the progress display, the closing line.

Progress and messages go to stderr, results (--json) to stdout. The progress
display (a bar, images done of all, images per second, times) is drawn only
where someone watches: on a terminal. A log file, a pipe, cron or CI gets the
messages and the closing line, plain. rich loads at the first message, so a
quiet run that goes well never imports it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from .run.records import Record, RunReport


@functools.cache
def stderr_console() -> Console:
    """rich's console on stderr, made at the first message."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)  # one line per message


def say(message: str, style: str = "") -> None:
    """One line on stderr (above the progress display, which shares the console); a closed
    stderr loses it and nothing else."""
    from rich.text import Text

    with contextlib.suppress(OSError, ValueError):
        stderr_console().print(Text(message, style=style))


def _progress() -> Progress:
    """The progress display: a bar, images done of all, images per second, times."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        Task,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class ImagesPerSecond(ProgressColumn):
        """Images labeled per second over the whole run so far (rich's own speed is too
        jumpy); inputs skipped or failed are not images labeled."""

        def render(self, task: Task) -> Text:
            elapsed = task.finished_time or task.elapsed
            labeled = task.fields.get("labeled", 0)
            if not elapsed or not labeled:
                return Text("")
            return Text(f"{labeled / elapsed:.1f} img/s")

    return Progress(
        TextColumn("labeling"),
        BarColumn(),
        MofNCompleteColumn(),
        ImagesPerSecond(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=stderr_console(),
        transient=False,
    )


class ConsoleReporter:
    """Progress and messages on stderr; with --json one object per input on stdout.

    Each failed input gets a line with its reason; an input labeled with a
    word of warning (a threshold no value crosses) and a folder or pattern
    without images get theirs too. The progress display shows on a terminal
    only (module docstring). --quiet leaves only the errors: no progress, no
    notices (the closing line is the caller's to leave out).
    """

    def __init__(self, quiet: bool, as_json: bool) -> None:
        self.as_json = as_json
        self.quiet = quiet
        self.progress: Progress | None = None
        self.task: Any = None
        self.labeled = 0
        #: How many --json lines went out before stdout was closed (None while it is open).
        self.stdout_closed_after: int | None = None
        self._lines = 0

    def start(self, total: int | None) -> None:
        """Show the progress display, on a terminal, for `total` inputs (None: unknown)."""
        if self.quiet or total == 0 or not stderr_console().is_terminal:
            return
        self.progress = _progress()
        self.progress.start()
        self.task = self.progress.add_task("label", total=total)

    def finished(self, record: Record) -> None:
        if record.status == "failed":
            say(f"gccl: {record.item.display}: {record.message}", "red")
        elif record.message and record.status in ("ok", "no-images"):
            self.notice(f"{record.item.display}: {record.message}")
        if self.as_json and self.stdout_closed_after is None:
            self._json_line(record)
        if self.progress is not None and self.task is not None and record.status != "no-images":
            self.labeled += record.status == "ok"
            self.progress.update(self.task, advance=1, labeled=self.labeled)

    def _json_line(self, record: Record) -> None:
        """Print the record's --json line; a closed stdout (`--json | head`) stops the lines
        and nothing else: the run finishes its outputs and summary.csv."""
        from .run.interrupts import interruptible
        from .run.records import Stop

        line = json.dumps(record.as_json()) + "\n"
        buffered = False
        try:
            with interruptible():  # a reader that stalls does not hold up a stop request
                sys.stdout.write(line)
                buffered = True
                sys.stdout.flush()
        except Stop:
            # A stop that came before the line reached stdout's buffer: it goes there now (the
            # run's end flushes it), so --json tells every input the summary tells.
            if not buffered:
                with contextlib.suppress(OSError, ValueError):
                    sys.stdout.write(line)
            raise
        except (OSError, ValueError):  # EPIPE, or stdout closed in this process
            self.stdout_closed_after = self._lines
            self.notice(f"stdout was closed after {self._lines} --json line(s); the run goes on")
            return
        self._lines += 1

    def notice(self, message: str) -> None:
        if not self.quiet:
            say(f"gccl: {message}", "yellow")

    def stop(self, abandoned: bool = False) -> None:
        """End the progress display; an abandoned run (exit 2) leaves no bar behind."""
        if self.progress is None:
            return
        if abandoned and self.task is not None:
            self.progress.remove_task(self.task)
        self.progress.stop()


def closing_line(report: RunReport) -> str:
    """What a finished run says last: how many inputs it labeled of how many (a folder or
    pattern without images is no input), what else became of them, where the summary is."""
    done, failed, skipped = report.count("ok"), report.count("failed"), report.count("skipped")
    empty = report.count("no-images")
    ending = f"in {report.seconds:.2f} s; summary: {report.summary}"
    if skipped and skipped == report.total:
        return f"nothing new: {skipped} skipped {ending}"
    parts = [f"labeled {done} of {report.total - empty} input(s)"]
    if skipped:
        parts.append(f"{skipped} skipped")
    if failed:
        parts.append(f"{failed} failed")
    not_run = report.count("not-run")
    if not_run:
        parts.append(f"{not_run} not run")
    if empty:
        parts.append(f"{empty} without images (folders or patterns)")
    return f"{', '.join(parts)} {ending}"
