"""The names on stdin (`gccl label -`): one a line or NUL-separated, read as they arrive, each
decoded as the file system does; a line too long to name a file is kept as its start and size."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

#: The most bytes a name on stdin may hold: PATH_MAX on Linux, so a longer line names no file.
MAX_NAME_BYTES = 4096
#: How much of an over-long line its row shows.
_SHOWN_OF_A_LONG_LINE = 60


@dataclass(frozen=True)
class LongLine:
    """A line (or NUL-separated name) on stdin longer than MAX_NAME_BYTES: its start, and how
    long it was. Its row says so; the rest of it was never kept."""

    start: str
    size: int


def read_names(stream: IO[Any], null: bool) -> list[str | LongLine]:
    """The paths on `stream`: NUL-separated with `null`, else one a line; empty ones dropped."""
    return [name for name in iter_names(stream, null) if name]


def iter_names(stream: IO[Any], null: bool) -> Iterator[str | LongLine]:
    """The paths on `stream` as they arrive (see inputs.expand), empty ones included; one longer
    than MAX_NAME_BYTES comes as a LongLine.

    Bytes are split first and each name decoded as the file system does
    (undecodable bytes kept as surrogates), so any name reaches its file. Each
    byte is looked at once (linear time), and no more than MAX_NAME_BYTES of a
    name are kept, however long its line.
    """
    source = getattr(stream, "buffer", stream)
    read = getattr(source, "read1", source.readline)
    pieces: list[Any] = []  # the name read so far, at most MAX_NAME_BYTES of it
    size = 0  # its length, the part not kept included
    while data := read(65536):
        separator: Any = (
            ("\0" if null else "\n") if isinstance(data, str) else (b"\0" if null else b"\n")
        )
        start = 0
        while True:
            end = data.find(separator, start)
            piece = data[start:] if end < 0 else data[start:end]
            if size <= MAX_NAME_BYTES:
                pieces.append(piece[: MAX_NAME_BYTES + 1 - size])
            size += len(piece)
            if end < 0:
                break
            yield _name(pieces[0][:0].join(pieces), size, null)
            pieces, size, start = [], 0, end + 1
    if size:
        yield _name(pieces[0][:0].join(pieces), size, null)


def _name(raw: str | bytes, size: int, null: bool) -> str | LongLine:
    """One name as text (a line loses the \\r of a \\r\\n end); a LongLine when `size`
    is over MAX_NAME_BYTES."""
    text = os.fsdecode(raw) if isinstance(raw, bytes) else raw
    if not null and text.endswith("\r") and size == len(raw):
        text, size = text[:-1], size - 1
    if size > MAX_NAME_BYTES:
        return LongLine(text[:_SHOWN_OF_A_LONG_LINE], size)
    return text
