"""Steps that a stop request may cut short at any point.

A run's Ctrl-C, SIGTERM and SIGHUP handlers (command.py) only set a flag that the
run checks between steps, so that no exception lands inside a half-done
step. A step that its thread may abandon anywhere, and that may block for
ever (reading an input from a stalled network file system, writing outputs
there), runs inside `interruptible()`: a stop request that comes meanwhile
ends it at once (the handler raises Stop). Abandoning a write leaves what a
kill would: whole files and perhaps a temporary that the next run removes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: The threads inside such a step (signal handlers run in the main thread).
_inside: set[int] = set()


@contextmanager
def interruptible() -> Iterator[None]:
    """Mark the calling thread as in a step that a stop request may cut short."""
    ident = threading.get_ident()
    try:
        _inside.add(ident)
        yield
    finally:
        _inside.discard(ident)


def cut_short_here() -> bool:
    """Whether the calling thread (a signal handler's) is in an interruptible step."""
    return threading.get_ident() in _inside
