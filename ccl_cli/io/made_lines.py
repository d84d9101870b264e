"""The lines of the record of made files (io/made.py), and the segments writers append them to.

A line is a JSON list: the file's path below --out, its identity (inode, size, modification
time in ns) and what the record knows of it (Facts: the input's place below --out and page it
was made for, that input's identity with the options, the content's hash), nulls where none:
["a/x.stats.csv", 1234, 56, 17..., "a/x.png", null, "9f...", "c0..."]. Lines of 4 and 6
fields (records of earlier versions) are read too.

A segment is one writer's file of lines. Its writer holds an flock on it from before it takes
its name (it is made hidden, locked, then renamed) until the writer closes it or dies: the
kernel drops the lock then, however the writer ends. So a reader that gets the lock knows the
writer is gone and the segment will never grow again (`writer_gone`); one that does not, that
its writer may still add a line, and a file after it.

Reading is linear in the bytes read, with memory bounded by MAX_LINE_BYTES: a line longer
than that (no writer writes one) is passed over without being held.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator

from .output_paths import RECORD_NAME
from .owner import Facts, FileIdentity

#: The modification time of a file listed by inode, size and content hash (it grows: an
#: appended summary.csv, whose time is unknown before the append).
GROWS = -1
#: The longest line read: two paths of PATH_MAX bytes, each byte escaped, and the hashes.
MAX_LINE_BYTES = 1 << 16
#: A hidden segment older than this whose writer is gone is removed (it holds no line).
HIDDEN_SECONDS = 60.0
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

#: A record line: a path, an identity, and what the record knows of the file.
Entry = tuple[str, FileIdentity, Facts]
NO_FACTS = Facts()


def line(key: str, identity: FileIdentity, facts: Facts = NO_FACTS) -> bytes:
    """The record line of `key` (surrogates of names that are not UTF-8 kept as \\udcXX
    escapes, read back the same)."""
    fields = [key, *identity] if facts == NO_FACTS else [key, *identity, *facts]
    return (json.dumps(fields) + "\n").encode("ascii")


def entry(text: bytes) -> Entry | None:
    """A line's path, identity and facts, or None for one that is not a record line (a writer
    killed mid-line)."""
    try:
        fields = json.loads(text)
    except ValueError:
        return None
    if not isinstance(fields, list) or len(fields) not in (4, 6, 8):
        return None
    key, inode, size, mtime, *rest = fields
    if not isinstance(key, str) or not all(type(v) is int for v in (inode, size, mtime)):
        return None
    file, page, made_by, digest = [*rest, None, None, None, None][:4]
    if not (file is None or isinstance(file, str)) or not (page is None or type(page) is int):
        return None
    if not all(v is None or isinstance(v, str) for v in (made_by, digest)):
        return None
    facts = Facts(file, page, made_by, digest)
    return key, (inode, size, mtime), NO_FACTS if facts == NO_FACTS else facts


def entries(fd: int, start: int) -> Iterator[tuple[int, Entry | None]]:
    """The lines of the open file `fd` from byte `start`: for each whole line, the offset
    past it and its entry (None: not a record line). An unfinished last line is left."""
    os.lseek(fd, start, os.SEEK_SET)
    position = start  # of the chunk's first byte
    held = bytearray()  # the start of a line that the last chunk cut
    passing = False  # inside a line longer than MAX_LINE_BYTES
    while chunk := os.read(fd, 1 << 20):
        begin = 0
        while (end := chunk.find(b"\n", begin)) >= 0:
            if passing:
                found = None
                passing = False
            elif held:
                held += chunk[begin:end]
                found = entry(bytes(held))
            else:
                found = entry(chunk[begin:end])
            held.clear()
            yield position + end + 1, found
            begin = end + 1
        if not passing:
            if len(held) + len(chunk) - begin > MAX_LINE_BYTES:
                held.clear()
                passing = True
            else:
                held += chunk[begin:]
        position += len(chunk)


def writer_gone(fd: int) -> bool:
    """Whether the writer of the segment open as `fd` is gone (its flock is free; the
    lock is then this descriptor's until it is closed)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class Segment:
    """A writer's segment, made at its first line and locked for the writer's life;
    `prefix` starts its name (a task's, so that a later try of the task finds it)."""

    def __init__(self, folder: int, prefix: str = RECORD_NAME) -> None:
        self.folder = folder
        self.name = f"{prefix}-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        self.fd: int | None = None
        self.lock = threading.Lock()

    def append(self, key: str, identity: FileIdentity, facts: Facts) -> None:
        """One line, in one write (the writer's threads take turns)."""
        with self.lock:
            if self.fd is None:
                self.fd = _locked_new(self.folder, self.name)
            data = line(key, identity, facts)
            while data:
                data = data[os.write(self.fd, data) :]

    def close(self, durable: bool = True) -> None:
        """Flush the segment to disk (durable) and close it (its lock goes with it)."""
        with self.lock:
            if self.fd is not None:
                try:
                    if durable:
                        os.fsync(self.fd)
                finally:
                    os.close(self.fd)
                    self.fd = None


def _locked_new(folder: int, name: str) -> int:
    """A new file `name` in `folder`, locked before it takes its name: nobody ever sees it
    unlocked while its writer lives."""
    hidden = f".{name}"
    fd = os.open(hidden, _APPEND_FLAGS, 0o666, dir_fd=folder)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(hidden, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(hidden, dir_fd=folder)
        os.close(fd)
        raise
    return fd


def remove_hidden(folder: int) -> None:
    """Remove hidden segments (and merges' temporaries) whose writer is gone: they hold no
    line that counts."""
    for name in os.listdir(folder):
        if not name.startswith(f".{RECORD_NAME}-"):
            continue
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=folder)
        except OSError:
            continue
        try:
            old = time.time() - os.fstat(fd).st_mtime > HIDDEN_SECONDS
            if old and writer_gone(fd):
                os.unlink(name, dir_fd=folder)
        except OSError:
            pass
        finally:
            os.close(fd)
