"""What a run has met (paths, outputs, file versions), each with the value it was first given
(or given since: set).

A run with a list of inputs keeps this in memory. A run whose inputs arrive
over time (a stream, a watched folder) has no end, so it keeps it in a
private SQLite database on disk instead (a temporary file that SQLite deletes
when it is closed, or when the process ends): memory stays flat however many
inputs arrive, and a lookup stays small beside an input's labeling. Should that file
fail (its disk full), the run goes on keeping new keys in memory: the keys
on disk are then forgotten, so an input met before may be labeled again,
which is better than a run that stops.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite3


class Seen:
    """Keys met, each with its first value: in memory, or with `on_disk` in SQLite."""

    def __init__(self, on_disk: bool = False) -> None:
        self._memory: dict[Hashable, str] = {}
        self._disk: sqlite3.Connection | None = None
        if on_disk:
            import sqlite3  # an import a run with a list of inputs does without

            self._errors: type[Exception] = sqlite3.Error
            # "" names a private temporary database; nothing in it outlives the run, so it
            # needs no journal and no syncs.
            self._disk = sqlite3.connect("", isolation_level=None, check_same_thread=False)
            self._disk.execute("PRAGMA journal_mode=OFF")
            self._disk.execute("PRAGMA synchronous=OFF")
            self._disk.execute("CREATE TABLE seen (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID")

    def first(self, key: Hashable, value: str = "") -> str | None:
        """The value `key` was first given, or None when it is new (it then gets `value`)."""
        if self._disk is not None:
            text = repr(key)
            inserted = self._query("INSERT OR IGNORE INTO seen VALUES (?, ?)", text, value)
            if inserted is not None:
                if inserted.rowcount:
                    return None
                row = self._query("SELECT value FROM seen WHERE key = ?", text)
                if row is not None:
                    return str(row.fetchone()[0])
        if key in self._memory:
            return self._memory[key]
        self._memory[key] = value
        return None

    def get(self, key: Hashable) -> str | None:
        """The value `key` has (None when it was never met)."""
        if self._disk is not None:
            row = self._query("SELECT value FROM seen WHERE key = ?", repr(key))
            if row is not None:
                found = row.fetchone()
                return None if found is None else str(found[0])
        return self._memory.get(key)

    def set(self, key: Hashable, value: str) -> None:
        """Give `key` the value `value`, met before or not."""
        stored = self._disk is not None and (
            self._query("INSERT OR REPLACE INTO seen VALUES (?, ?)", repr(key), value) is not None
        )
        if not stored:
            self._memory[key] = value

    def __contains__(self, key: object) -> bool:
        if self._disk is not None:
            found = self._query("SELECT 1 FROM seen WHERE key = ?", repr(key))
            if found is not None:
                return found.fetchone() is not None
        return key in self._memory

    def _query(self, statement: str, *values: str) -> Any:
        """The cursor of `statement`, or None once the database failed (then in memory)."""
        assert self._disk is not None
        try:
            return self._disk.execute(statement, values)
        except self._errors:
            self._disk = None
            return None
