"""`gccl label -`: paths from standard input, each labeled as soon as its line arrives.

A thread reads the lines and finds the inputs each names (a blocked read, or a
name that takes long to find, holds up nothing else, and a run stopped by
Ctrl-C does not wait for it: the thread is a daemon); the run
takes them in batch windows (sources.windowed), so each input's --json line
is printed as soon as its outputs are written. A line names a file, a
folder or a glob pattern, as an argument does; one that names nothing is a
failed input. The end of the input ends the run.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Generator, Sequence
from functools import partial
from pathlib import Path
from typing import IO, Any

from ..config import Settings
from ..io.inputs import InputItem, Listing, OutPlace, expand, expand_name
from ..io.seen import Seen
from ..io.stdin_names import LongLine, iter_names
from .sources import Arrival, windowed


class StdinSource:
    """The arguments in order, `-` standing for the lines of `stdin` as they arrive."""

    total: int | None = None

    def __init__(
        self,
        specs: Sequence[str],
        settings: Settings,
        window_seconds: float,
        out: OutPlace,
        stdin: IO[Any] | None = None,
    ) -> None:
        self.specs = list(specs)
        self.recursive = settings.recursive
        self.volume = settings.volume
        self.null = settings.null_separated
        self.out = out
        # The arguments' inputs, found now: one that would scan --out stops the run here.
        self.found = {
            spec: expand([spec], self.recursive, out=out, volume=self.volume)
            for spec in self.specs
            if spec != "-"
        }
        # over the arguments and every line, kept on disk: a stream has no end
        self.listing = Listing(settings.relative_to, Seen(on_disk=True))
        self.window_seconds = window_seconds
        self.stdin = stdin or sys.stdin
        self.lines: _Lines | None = None

    def untaken(self, taken: int) -> list[InputItem]:
        """Nothing: what was not read was never an input."""
        return []

    def wake(self) -> None:
        """End a wait for the next line (sources.Source.wake)."""
        if self.lines is not None:
            self.lines.wake()

    def items(self, tick: Callable[[], None]) -> Generator[Arrival, None, None]:
        """The inputs of each argument, with the batch windows' pauses on stdin's."""
        for spec in self.specs:
            if spec != "-":
                yield from self.listing.add(self.found[spec])
                continue
            if self.lines is None:  # (wake needs it)
                expand_line = partial(
                    _expand_line, recursive=self.recursive, out=self.out, volume=self.volume
                )
                self.lines = _Lines(self.stdin, self.null, expand_line)
            yield None  # what came before is labeled without waiting for the stream
            yield from windowed(partial(self._take, self.lines), self.window_seconds, tick)

    def _take(self, lines: _Lines, timeout: float) -> list[InputItem] | None:
        got = lines.take(timeout)
        if got is None:
            return None
        return self.listing.add(got)


def _expand_line(
    line: str | LongLine, recursive: bool, out: OutPlace, volume: bool
) -> list[InputItem]:
    """The inputs one line names (a line `-` is a file of that name, not stdin again)."""
    if line == "-":
        return [InputItem(Path("-"), Path("-"), "no such file or directory")]
    return expand_name(line, recursive, out, volume=volume)


#: What wake() puts among the lines.
_WAKE = object()


class _Lines:
    """The inputs of the non-empty names of a stream (lines, or NUL-separated with `null`;
    inputs.py's expand says what a name keeps), read and found by a daemon thread as they
    come: a name that takes long to find (a folder to scan, a TIFF's pages to count, a
    stalled file system) holds up neither the run nor its stop."""

    def __init__(
        self, stream: IO[Any], null: bool, expand: Callable[[str | LongLine], list[InputItem]]
    ) -> None:
        self.queue: queue.SimpleQueue[list[InputItem] | object | None] = queue.SimpleQueue()
        self.ended = False
        threading.Thread(
            target=self._read, args=(stream, null, expand), name="gccl-stdin", daemon=True
        ).start()

    def _read(
        self, stream: IO[Any], null: bool, expand: Callable[[str | LongLine], list[InputItem]]
    ) -> None:
        try:
            for name in iter_names(stream, null):
                if name:
                    self.queue.put(expand(name))
        finally:
            self.queue.put(None)

    def wake(self) -> None:
        """End the wait of a take (it returns the inputs that came, maybe none)."""
        self.queue.put(_WAKE)

    def take(self, timeout: float) -> list[InputItem] | None:
        """The inputs that arrived, waiting up to `timeout` for the first (or a wake);
        None at the end."""
        if self.ended:
            return None
        try:
            entry = self.queue.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return []
        got: list[InputItem] = []
        while entry is not None:
            if isinstance(entry, list):
                got.extend(entry)
            try:
                entry = self.queue.get_nowait()
            except queue.Empty:
                return got
        self.ended = True
        return got or None
