"""Reading a gzip file's decompressed bytes into buffers the caller holds, decoded only as far
as asked: a header that declares the data's size bounds what a gzip bomb can make gccl decode.

The file is read in pieces of up to _PIECE_BYTES and inflated by the standard library's zlib
(wbits=31: gzip framing, each member's CRC-32 and length checked where its end is reached); the
file reads, the inflating and the copies into the caller's buffer (numpy) run without the GIL,
so threads reading other files go on meanwhile. A file of several members (RFC 1952, section
2.2; gzip_members.py writes them) reads as one stream of bytes, zero bytes between members
skipped as Python's gzip does.
"""

from __future__ import annotations

import os
import zlib
from collections import deque
from typing import Any, BinaryIO

import numpy as np

#: Compressed bytes read from the file at once.
_PIECE_BYTES = 1 << 24
#: Compressed bytes handed to zlib per call: zlib keeps what it did not use as a copy
#: (unconsumed_tail), so a small slice bounds that copy.
_INPUT_BYTES = 1 << 16
#: The most decompressed bytes asked of zlib per call: CPython gathers zlib's output into one
#: bytes object holding the GIL, and a bounded piece keeps that copy short.
_OUTPUT_BYTES = 1 << 18


class GzipReader:
    """The decompressed bytes of the gzip file open as `handle` (unbuffered, at its start), in
    order, through readinto."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        size = os.fstat(handle.fileno()).st_size
        self._piece = np.empty(max(1, min(_PIECE_BYTES, size)), dtype=np.uint8)
        #: Compressed bytes read from the file and not yet handed to zlib, in order.
        self._pending: deque[memoryview | bytes] = deque()
        self._inflater: Any = None
        self._file_ended = False

    def readinto(self, buffer: Any) -> int:
        """Fill `buffer` (writable, bytes-like) with the next decompressed bytes; fewer only
        where the gzip data ends (a truncated file): the count filled."""
        out = np.frombuffer(buffer, dtype=np.uint8)
        filled = 0
        while filled < out.size:
            chunk = self._inflate(min(out.size - filled, _OUTPUT_BYTES))
            if not chunk:
                break
            out[filled : filled + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
            filled += len(chunk)
        return filled

    def read_past(self) -> bool:
        """Whether data follows the bytes read so far: decodes on to the end of the member being
        read, so that zlib checks its CRC-32 and length, and then at most one byte more (in this
        member or the next), dropped: data past a header's declared size is never decoded. A
        file that ends before its trailer has nothing past (a missing trailer is no loss of
        data)."""
        return bool(self._inflate(1))

    def _inflate(self, most: int) -> bytes:
        """Up to `most` (> 0) decompressed bytes, b"" where the gzip data ends."""
        while True:
            inflater = self._inflater
            if inflater is not None and inflater.eof:
                if inflater.unused_data:
                    self._pending.appendleft(inflater.unused_data)
                inflater = self._inflater = None
            if inflater is not None and inflater.unconsumed_tail:
                data = inflater.unconsumed_tail
            else:
                data = self._next_input() if inflater is not None else self._member_start()
                if not data:
                    return b""
                if inflater is None:
                    inflater = self._inflater = zlib.decompressobj(wbits=31)
            chunk: bytes = inflater.decompress(data, most)
            if chunk:
                return chunk

    def _member_start(self) -> memoryview | bytes:
        """The compressed input that starts the next member, zero bytes before it skipped;
        empty where the file ends."""
        while data := self._next_input():
            zeros = np.frombuffer(data, dtype=np.uint8)
            start = int(np.argmax(zeros != 0)) if zeros.any() else len(data)
            if start < len(data):
                return data[start:]
        return b""

    def _next_input(self) -> memoryview | bytes:
        """The next slice of compressed input (at most _INPUT_BYTES), reading the file's next
        piece when none is pending; empty where the file ends."""
        if not self._pending and not self._file_ended:
            count = self._handle.readinto(self._piece)  # type: ignore[attr-defined]
            if count:
                self._pending.append(self._piece.data[:count])
            else:
                self._file_ended = True
        if not self._pending:
            return b""
        data = self._pending.popleft()
        if len(data) > _INPUT_BYTES:
            self._pending.appendleft(data[_INPUT_BYTES:])
            data = data[:_INPUT_BYTES]
        return data
