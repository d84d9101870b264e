"""The record of the files gccl made in an --out folder, and the rule it keeps: replace, rename
or remove only a file it lists, while the file at that path is still that one.

The record lives in GCCL_DIR/RECORD_NAME: a line per file gccl made (made_lines.py), its path
below --out, its identity (inode, size, modification time in ns) and its facts: for an input's
output the input file's place below --out and its page, that input's identity with the options
(run/freshness.made_by: --skip-existing keeps only outputs the same unchanged input made with
the same options), and for every file the hash of its content. So the record knows which
outputs belong to which input and page (lost_pages), and a file edited in place, even one that
keeps its inode, size and time, is no longer the file gccl made.

Each writer (the run, each worker process, each Dask task) appends to a segment of its own
(RECORD_NAME-<host>-<pid>-<random>) a line per file, written before the file takes its name, so
a file in place is always listed (a writer killed between the two leaves a line for a file that
never landed, which matches nothing). One writer per segment, so lines never interleave, even
on shared storage; the writer holds an flock on it while it lives. A run reads the record and
every segment under the lock; when it starts (after a run that did not end) and when it ends,
it merges them into RECORD_NAME, keeping at each path touched only the identity of the file
there now, and removes the segments merged. Two things may still put a file at a path after a
merge looked, and for them nothing is pruned: a change of this process under way (made, not yet
settled), and a segment whose writer is alive (its flock taken), which also stays to be merged
again. So no merge, whenever it runs, drops the line of a file that lands (docs/design.md).

A file whose identity is listed at its path is one gccl made: it may be replaced or removed,
and a failure moves it aside, once its content is the one listed (out_dir.py asks `ours`,
with the content, before every change; admission asks by identity alone). Any other file at an
output's path stays and the input whose output would take its place fails. A file that grows
(an appended summary.csv) is listed by inode, size and content at each append; a folder gccl
made (a Zarr label store, run/chunked.py) by its identity, as a file. The record
belongs to its --out: a run never writes into a folder below that holds another GCCL_DIR.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..errors import InputError, UsageError
from .made_index import Index
from .made_lines import (
    GROWS,
    NO_FACTS,
    Entry,
    Segment,
    entries,
    line,
    remove_hidden,
    writer_gone,
)
from .out_dir import OutDir, kind_of, not_made_here
from .output_paths import GCCL_DIR, RECORD_NAME, stale_name
from .owner import Content, Digest, Facts, FileIdentity, Owner, digest_of, file_identity

#: The most bytes of record a run reads (about ten million files).
MAX_RECORD_BYTES = 1 << 30
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: How long a run that starts waits for the writers of an earlier run's segments to end
#: (the workers of a run that was killed end within milliseconds; a Dask task may not).
HELD_WAIT_SECONDS = 5.0
#: Entries read before they are added to the index (a disk index takes them at once).
_BATCH = 4096

#: What a task's worker is told of the files gccl made at its inputs' output paths: each
#: identity listed there, and the content it holds (None: not known).
Known = dict[str, list[tuple[FileIdentity, Digest | None]]]


def _matches(
    listed: Mapping[FileIdentity, Facts], identity: FileIdentity, content: Content | None
) -> bool:
    """Whether `identity` is one of `listed`, and, when `content` is given, holds the content
    listed with it. A file that grows is listed by inode, size and content alone."""
    facts = listed.get(identity)
    if facts is not None:
        return facts.digest is None or content is None or content() == facts.digest
    grows = listed.get((identity[0], identity[1], GROWS))
    if grows is None or grows.digest is None:
        return False
    return content is not None and content() == grows.digest


class MadeFiles:
    """The record of an --out folder, held by the run that holds its lock (see the module
    docstring): read when the run starts, told of each file the run makes, merged when it
    ends. `on_disk`: keep the index in a temporary database from the start (inputs that
    arrive over time); a large record moves there anyway (made_index.py).
    """

    def __init__(self, out: OutDir, on_disk: bool = False, as_it_is: bool = False) -> None:
        """as_it_is: only read the record as it stands, without the lock and changing
        nothing (no folder made, no segment merged), for ours, listed and is_made
        (gccl label --dry-run)."""
        self.out = out
        self.folder = out.gccl_folder(create=not as_it_is)
        self.index = Index(on_disk)
        self.segment = Segment(self.folder)
        #: Record files read, and how far (other writers' segments grow during a run).
        self.read_to: dict[str, int] = {}
        #: The paths each segment whose writer is alive listed: its writer may still put a
        #: file there, so they are never pruned, nor the segment removed.
        self.held: dict[str, set[str]] = {}
        #: This process's changes announced (made) and not yet ended (settled).
        self.unsettled: Counter[tuple[str, FileIdentity]] = Counter()
        #: Closed: nothing more is recorded (a write still under way fails).
        self.closed = False
        self._bytes = 0
        self.lock = threading.Lock()
        if self.folder < 0:  # (as it is: no record there)
            return
        leftover = self._read_all()
        deadline = time.monotonic() + HELD_WAIT_SECONDS
        while self.held and not as_it_is and time.monotonic() < deadline:
            time.sleep(0.05)  # an earlier run's workers, ending with it
            self._read_all()
        if as_it_is:
            os.close(self.folder)
            self.folder = -1
        elif leftover:  # segments of an earlier run (or its workers): merge them now
            self.merge()

    def ours(self, key: str, identity: FileIdentity, content: Content | None = None) -> bool:
        """Whether `identity` at `key` is a file gccl made here (holding the content listed
        with it, when `content` is given)."""
        return _matches(self.index.get(key), identity, content)

    def listed(self, key: str) -> bool:
        """Whether the record lists a file at `key` (one there now may be another)."""
        return bool(self.index.get(key))

    def facts(self, key: str, identity: FileIdentity) -> Facts | None:
        """What the record keeps of the file `identity` at `key`, None where it lists none."""
        return self.index.get(key).get(identity)

    def made(self, key: str, identity: FileIdentity, facts: Facts = NO_FACTS) -> None:
        """Record the file `identity` that takes the name `key` next (`facts`: what it was
        made for and holds). InputError once the record is closed: the file must not land."""
        with self.lock:
            if self.closed:
                raise InputError(f"{self.out.root / key}: the run has ended; not written")
            self.segment.append(key, identity, facts)
            self.unsettled[(key, identity)] += 1
            self.index.add(key, identity, facts)
            self.index.touch_many([key])

    def settled(self, key: str, identity: FileIdentity) -> None:
        """The change made() announced has ended (the file is in place, or never will be)."""
        with self.lock:
            self.unsettled[(key, identity)] -= 1
            if self.unsettled[(key, identity)] <= 0:
                del self.unsettled[(key, identity)]

    def made_for(self, file: str) -> list[Entry]:
        """What the record lists as made for the input file at `file` (its place below
        --out): each path, identity and facts."""
        return self.index.made_for(file)

    def is_made(self, info: os.stat_result) -> bool:
        """Whether the file `info` describes (an input, say) is one gccl made in this --out."""
        return self.index.has(file_identity(info))

    def known(self, keys: Iterable[str]) -> Known:
        """What a worker needs to know of `keys`: the identities listed at each."""
        found = {}
        for key in keys:
            listed = self.index.get(key)
            if listed:
                found[key] = sorted((i, f.digest) for i, f in listed.items())
        return found

    def refresh(self) -> None:
        """Read the lines other writers (worker processes, Dask tasks) added since."""
        self._read_all()

    def close(self, durable: bool = True) -> None:
        """Take no more lines, flush this run's segment and merge the record (the run's end)."""
        with self.lock:
            self.closed = True
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
        the file there now (or may still land there), and remove the segments merged whose
        writers are gone (RECORD_NAME replaced whole)."""
        remove_hidden(self.folder)
        self._prune()
        temp = f".{RECORD_NAME}-{secrets.token_hex(4)}"
        fd = os.open(temp, _NEW_FLAGS, 0o666, dir_fd=self.folder)
        try:
            buffer = bytearray()
            for entry in self.index.items():
                buffer += line(*entry)
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
            if name not in (RECORD_NAME, self.segment.name) and name not in self.held:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=self.folder)
                del self.read_to[name]
        self.read_to[RECORD_NAME] = os.stat(
            RECORD_NAME, dir_fd=self.folder, follow_symlinks=False
        ).st_size
        self.index.untouch(set().union(*self.held.values()))

    def _prune(self) -> None:
        """At each touched path, keep only the identity of the file there now (none when it
        is gone or is not one gccl made), and any a change under way may still put there:
        this process's (unsettled) and those of live writers' segments (held)."""
        held = set().union(*self.held.values())
        with self.lock:
            under_way: dict[str, set[FileIdentity]] = {}
            for key, identity in self.unsettled:
                under_way.setdefault(key, set()).add(identity)
        for key, folder in self.out.folders(self.index.touched_keys()):
            if key in held:
                continue
            listed = self.index.get(key)
            keep = set(under_way.get(key, ()))
            if folder is not None:
                name = key.rpartition("/")[2]
                try:
                    info = os.stat(name, dir_fd=folder, follow_symlinks=False)
                except OSError:
                    info = None
                # (a folder gccl made, a Zarr label store, is listed by its inode alone)
                if info is not None and (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                    identity = file_identity(info)
                    grows = (identity[0], identity[1], GROWS)
                    if identity in listed:
                        keep.add(identity)
                    elif (
                        stat.S_ISREG(info.st_mode)
                        and grows in listed
                        and listed[grows].digest == digest_of(name, folder)
                    ):
                        keep.add(grows)
            self.index.replace(key, keep)

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
        record at most MAX_RECORD_BYTES), in time linear in its bytes."""
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
            segment = name != RECORD_NAME
            # (taken before the lines are read: a line after them is read next time)
            gone = not segment or writer_gone(fd)
            start = self.read_to.get(name, 0)
            if info.st_size < start:  # replaced by a merge meanwhile
                start = 0
            self._bytes += info.st_size - start
            if self._bytes > MAX_RECORD_BYTES:
                raise UsageError(
                    f"the record of made files in {self.out.root / GCCL_DIR} is larger than "
                    f"{MAX_RECORD_BYTES} bytes"
                )
            batch: list[Entry] = []
            offset = start
            for offset, found in entries(fd, start):  # noqa: B007 (the last offset is kept)
                if found is not None:
                    batch.append(found)
                if len(batch) >= _BATCH:
                    self._add(batch, name if segment else None, gone)
                    batch = []
            self._add(batch, name if segment else None, gone)
            self.read_to[name] = offset  # an unfinished last line is read again next time
            if gone:
                self.held.pop(name, None)
        finally:
            os.close(fd)

    def _add(self, batch: list[Entry], segment: str | None, gone: bool) -> None:
        """Index `batch`, read from `segment` (None: the merged record), whose writer may be
        alive (not `gone`)."""
        self.index.add_many(batch)
        if segment is not None:  # a segment lists what its writer touched
            keys = {key for key, _, _ in batch}
            self.index.touch_many(keys)
            if not gone:
                self.held.setdefault(segment, set()).update(keys)


class TaskRecord:
    """A worker's share of the record: what the run told it of its inputs' output paths, what
    earlier tries of the same task made (a worker that died, and the task sent again), and
    its own segment for the files it makes (merged by a run once this worker is gone)."""

    def __init__(self, out: OutDir, known: Known, task: str) -> None:
        """task: the task's name, the same for every try of it."""
        self.known: dict[str, dict[FileIdentity, Facts]] = {
            key: {identity: Facts(digest=digest) for identity, digest in listed}
            for key, listed in known.items()
        }
        self.folder = out.gccl_folder()
        prefix = f"{RECORD_NAME}-{task}"
        for name in os.listdir(self.folder):
            if name.startswith(prefix + "-"):
                self._read_earlier_try(name)
        self.segment = Segment(self.folder, prefix)
        self.lock = threading.Lock()

    def _read_earlier_try(self, name: str) -> None:
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=self.folder)
        except OSError:
            return
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return
            for _, found in entries(fd, 0):
                if found is not None:
                    key, identity, facts = found
                    self.known.setdefault(key, {})[identity] = facts
        finally:
            os.close(fd)

    def ours(self, key: str, identity: FileIdentity, content: Content | None = None) -> bool:
        """Whether `identity` at `key` is a file gccl made (as the run knew, or this task made)."""
        with self.lock:
            listed = dict(self.known.get(key, {}))
        return _matches(listed, identity, content)

    def listed(self, key: str) -> bool:
        """Whether a file gccl made is known at `key` (one there now may be another)."""
        with self.lock:
            return bool(self.known.get(key))

    def made(self, key: str, identity: FileIdentity, facts: Facts = NO_FACTS) -> None:
        """Record the file `identity` that takes the name `key` next."""
        self.segment.append(key, identity, facts)
        with self.lock:
            self.known.setdefault(key, {})[identity] = facts

    def settled(self, key: str, identity: FileIdentity) -> None:
        """Nothing to do: a worker's segment is merged only once the worker is gone."""

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
    for key, identity, facts in made.made_for(file):
        if facts.file is None or facts.page in now:
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
