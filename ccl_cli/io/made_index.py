"""Where a run holds the record of made files (io/made.py) while it runs: the entries by path,
the set of identities, the paths made for each input file, and the paths touched since the
last merge.

Small records are held in memory. Past MEMORY_ENTRIES entries (a long record, or a run that
makes many files) the index moves into a private temporary SQLite database, whose memory is its
page cache: a record of millions of files is read in time linear in its lines and in bounded
memory. A run whose inputs arrive over time starts there (its record grows without end).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .made_lines import NO_FACTS, Entry
from .owner import Facts, FileIdentity

if TYPE_CHECKING:
    import sqlite3

#: Entries held in memory before the index moves to disk (a few MB).
MEMORY_ENTRIES = 1 << 13
#: Rows a database read takes at a time.
_ROWS = 4096
#: An entry into the database; what a file was made for is never forgotten.
_INSERT = (
    "INSERT INTO made VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (key, inode, size, mtime) DO UPDATE SET file = excluded.file, "
    "page = excluded.page, made_by = excluded.made_by, digest = excluded.digest "
    "WHERE excluded.file IS NOT NULL OR excluded.digest IS NOT NULL "
    "OR excluded.made_by IS NOT NULL"
)


class _MemoryIndex:
    def __init__(self) -> None:
        self.by_key: dict[str, dict[FileIdentity, Facts]] = {}
        self.all: set[FileIdentity] = set()
        self.by_file: dict[str, set[str]] = {}
        self.touched: set[str] = set()
        self.count = 0

    def add(self, key: str, identity: FileIdentity, facts: Facts) -> None:
        listed = self.by_key.setdefault(key, {})
        if identity not in listed:
            self.count += 1
            listed[identity] = facts
        elif facts != NO_FACTS:  # (what a file was made for is never forgotten)
            listed[identity] = facts
        self.all.add(identity)
        if facts.file is not None:
            self.by_file.setdefault(facts.file, set()).add(key)

    def get(self, key: str) -> dict[FileIdentity, Facts]:
        return dict(self.by_key.get(key, {}))

    def replace(self, key: str, identities: set[FileIdentity]) -> None:
        listed = self.by_key.get(key, {})
        kept = {i: f for i, f in listed.items() if i in identities}
        self.count -= len(listed) - len(kept)
        if kept:
            self.by_key[key] = kept
        else:
            self.by_key.pop(key, None)

    def has(self, identity: FileIdentity) -> bool:
        return identity in self.all

    def made_for(self, file: str) -> list[Entry]:
        return [
            (key, identity, facts)
            for key in sorted(self.by_file.get(file, ()))
            for identity, facts in self.by_key.get(key, {}).items()
            if facts.file == file
        ]

    def items(self) -> Iterator[Entry]:
        for key in sorted(self.by_key):
            for identity, facts in sorted(self.by_key[key].items()):
                yield key, identity, facts

    def touch_many(self, keys: Iterable[str]) -> None:
        self.touched.update(keys)

    def touched_keys(self) -> Iterator[str]:
        yield from sorted(self.touched)

    def untouch(self, keep: set[str]) -> None:
        self.touched = self.touched & keep


class _DiskIndex:
    def __init__(self) -> None:
        import sqlite3

        self.db: sqlite3.Connection = sqlite3.connect(
            "", isolation_level=None, check_same_thread=False
        )
        self.lock = threading.Lock()
        for statement in (
            "PRAGMA journal_mode=OFF",
            "PRAGMA synchronous=OFF",
            "CREATE TABLE made (key TEXT, inode INT, size INT, mtime INT, file TEXT, page INT, "
            "made_by TEXT, digest TEXT, PRIMARY KEY (key, inode, size, mtime)) WITHOUT ROWID",
            "CREATE INDEX made_identity ON made (inode, size, mtime)",
            "CREATE INDEX made_file ON made (file)",
            "CREATE TABLE touched (key TEXT PRIMARY KEY) WITHOUT ROWID",
        ):
            self.db.execute(statement)

    def _run(self, statement: str, *values: Any) -> list[Any]:
        with self.lock:
            return self.db.execute(statement, values).fetchall()

    def _rows(self, statement: str, *values: Any) -> Iterator[Any]:
        """The rows of a query, a few thousand at a time (never all in memory)."""
        with self.lock:
            cursor = self.db.cursor()
            cursor.execute(statement, values)
        while True:
            with self.lock:
                rows = cursor.fetchmany(_ROWS)
            if not rows:
                return
            yield from rows

    def add(self, key: str, identity: FileIdentity, facts: Facts) -> None:
        self._run(_INSERT, key, *identity, *facts)

    def add_many(self, entries: list[Entry]) -> None:
        with self.lock:
            self.db.execute("BEGIN")
            try:
                rows = [(key, *identity, *facts) for key, identity, facts in entries]
                self.db.executemany(_INSERT, rows)
            finally:
                self.db.execute("COMMIT")

    def get(self, key: str) -> dict[FileIdentity, Facts]:
        rows = self._run(
            "SELECT inode, size, mtime, file, page, made_by, digest FROM made WHERE key = ?", key
        )
        return {(r[0], r[1], r[2]): _facts(r[3:]) for r in rows}

    def replace(self, key: str, identities: set[FileIdentity]) -> None:
        for identity in set(self.get(key)) - identities:
            self._run(
                "DELETE FROM made WHERE key = ? AND inode = ? AND size = ? AND mtime = ?",
                key, *identity,
            )  # fmt: skip

    def has(self, identity: FileIdentity) -> bool:
        rows = self._run(
            "SELECT 1 FROM made WHERE inode = ? AND size = ? AND mtime = ? LIMIT 1", *identity
        )
        return bool(rows)

    def made_for(self, file: str) -> list[Entry]:
        rows = self._run(
            "SELECT key, inode, size, mtime, file, page, made_by, digest FROM made "
            "WHERE file = ? ORDER BY key",
            file,
        )
        return [(r[0], (r[1], r[2], r[3]), _facts(r[4:])) for r in rows]

    def items(self) -> Iterator[Entry]:
        query = "SELECT * FROM made ORDER BY key, inode, size, mtime"
        for r in self._rows(query):
            yield r[0], (r[1], r[2], r[3]), _facts(r[4:])

    def touch_many(self, keys: Iterable[str]) -> None:
        with self.lock:
            self.db.executemany("INSERT OR IGNORE INTO touched VALUES (?)", [(k,) for k in keys])

    def touched_keys(self) -> Iterator[str]:
        # (streamed: pruning changes the table `made` meanwhile, never `touched`)
        for row in self._rows("SELECT key FROM touched ORDER BY key"):
            yield row[0]

    def untouch(self, keep: set[str]) -> None:
        self._run("DELETE FROM touched")
        self.touch_many(keep)


def _facts(row: Any) -> Facts:
    facts = Facts(*row)
    return NO_FACTS if facts == NO_FACTS else facts


class Index:
    """The index of one record: in memory until it holds MEMORY_ENTRIES entries, then on disk
    (`on_disk`: from the start)."""

    def __init__(self, on_disk: bool = False) -> None:
        self.held: _MemoryIndex | _DiskIndex = _DiskIndex() if on_disk else _MemoryIndex()
        self.lock = threading.Lock()

    def add(self, key: str, identity: FileIdentity, facts: Facts) -> None:
        with self.lock:
            held = self.held
            held.add(key, identity, facts)
            if isinstance(held, _MemoryIndex) and held.count > MEMORY_ENTRIES:
                self.held = _spilled(held)

    def add_many(self, entries: list[Entry]) -> None:
        """Add `entries` (a few thousand: a disk index takes them in one transaction)."""
        with self.lock:
            held = self.held
            if isinstance(held, _DiskIndex):
                held.add_many(entries)
                return
            for entry in entries:
                held.add(*entry)
            if held.count > MEMORY_ENTRIES:
                self.held = _spilled(held)

    def get(self, key: str) -> dict[FileIdentity, Facts]:
        return self.held.get(key)

    def replace(self, key: str, identities: set[FileIdentity]) -> None:
        with self.lock:
            self.held.replace(key, identities)

    def has(self, identity: FileIdentity) -> bool:
        return self.held.has(identity)

    def made_for(self, file: str) -> list[Entry]:
        return self.held.made_for(file)

    def items(self) -> Iterator[Entry]:
        return self.held.items()

    def touch_many(self, keys: Iterable[str]) -> None:
        """Mark `keys` as touched since the last merge (their entries are pruned then)."""
        with self.lock:
            self.held.touch_many(keys)

    def touched_keys(self) -> Iterator[str]:
        return self.held.touched_keys()

    def untouch(self, keep: set[str]) -> None:
        """Forget the touched paths but `keep`."""
        with self.lock:
            self.held.untouch(keep)


def _spilled(memory: _MemoryIndex) -> _DiskIndex:
    """The same entries in a database."""
    disk = _DiskIndex()
    with disk.lock:
        disk.db.execute("BEGIN")
        for key, identity, facts in memory.items():
            disk.db.execute(_INSERT, (key, *identity, *facts))
        for key in memory.touched:
            disk.db.execute("INSERT INTO touched VALUES (?)", (key,))
        disk.db.execute("COMMIT")
    return disk
