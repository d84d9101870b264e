"""What a run has met (paths, outputs, file identities), each with the value it was first given.

A run with a list of inputs keeps this in memory. A run whose inputs arrive
over time (a stream, a watched folder) has no end, so it keeps it in a
private SQLite database on disk instead (a temporary file that SQLite deletes
when it is closed, or when the process ends): memory stays flat however many
inputs arrive, and a lookup costs about 10 microseconds.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3


class Seen:
    """Keys met, each with its first value: in memory, or with `on_disk` in SQLite."""

    def __init__(self, on_disk: bool = False) -> None:
        self._memory: dict[Hashable, str] = {}
        self._disk: sqlite3.Connection | None = None
        if on_disk:
            import sqlite3  # (5 ms of import a run with a list of inputs does without)

            # "" names a private temporary database; nothing in it outlives the run, so it
            # needs no journal and no syncs.
            self._disk = sqlite3.connect("", isolation_level=None, check_same_thread=False)
            self._disk.execute("PRAGMA journal_mode=OFF")
            self._disk.execute("PRAGMA synchronous=OFF")
            self._disk.execute("CREATE TABLE seen (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID")

    def first(self, key: Hashable, value: str = "") -> str | None:
        """The value `key` was first given, or None when it is new (it then gets `value`)."""
        if self._disk is None:
            if key in self._memory:
                return self._memory[key]
            self._memory[key] = value
            return None
        text = repr(key)
        if self._disk.execute("INSERT OR IGNORE INTO seen VALUES (?, ?)", (text, value)).rowcount:
            return None
        row = self._disk.execute("SELECT value FROM seen WHERE key = ?", (text,)).fetchone()
        return str(row[0])

    def __contains__(self, key: object) -> bool:
        if self._disk is None:
            return key in self._memory
        found = self._disk.execute("SELECT 1 FROM seen WHERE key = ?", (repr(key),)).fetchone()
        return found is not None
