"""The page directories of a TIFF, read only as far as bounding a decode needs.

tifffile parses a whole page directory when it meets one, loading its strip or tile
tables and its metadata tags, and finds page N by walking the chain of directories
from the first. Reading each page of a long file that way walks the chain again for
every page (quadratic over the file), and a directory whose tables list millions of
entries costs their memory even when its image is one pixel. Here the chain is walked
once per file (the offsets of its full-resolution pages are kept for the file's
identity), reading each directory's entries but none of their values, and what tifffile
would load for a page is sized before tifffile sees it. tifffile is then handed the
file through `PageView`, in which that page is the first and only one.
"""

from __future__ import annotations

import io
import os
import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass

from ...errors import InputError
from .checks import check_allocation

#: Page directories of a TIFF walked, at most: a file of more is refused without
#: walking the rest (the pages of a shorter one are each labeled as an image of their
#: own).
MAX_TIFF_PAGES = 1024
#: Entries in one page directory, at most (tifffile refuses more too).
MAX_ENTRIES = 4096
#: Bytes of the tags other than the strip or tile tables that tifffile loads with a
#: page (descriptions, colour maps, ImageJ metadata, JPEG tables), at most. Metadata
#: needs far less; this is allowed on top of --max-image-bytes, so that a small budget
#: still reads a file with an ordinary description.
MAX_METADATA_BYTES = 16 * 2**20
#: Bytes one value of a strip or tile table takes once loaded (tifffile keeps them as
#: tuples of Python integers); the tables count against --max-image-bytes.
TABLE_VALUE_BYTES = 40
#: StripOffsets, StripByteCounts, TileOffsets, TileByteCounts.
TABLE_TAGS = (273, 279, 324, 325)
#: Tags whose values tifffile loads with a page, besides the tables: the ones it never
#: delays and the ones it reads into the page's attributes.
_LOADED_TAGS = frozenset(
    {254, 255, 256, 257, 258, 259, 262, 263, 266, 270, 274, 277, 278, 282, 283, 284, 290}
    | {292, 293, 296, 300, 301, 305, 317, 318, 319, 320, 322, 323, 330, 338, 339, 347}
    | {513, 514, 530, 531, 532, 32997, 32998, 33628, 42113, 50838, 50839}
)
#: Bytes per value of each TIFF field type (entries of other types tifffile skips).
_TYPE_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8}
_TYPE_SIZES |= {13: 4, 16: 8, 17: 8, 18: 8}
#: struct codes of the unsigned integer field types.
_UNSIGNED = {1: "B", 3: "H", 4: "I", 13: "I", 16: "Q", 18: "Q"}
#: Files whose walks are kept (a run reads the pages of one file after another).
_KEPT_WALKS = 16


@dataclass(frozen=True)
class Layout:
    """A TIFF's byte order, offset width (classic or BigTIFF) and full-resolution pages."""

    order: str
    big: bool
    #: Offsets of the page directories that are images of their own, in file order.
    pages: tuple[int, ...]

    @property
    def offset_size(self) -> int:
        return 8 if self.big else 4


@dataclass(frozen=True)
class Entry:
    """One tag of a page directory: its field type, value count and value field."""

    type: int
    count: int
    field: bytes

    @property
    def size(self) -> int:
        """Bytes of the tag's values (0 for a type tifffile skips)."""
        return self.count * _TYPE_SIZES.get(self.type, 0)


@dataclass(frozen=True)
class Directory:
    """One page directory: its entries by tag, and the offset of the next one."""

    layout: Layout
    entries: dict[int, Entry]
    next_offset: int

    def inline_value(self, code: int, default: int) -> int:
        """The first value of an unsigned integer tag stored in its entry."""
        entry = self.entries.get(code)
        if entry is None or entry.type not in _UNSIGNED or entry.count < 1:
            return default
        if entry.size > self.layout.offset_size:
            return default  # stored elsewhere: not a single value, as these tags are
        return int(struct.unpack_from(self.layout.order + _UNSIGNED[entry.type], entry.field)[0])

    @property
    def reduced(self) -> bool:
        """A reduced-resolution copy of another page (a thumbnail, a pyramid level), as
        tifffile tells it: NewSubfileType bit 0, or without one the old SubfileType 2."""
        kind = self.inline_value(254, 0)
        return bool(kind & 1) if kind else self.inline_value(255, 1) == 2


_walks: OrderedDict[tuple[int, ...], Layout] = OrderedDict()
_walks_lock = threading.Lock()


def layout(fd: int) -> Layout:
    """The layout of the TIFF open as `fd`, walked once for the file's identity
    (device, inode, size, modification time).

    Raises InputError for a bad header, a chain of page directories that loops, or one
    longer than MAX_TIFF_PAGES; a chain with a directory that cannot be read ends there.
    """
    status = os.fstat(fd)
    key = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
    with _walks_lock:
        known = _walks.get(key)
        if known is not None:
            _walks.move_to_end(key)
            return known
    walked = _walk(fd, status.st_size)
    with _walks_lock:
        _walks[key] = walked
        while len(_walks) > _KEPT_WALKS:
            _walks.popitem(last=False)
    return walked


def _walk(fd: int, size: int) -> Layout:
    head = os.pread(fd, 16, 0)
    order = {b"II": "<", b"MM": ">"}.get(head[:2])
    version = struct.unpack(order + "H", head[2:4])[0] if order and len(head) >= 8 else 0
    if order is None or version not in (42, 43):
        raise InputError("corrupt or truncated TIFF: bad header")
    if version == 42:
        frame, offset = Layout(order, False, ()), struct.unpack(order + "I", head[4:8])[0]
    else:
        if len(head) < 16 or struct.unpack(order + "HH", head[4:8]) != (8, 0):
            raise InputError("corrupt or truncated TIFF: bad BigTIFF header")
        frame, offset = Layout(order, True, ()), struct.unpack(order + "Q", head[8:16])[0]
    seen: set[int] = set()
    pages: list[int] = []
    while offset:
        if offset in seen:
            raise InputError("corrupt TIFF: its page directories form a loop")
        if len(seen) == MAX_TIFF_PAGES:
            raise InputError(
                f"TIFF of more than {MAX_TIFF_PAGES} pages; split it into files of fewer"
            )
        seen.add(offset)
        try:
            directory = read_directory(fd, frame, offset, size)
        except InputError:
            break  # a broken link: the pages before it stand (none: the file has no image)
        if not directory.reduced:
            pages.append(offset)
        offset = directory.next_offset
    return Layout(order, frame.big, tuple(pages))


def read_directory(fd: int, layout: Layout, offset: int, size: int) -> Directory:
    """The page directory at `offset`: its entries read, none of their values."""
    count_format, entry_format = ("Q", "HHQ8s") if layout.big else ("H", "HHI4s")
    count_size = struct.calcsize(count_format)
    entry_size = struct.calcsize("=" + entry_format)
    if offset < 8 or offset + count_size > size:
        raise InputError("corrupt or truncated TIFF: a page directory lies outside the file")
    (count,) = struct.unpack(layout.order + count_format, os.pread(fd, count_size, offset))
    if count > MAX_ENTRIES:
        raise InputError(f"corrupt TIFF: a page directory of {count} entries")
    body_size = count * entry_size + layout.offset_size
    body = os.pread(fd, body_size, offset + count_size)
    if len(body) < body_size:
        raise InputError("corrupt or truncated TIFF: a page directory runs past the end")
    entries = {
        code: Entry(kind, number, field)
        for code, kind, number, field in struct.iter_unpack(
            layout.order + entry_format, body[: count * entry_size]
        )
    }
    (next_offset,) = struct.unpack(
        layout.order + ("Q" if layout.big else "I"), body[count * entry_size :]
    )
    return Directory(layout, entries, next_offset)


def check_loads(directory: Directory, max_bytes: int) -> None:
    """Refuse a page whose tables or metadata would take more memory than allowed,
    before tifffile loads them (module docstring)."""
    table_values = sum(directory.entries[c].count for c in TABLE_TAGS if c in directory.entries)
    check_allocation("its strip and tile tables", table_values * TABLE_VALUE_BYTES, max_bytes)
    metadata = sum(
        entry.size
        for code, entry in directory.entries.items()
        if code in _LOADED_TAGS and code not in TABLE_TAGS
    )
    if metadata > MAX_METADATA_BYTES:
        raise InputError(
            f"TIFF page with {metadata} bytes of tags (at most {MAX_METADATA_BYTES} are read)"
        )


class PageView(io.RawIOBase):
    """A TIFF as tifffile should see it to read one page: the file's bytes, read at
    their offsets (os.pread, so the view moves no shared file position), except that
    the header points at that page's directory, which makes it the first page."""

    def __init__(self, fd: int, layout: Layout, page_offset: int, name: str) -> None:
        super().__init__()
        self.fd = fd
        self.size = os.fstat(fd).st_size
        self.name = name
        start, width = (8, "Q") if layout.big else (4, "I")
        header = bytearray(os.pread(fd, start + struct.calcsize(width), 0))
        struct.pack_into(layout.order + width, header, start, page_offset)
        self.header = bytes(header)
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self.position, os.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise OSError("negative seek position")
        self.position = base + offset
        return self.position

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        data = os.pread(self.fd, min(len(view), max(0, self.size - self.position)), self.position)
        if self.position < len(self.header):
            patched = self.header[self.position : self.position + len(data)]
            data = patched + data[len(patched) :]
        view[: len(data)] = data
        self.position += len(data)
        return len(data)
