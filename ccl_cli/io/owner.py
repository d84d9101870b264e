"""What the record of made files (io/made.py) is asked and told by the writes under --out
(io/out_dir.py): a file's identity, the facts kept beside it, the hash of its content.

A file gccl made is known by its identity (inode, size, modification time) and the hash of its
content: a file edited in place, even one whose inode, size and time are kept, holds another
content and is no longer the file gccl made. The hash is taken of the bytes as they are written
and checked, by reading the file, only before a change (a replace, a rename, a removal).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

#: A file's identity as the record of made files keeps it: (inode, size, mtime in ns). The
#: device is left out: shared storage shows other device numbers on other hosts.
FileIdentity = tuple[int, int, int]
#: What a file gccl made was made for: the input file, as the place below --out its outputs
#: mirror ("a/b/fax.tif"), and its page (from 0; None for a file of one image).
Source = tuple[str, int | None]
#: The content of a file as the record keeps it: a hash of its bytes (content_digest).
Digest = str
#: Gives the digest of the file at hand (read when asked), or None where it cannot be read.
Content = Callable[[], "Digest | None"]
#: The bytes of a digest's hash kept (as hex): 128 bits.
_DIGEST_BYTES = 16


class Facts(NamedTuple):
    """What the record of made files keeps of a file beside its identity (None: unknown, or
    not an input's output)."""

    #: The input file it was made for: its place below --out ("a/b/fax.tif").
    file: str | None = None
    #: Its page (from 0; None for a file of one image).
    page: int | None = None
    #: The input's identity and the options it was made with (run/freshness.made_by).
    made_by: str | None = None
    #: Its content (content_digest): a file edited in place is no longer the one made.
    digest: Digest | None = None


def file_identity(info: os.stat_result) -> FileIdentity:
    """The identity of the file `info` describes."""
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def content_digest() -> Any:
    """A new hash of file content, as the record keeps it (hexdigest()[: 2 * _DIGEST_BYTES])."""
    return hashlib.sha256()


def digest_text(hashed: Any) -> Digest:
    """The record's text of a content hash."""
    return hashed.hexdigest()[: 2 * _DIGEST_BYTES]


def digest_of(name: str, folder: int) -> Digest | None:
    """The digest of the regular file `name` of `folder` (a link is not followed, nothing is
    waited on), or None when it cannot be read."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=folder)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        hashed = content_digest()
        while chunk := os.read(fd, 1 << 20):
            hashed.update(chunk)
        return digest_text(hashed)
    except OSError:
        return None
    finally:
        os.close(fd)


def content_at(name: str, folder: int) -> Content:
    """The digest of `name` in `folder`, read once when first asked for."""
    found: list[Digest | None] = []

    def digest() -> Digest | None:
        if not found:
            found.append(digest_of(name, folder))
        return found[0]

    return digest


class Owner(Protocol):
    """What gccl made (io/made.py): asked before a file is replaced or removed, told of
    each file before it takes its name and once that change has ended."""

    def ours(self, key: str, identity: FileIdentity, content: Content | None = None) -> bool:
        """Whether the file `identity` at `key` (its path below --out) is one gccl made.
        `content`: the file's digest, asked for before a change (a file listed with one
        must still hold it); without, its identity decides."""
        ...

    def made(self, key: str, identity: FileIdentity, facts: Facts = Facts()) -> None:
        """The file `identity` is about to take the name `key`; `facts`: what it was made
        for and what it holds (none for a file that is no input's, such as summary.csv)."""
        ...

    def settled(self, key: str, identity: FileIdentity) -> None:
        """The change `made` announced has ended: the file took its name, or never will."""
        ...

    def listed(self, key: str) -> bool:
        """Whether a file gccl made is listed at `key` (a file there now may be another)."""
        ...
