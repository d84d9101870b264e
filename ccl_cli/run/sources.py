"""Where a run's inputs come from: a list known at the start, or inputs that arrive over time.

A source yields InputItems, and None where its input pauses: the engine then
labels what it has read and reports what it has finished, without waiting
for the rest (a stream's batch window, a watched folder gone quiet).
`windowed` makes those pauses for sources that arrive over time: a batch
takes what arrives within the window after its first input, so a lone input
waits at most the window and a steady stream makes batches as large as its
rate. While a source waits for input, the engine's threads `wake` it when a
decode or a write finishes: it pauses then, so that the engine labels that
image, or reports it, at once instead of after the next input.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Protocol

from ..io.inputs import InputItem

#: How often a source waiting for input calls its tick (Ctrl-C, SIGTERM).
POLL_SECONDS = 0.2

#: What a source yields: an input, or None where its input pauses (module docstring).
Arrival = InputItem | None

#: take(timeout): the inputs that arrived, waiting up to `timeout` seconds for the
#: first (an empty list when none came or the source was woken), or None once the
#: input has ended.
Take = Callable[[float], "list[InputItem] | None"]


class Source(Protocol):
    """The inputs of a run."""

    @property
    def total(self) -> int | None:
        """How many inputs there are, when known at the start."""
        ...

    def items(self, tick: Callable[[], None]) -> Generator[Arrival, None, None]:
        """The inputs, in order; `tick` is called while waiting for more (it may raise Stop)."""
        ...

    def untaken(self, taken: int) -> list[InputItem]:
        """The inputs after the first `taken`, which a run that stopped did not get to."""
        ...

    def wake(self) -> None:
        """Have items() pause soon if it is waiting for input (any thread may call this)."""
        ...


@dataclass
class ListSource:
    """Inputs found at the start (files, folders, globs, stdin read to its end)."""

    found: list[InputItem]

    @property
    def total(self) -> int:
        """How many inputs were found (a folder or pattern without images is none)."""
        return sum(not item.empty for item in self.found)

    def items(self, tick: Callable[[], None]) -> Generator[Arrival, None, None]:
        """The inputs found."""
        yield from self.found

    def untaken(self, taken: int) -> list[InputItem]:
        """The inputs found after the first `taken`."""
        return self.found[taken:]

    def wake(self) -> None:
        """Nothing: a list is never waited for."""


def windowed(
    take: Take, window_seconds: float, tick: Callable[[], None]
) -> Generator[Arrival, None, None]:
    """The inputs `take` gives, with a None each time a batch window closes, and each
    time `take` comes back empty while no batch is open (woken: module docstring).

    While no batch is open, `tick` is called every POLL_SECONDS.
    """
    closes: float | None = None  # when the open batch's window ends
    while True:
        now = time.monotonic()
        if closes is not None and now >= closes:
            closes = None
            yield None
            continue
        if closes is None:
            tick()
        arrived = take(POLL_SECONDS if closes is None else closes - now)
        if arrived is None:
            return
        if closes is None:
            if not arrived:
                yield None
                continue
            closes = time.monotonic() + window_seconds
        yield from arrived
