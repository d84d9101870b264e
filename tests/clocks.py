"""A clock the test sets, to stand in for a module's `time` (imported by name, like oracles.py)."""

from __future__ import annotations


class TestClock:
    """monotonic() is what the test says (`now`, which it moves on)."""

    __test__ = False  # not a test class, despite its name

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now
