"""The record of the files gccl made in an --out folder, and the rule it keeps: replace, rename
or remove only a file it lists, while the file at that path is still that one.

The record lives in GCCL_DIR/RECORD_NAME: a line per file gccl made, its path below --out, its
identity (inode, size, modification time in ns) and, for an input's output, what it was made
for (the input file's place below --out and its page, null for a file of one image), as JSON:
["a/x.stats.csv", 1234, 56, 17..., "a/x.png", null]. So the record knows which outputs belong
to which input and page: a file that has other pages than when its outputs were made has those
of the pages it lost moved aside (lost_pages), whichever run meets it.
Each writer (the run, each worker process, each Dask task) appends to a segment of its own
(RECORD_NAME-<host>-<pid>-<random>) a line per file, written before the file takes its name, so
a file in place is always listed (a writer killed between the two leaves a line for a file that
never landed, which matches nothing). One writer per segment, so lines never interleave, even
on shared storage. A run reads the record and every segment under the lock; when it starts
(after a run that did not end) and when it ends, it merges them into RECORD_NAME, keeping of
each path it or the unfinished run wrote only the identity of the file there now, and removes
the segments it merged.

A file whose identity is listed at its path is one gccl made: it may be replaced or removed,
and a failure moves it aside. Any other file at an output's path stays and the input whose
output would take its place fails (out_dir.py asks `ours` before every change). A file that
grows (an appended summary.csv) is listed by its inode alone, and so is a folder gccl made (a
Zarr label store, run/chunked.py). The record belongs to its
--out: a run never writes into a folder below that holds another GCCL_DIR (out_dir.py).
Contents are never looked at: a file is gccl's by the record, not by what it holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import stat
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError, UsageError
from .out_dir import FileIdentity, OutDir, Owner, Source, file_identity, kind_of, not_made_here
from .output_paths import GCCL_DIR, RECORD_NAME, stale_name

if TYPE_CHECKING:
    import sqlite3

#: The size and modification time of a file listed by its inode alone (it grows).
GROWS = -1
#: The most bytes of record a run reads (about ten million files).
MAX_RECORD_BYTES = 1 << 30
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

#: What a task's worker is told of the files gccl made at its inputs' output paths.
Known = dict[str, list[FileIdentity]]


#: A record line: a path, an identity, and what the file was made for (None: no input's).
Entry = tuple[str, FileIdentity, Source | None]


def _line(key: str, identity: FileIdentity, source: Source | None = None) -> bytes:
    # surrogates (names that are not UTF-8) kept as \\udcXX escapes, read back the same
    fields = [key, *identity, *(source or ())]
    return (json.dumps(fields) + "\n").encode("ascii")


def _entry(line: bytes) -> Entry | None:
    """A record line's path, identity and source, or None for a line that is not one (a
    writer killed mid-line)."""
    try:
        fields = json.loads(line)
    except ValueError:
        return None
    if not isinstance(fields, list) or len(fields) not in (4, 6):
        return None
    key, inode, size, mtime, *made_for = fields
    if not isinstance(key, str) or not all(type(v) is int for v in (inode, size, mtime)):
        return None
    source: Source | None = None
    if made_for:
        file, page = made_for
        if not isinstance(file, str) or not (page is None or type(page) is int):
            return None
        source = (file, page)
    return key, (inode, size, mtime), source


def _matches(identities: Iterable[FileIdentity], identity: FileIdentity) -> bool:
    known = set(identities)
    return identity in known or (identity[0], GROWS, GROWS) in known


class _Segment:
    """This writer's segment of the record, made at its first line; `prefix` starts its name
    (a task's, so that a later try of the task finds it)."""

    def __init__(self, folder: int, prefix: str = RECORD_NAME) -> None:
        self.folder = folder
        self.name = f"{prefix}-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        self.fd: int | None = None
        self.lock = threading.Lock()

    def append(self, key: str, identity: FileIdentity, source: Source | None) -> None:
        """One line, in one write (the writer's threads take turns)."""
        with self.lock:
            if self.fd is None:
                self.fd = os.open(self.name, _APPEND_FLAGS, 0o666, dir_fd=self.folder)
            line = _line(key, identity, source)
            while line:
                line = line[os.write(self.fd, line) :]

    def close(self, durable: bool = True) -> None:
        """Flush the segment to disk (durable) and close it."""
        with self.lock:
            if self.fd is not None:
                if durable:
                    os.fsync(self.fd)
                os.close(self.fd)
                self.fd = None


class _MemoryIndex:
    """Identities (each with its source) by path, the set of every identity listed, and the
    paths listed for each input file (a run with a list of inputs)."""

    def __init__(self) -> None:
        self.by_key: dict[str, dict[FileIdentity, Source | None]] = {}
        self.all: set[FileIdentity] = set()
        self.by_file: dict[str, set[str]] = {}

    def add(self, key: str, identity: FileIdentity, source: Source | None) -> None:
        listed = self.by_key.setdefault(key, {})
        if source is not None or identity not in listed:  # (a source is never forgotten)
            listed[identity] = source
        self.all.add(identity)
        if source is not None:
            self.by_file.setdefault(source[0], set()).add(key)

    def get(self, key: str) -> set[FileIdentity]:
        return set(self.by_key.get(key, ()))

    def replace(self, key: str, identities: set[FileIdentity]) -> None:
        kept = {i: s for i, s in self.by_key.get(key, {}).items() if i in identities}
        if kept:
            self.by_key[key] = kept
        else:
            self.by_key.pop(key, None)

    def has(self, identity: FileIdentity) -> bool:
        return identity in self.all

    def made_for(self, file: str) -> list[Entry]:
        return [
            (key, identity, source)
            for key in sorted(self.by_file.get(file, ()))
            for identity, source in self.by_key.get(key, {}).items()
            if source is not None and source[0] == file
        ]

    def items(self) -> Iterator[tuple[str, dict[FileIdentity, Source | None]]]:
        for key in sorted(self.by_key):
            yield key, self.by_key[key]


class _DiskIndex:
    """The same in a private temporary SQLite database (a run whose inputs arrive over time:
    memory stays flat however many files it makes; see seen.py)."""

    def __init__(self) -> None:
        import sqlite3

        self.db: sqlite3.Connection = sqlite3.connect(
            "", isolation_level=None, check_same_thread=False
        )
        self.lock = threading.Lock()
        self.db.execute("PRAGMA journal_mode=OFF")
        self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute(
            "CREATE TABLE made (key TEXT, inode INT, size INT, mtime INT, file TEXT, page INT, "
            "PRIMARY KEY (key, inode, size, mtime)) WITHOUT ROWID"
        )
        self.db.execute("CREATE INDEX made_identity ON made (inode, size, mtime)")
        self.db.execute("CREATE INDEX made_file ON made (file)")

    def _run(self, statement: str, *values: Any) -> Any:
        with self.lock:
            return self.db.execute(statement, values).fetchall()

    def add(self, key: str, identity: FileIdentity, source: Source | None) -> None:
        file, page = source or (None, None)
        self._run(
            "INSERT INTO made VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key, inode, size, mtime) "
            "DO UPDATE SET file = excluded.file, page = excluded.page "
            "WHERE excluded.file IS NOT NULL",
            key, *identity, file, page,
        )  # fmt: skip

    def get(self, key: str) -> set[FileIdentity]:
        rows = self._run("SELECT inode, size, mtime FROM made WHERE key = ?", key)
        return {(row[0], row[1], row[2]) for row in rows}

    def replace(self, key: str, identities: set[FileIdentity]) -> None:
        for identity in self.get(key) - identities:
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
            "SELECT key, inode, size, mtime, page FROM made WHERE file = ? ORDER BY key", file
        )
        return [(row[0], (row[1], row[2], row[3]), (file, row[4])) for row in rows]

    def items(self) -> Iterator[tuple[str, dict[FileIdentity, Source | None]]]:
        key: str | None = None
        found: dict[FileIdentity, Source | None] = {}
        rows = self._run("SELECT key, inode, size, mtime, file, page FROM made ORDER BY key")
        for row in rows:
            if row[0] != key:
                if key is not None:
                    yield key, found
                key, found = row[0], {}
            found[(row[1], row[2], row[3])] = None if row[4] is None else (row[4], row[5])
        if key is not None:
            yield key, found


class MadeFiles:
    """The record of an --out folder, held by the run that holds its lock (see the module
    docstring): read when the run starts, told of each file the run makes, merged when it
    ends. `on_disk`: keep the index in a temporary database (inputs that arrive over time).
    """

    def __init__(self, out: OutDir, on_disk: bool = False, as_it_is: bool = False) -> None:
        """as_it_is: only read the record as it stands, without the lock and changing
        nothing (no folder made, no segment merged), for ours, listed and is_made
        (gccl label --dry-run)."""
        self.out = out
        self.folder = out.gccl_folder(create=not as_it_is)
        self.index: _MemoryIndex | _DiskIndex = _DiskIndex() if on_disk else _MemoryIndex()
        self.segment = _Segment(self.folder)
        #: Paths written since the record was last merged (theirs are the entries to check).
        self.touched: set[str] = set()
        #: Segments read, and how far (other writers' segments grow during a run).
        self.read_to: dict[str, int] = {}
        self._bytes = 0
        self.lock = threading.Lock()
        if self.folder < 0:  # (as it is: no record there)
            return
        leftover = self._read_all()
        if as_it_is:
            os.close(self.folder)
            self.folder = -1
        elif leftover:  # segments of an earlier run (or its workers): merge them now
            self.merge()

    def ours(self, key: str, identity: FileIdentity) -> bool:
        """Whether `identity` at `key` is a file gccl made here."""
        return _matches(self.index.get(key), identity)

    def listed(self, key: str) -> bool:
        """Whether the record lists a file at `key` (one there now may be another)."""
        return bool(self.index.get(key))

    def made(self, key: str, identity: FileIdentity, source: Source | None = None) -> None:
        """Record the file `identity` that takes the name `key` next, made for `source`."""
        self.segment.append(key, identity, source)
        with self.lock:
            self.index.add(key, identity, source)
            self.touched.add(key)

    def made_for(self, file: str) -> list[Entry]:
        """What the record lists as made for the input file at `file` (its place below
        --out): each path, identity and source (the file and the page)."""
        return self.index.made_for(file)

    def is_made(self, info: os.stat_result) -> bool:
        """Whether the file `info` describes (an input, say) is one gccl made in this --out."""
        return self.index.has(file_identity(info))

    def known(self, keys: Iterable[str]) -> Known:
        """What a worker needs to know of `keys`: the identities listed at each."""
        return {key: sorted(found) for key in keys if (found := self.index.get(key))}

    def refresh(self) -> None:
        """Read the lines other writers (worker processes, Dask tasks) added since."""
        self._read_all()

    def close(self, durable: bool = True) -> None:
        """Flush this run's segment and merge the record (the run's end)."""
        self.segment.close(durable)
        try:
            self._read_all()
            self.merge(durable)
            with contextlib.suppress(FileNotFoundError):  # merged, with this run's files
                os.unlink(self.segment.name, dir_fd=self.folder)
        finally:
            os.close(self.folder)
            self.folder = -1

    def merge(self, durable: bool = True) -> None:
        """Write every entry into RECORD_NAME, keeping at each touched path only what matches
        the file there now, and remove the segments merged (RECORD_NAME replaced whole)."""
        self._prune()
        temp = f".{RECORD_NAME}-{secrets.token_hex(4)}"
        fd = os.open(temp, _APPEND_FLAGS, 0o666, dir_fd=self.folder)
        try:
            buffer = bytearray()
            for key, identities in self.index.items():
                for identity in sorted(identities):
                    buffer += _line(key, identity, identities[identity])
                if len(buffer) > 1 << 20:
                    _write_all(fd, buffer)
                    buffer.clear()
            _write_all(fd, buffer)
            if durable:
                os.fsync(fd)
            os.rename(temp, RECORD_NAME, src_dir_fd=self.folder, dst_dir_fd=self.folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=self.folder)
            raise
        finally:
            os.close(fd)
        for name in list(self.read_to):
            if name != RECORD_NAME and name != self.segment.name:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=self.folder)
                del self.read_to[name]
        self.read_to[RECORD_NAME] = os.stat(
            RECORD_NAME, dir_fd=self.folder, follow_symlinks=False
        ).st_size
        self.touched.clear()

    def _prune(self) -> None:
        """At each touched path, keep only the identity of the file there now (none when it
        is gone or is not one gccl made)."""
        for key, folder in self.out.folders(iter(sorted(self.touched))):
            identities = self.index.get(key)
            current: set[FileIdentity] = set()
            if folder is not None:
                try:
                    info = os.stat(key.rpartition("/")[2], dir_fd=folder, follow_symlinks=False)
                except OSError:
                    info = None
                # (a folder gccl made, a Zarr label store, is listed by its inode alone)
                if info is not None and (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                    identity = file_identity(info)
                    grows = (identity[0], GROWS, GROWS)
                    current = {i for i in (identity, grows) if i in identities}
            self.index.replace(key, current)

    def _read_all(self) -> bool:
        """Read RECORD_NAME and every segment, from where the last read stopped; True when
        segments other than this run's were found (another writer's, or a run's that did not
        end)."""
        others = False
        names = sorted(
            name
            for name in os.listdir(self.folder)
            if name == RECORD_NAME or name.startswith(RECORD_NAME + "-")
        )
        for name in names:
            if name == self.segment.name:
                continue
            if name != RECORD_NAME:
                others = True
            self._read(name)
        return others

    def _read(self, name: str) -> None:
        """The new lines of one record file (regular files only, never waited on, the whole
        record at most MAX_RECORD_BYTES)."""
        shown = self.out.root / GCCL_DIR / name
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=self.folder)
        except FileNotFoundError:
            return
        except OSError as error:
            raise UsageError(f"cannot read {shown} ({error.strerror or error})") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UsageError(f"{shown} is {kind_of(info.st_mode)}; move it")
            start = self.read_to.get(name, 0)
            if info.st_size < start:  # replaced by a merge meanwhile
                start = 0
            self._bytes += info.st_size - start
            if self._bytes > MAX_RECORD_BYTES:
                raise UsageError(
                    f"the record of made files in {self.out.root / GCCL_DIR} is larger than "
                    f"{MAX_RECORD_BYTES} bytes"
                )
            os.lseek(fd, start, os.SEEK_SET)
            pending = b""
            offset = start
            while chunk := os.read(fd, 1 << 20):
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    offset += len(line) + 1
                    entry = _entry(line)
                    if entry is not None:
                        self.index.add(*entry)
                        if name != RECORD_NAME:  # a segment lists what its writer touched
                            self.touched.add(entry[0])
            self.read_to[name] = offset  # an unfinished last line is read again next time
        finally:
            os.close(fd)


class TaskRecord:
    """A worker's share of the record: what the run told it of its inputs' output paths, what
    earlier tries of the same task made (a worker that died, and the task sent again), and
    its own segment for the files it makes (merged by the run at its end)."""

    def __init__(self, out: OutDir, known: Known, task: str) -> None:
        """task: the task's name, the same for every try of it."""
        self.known = {key: set(identities) for key, identities in known.items()}
        self.folder = out.gccl_folder()
        prefix = f"{RECORD_NAME}-{task}"
        for name in os.listdir(self.folder):
            if name.startswith(prefix + "-"):
                self._read_earlier_try(out, name)
        self.segment = _Segment(self.folder, prefix)
        self.lock = threading.Lock()

    def _read_earlier_try(self, out: OutDir, name: str) -> None:
        try:
            data = out.read_small(name, MAX_RECORD_BYTES, self.folder) or b""
        except InputError:
            return
        for line in data.split(b"\n"):
            entry = _entry(line)
            if entry is not None and entry[0] in self.known:
                self.known[entry[0]].add(entry[1])
            elif entry is not None:
                self.known[entry[0]] = {entry[1]}

    def ours(self, key: str, identity: FileIdentity) -> bool:
        """Whether `identity` at `key` is a file gccl made (as the run knew, or this task made)."""
        with self.lock:
            return _matches(self.known.get(key, ()), identity)

    def listed(self, key: str) -> bool:
        """Whether a file gccl made is known at `key` (one there now may be another)."""
        with self.lock:
            return bool(self.known.get(key))

    def made(self, key: str, identity: FileIdentity, source: Source | None = None) -> None:
        """Record the file `identity` that takes the name `key` next, made for `source`."""
        self.segment.append(key, identity, source)
        with self.lock:
            self.known.setdefault(key, set()).add(identity)

    def close(self, durable: bool = True) -> None:
        """Flush the segment and let the folder go."""
        try:
            self.segment.close(durable)
        finally:
            os.close(self.folder)


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def in_the_way(out: OutDir, owner: Owner, paths: Iterable[Path]) -> str | None:
    """Why `paths` may not be written (one holds a link, a folder, or a file gccl did not
    make in this --out; a folder on the way is a link or another run's --out), or None."""
    for path in paths:
        info = out.lstat(path)  # InputError for the folders on the way
        if info is None:
            continue
        if not stat.S_ISREG(info.st_mode):
            return f"{path} is {kind_of(info.st_mode)}; not replaced"
        if not owner.ours(out.key(path), file_identity(info)):
            return not_made_here(path)
    return None


def move_aside(out: OutDir, owner: Owner, paths: Iterable[Path]) -> list[str]:
    """Rename each file gccl made at `paths` to its stale name (stale_name), so that no earlier
    result sits next to a failed input and none is lost; returns the new names. A file
    the rename would replace that gccl did not make stays, and so does the output."""
    moved = []
    for path in paths:
        if owner.listed(out.key(path)) and out.rename(path, stale_name(path), owner):
            moved.append(stale_name(path))
    return moved


def lost_pages(out: OutDir, made: MadeFiles, file: str, pages: int) -> list[Path]:
    """The files in place that gccl made for pages the input file at `file` (its place below
    --out) no longer has, now that it has `pages`: every page but the first `pages` of a
    multi-page file, and the whole-file outputs of one that became multi-page (its page
    None), or the other way round. A file at such a path that the record does not list as
    made for that page (one gccl did not make, or made for another input since) is not one
    of them."""
    now: set[int | None] = {None} if pages == 1 else set(range(pages))
    lost = []
    for key, identity, source in made.made_for(file):
        if source is None or source[1] in now:
            continue
        path = out.root / key
        try:
            info = out.lstat(path)
        except (OSError, InputError):  # (a folder on the way gone, or a link now)
            continue
        if info is not None and stat.S_ISREG(info.st_mode) and file_identity(info) == identity:
            lost.append(path)
    return lost


def remove_stale(out: OutDir, owner: Owner, paths: Iterable[Path]) -> None:
    """Remove the copies a failure moved aside of `paths` (files gccl made), once new
    outputs took their place."""
    for path in paths:
        folder, _, name = out.key(path).rpartition("/")
        stale = stale_name(Path(name))
        if owner.listed(f"{folder}/{stale}" if folder else stale):
            out.remove(path.with_name(stale), owner)
