"""gzip data for label volumes, compressed straight from the label array by zlib-ng
(imagecodecs), which docs/performance.md measured against Python's zlib.

gzip_members: a gzip file is a series of members, each a deflate stream with its own CRC
(RFC 1952, section 2.2), which gzip readers built on zlib's gzread (ITK and SimpleITK, FSL,
FreeSurfer) and Python's gzip (nibabel) read as one stream of bytes. Members of _MEMBER_BYTES
are compressed on several threads at once (the codec releases the GIL) and handed to the writer
in order as they are done: .nii.gz label volumes. gzip_single: one member, for readers that
stop after the first (pynrrd): .nrrd label volumes.

Level 2 of zlib-ng: the level whose time and ratio on label volumes docs/performance.md
compares with the others (benchmarks/bench_volume_files.py).
"""

from __future__ import annotations

import struct
import zlib
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import imagecodecs
import numpy as np

from .limits import encode_threads

#: zlib-ng's level for label volumes (see the module doc).
GZIP_LEVEL = 2
#: Uncompressed bytes per member: large enough that a member's header and restart cost nothing,
#: small enough that a volume of a few MB is shared among threads.
_MEMBER_BYTES = 1 << 22
#: A member's header: magic, deflate, no flags, no time, no extra flags, OS unknown.
_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def gzip_members(
    pieces: Iterable[bytes | memoryview | np.ndarray], level: int = GZIP_LEVEL
) -> Iterator[bytes]:
    """The gzip members of `pieces` (each split at _MEMBER_BYTES), in order, compressed on up
    encode_threads() threads with at most twice as many members held at once."""
    parts = (part for piece in pieces for part in _split(piece))
    threads = encode_threads()
    with ThreadPoolExecutor(threads, thread_name_prefix="gccl-gzip") as pool:
        pending: deque[Future[bytes]] = deque()
        for part in parts:
            pending.append(pool.submit(_member, part, level))
            if len(pending) >= 2 * threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def gzip_single(piece: np.ndarray, level: int = GZIP_LEVEL) -> bytes:
    """`piece`'s bytes as one gzip member (on one thread)."""
    return _member(np.ascontiguousarray(piece).reshape(-1).view(np.uint8).data, level)


def _split(piece: bytes | memoryview | np.ndarray) -> Iterator[memoryview]:
    """`piece` as bytes in parts of at most _MEMBER_BYTES (one empty part for an empty piece)."""
    if isinstance(piece, np.ndarray):
        view = np.ascontiguousarray(piece).reshape(-1).view(np.uint8).data
    else:
        view = memoryview(piece).cast("B")
    for start in range(0, max(len(view), 1), _MEMBER_BYTES):
        yield view[start : start + _MEMBER_BYTES]


def _member(part: memoryview, level: int) -> bytes:
    """One gzip member of `part`: zlib-ng's zlib stream (2 bytes of header, the deflate stream,
    4 bytes of Adler-32) rewrapped with gzip's header and trailer (CRC-32, size)."""
    stream = imagecodecs.zlibng_encode(part, level=level)  # type: ignore[arg-type]
    trailer = struct.pack("<II", zlib.crc32(part), len(part) & 0xFFFFFFFF)
    return b"".join((_HEADER, memoryview(stream)[2:-4], trailer))
