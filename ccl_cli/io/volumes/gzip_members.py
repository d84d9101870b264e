"""gzip files written in members: a gzip file is a series of members, each a deflate stream
with its own CRC (RFC 1952, section 2.2), which every gzip reader (zlib's gzread, Python's gzip,
nibabel, ITK) reads as one stream of bytes. Writing a header and the data in members of
_MEMBER_BYTES lets the data be compressed as the writer takes it, straight from the label
array, by zlib-ng (imagecodecs: several times zlib's speed at the same ratio).

Level 2 of zlib-ng: its level 1 is a much weaker method (about half the ratio on label
volumes); higher levels cost several times the time for a few percent (docs/performance.md).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator

import imagecodecs
import numpy as np

#: zlib-ng's level for label volumes (see the module doc).
GZIP_LEVEL = 2
#: Uncompressed bytes per member: large enough that member headers cost nothing.
_MEMBER_BYTES = 1 << 26
#: A member's header: magic, deflate, no flags, no time, no extra flags, OS unknown.
_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def gzip_members(
    pieces: Iterable[bytes | memoryview | np.ndarray], level: int = GZIP_LEVEL
) -> Iterator[bytes]:
    """The gzip members of `pieces` (each piece split at _MEMBER_BYTES), one at a time."""
    for piece in pieces:
        view = (
            np.ascontiguousarray(piece).reshape(-1).view(np.uint8).data
            if isinstance(piece, np.ndarray)
            else memoryview(piece).cast("B")
        )
        for start in range(0, max(len(view), 1), _MEMBER_BYTES):
            part = view[start : start + _MEMBER_BYTES]
            # A zlib stream: 2 bytes of header, the deflate stream, 4 bytes of Adler-32.
            stream = imagecodecs.zlibng_encode(part, level=level)  # type: ignore[arg-type]
            trailer = struct.pack("<II", zlib.crc32(part), len(part) & 0xFFFFFFFF)
            yield b"".join((_HEADER, memoryview(stream)[2:-4], trailer))
