"""Plain gray PNGs (8 or 16 bits, not interlaced) decoded on a shorter path than libpng's.

libpng inflates the pixel stream with zlib, most of a small PNG's decode; here
libdeflate (through imagecodecs) inflates it and gccl's compiled code
(ccl_cli.native) undoes the row filters. The chunks are walked and their CRCs checked
as libpng does. Whatever this path does not take whole (another colour type,
transparency, an animation, an unknown chunk, a CRC, stream or filter error) gives
None, and the caller decodes with libpng, which gives its own verdict: the pixels, or
the error, are libpng's in every case.
"""

from __future__ import annotations

import struct
import zlib

import imagecodecs
import numpy as np

from ...native import gccl_cpu

_MAGIC = b"\x89PNG\r\n\x1a\n"
#: Chunks that change nothing in a gray image's samples as libpng returns them.
_INERT_CHUNKS = frozenset(
    {b"tEXt", b"zTXt", b"iTXt", b"pHYs", b"tIME", b"gAMA", b"cHRM", b"sRGB", b"iCCP", b"sBIT"}
    | {b"bKGD", b"eXIf"}
)


def decode_plain_gray(data: bytes | bytearray) -> np.ndarray | None:
    """The (H, W) uint8 or uint16 samples of a plain gray PNG, or None (module docstring)."""
    if len(data) < 33 or not data.startswith(_MAGIC) or data[12:16] != b"IHDR":
        return None
    width, height, depth, color, method, filtering, interlace = struct.unpack_from(
        ">IIBBBBB", data, 16
    )
    if color != 0 or depth not in (8, 16) or method or filtering or interlace:
        return None
    if not width or not height:
        return None
    stream = _pixel_stream(data)
    if stream is None:
        return None
    stride = width * depth // 8
    try:
        filtered = imagecodecs.deflate_decode(stream, out=height * (stride + 1))
    except imagecodecs.DeflateError:
        return None
    if len(filtered) != height * (stride + 1):
        return None
    samples = np.empty((height, width), np.uint8 if depth == 8 else np.uint16)
    if gccl_cpu.png_unfilter(filtered, height, stride, depth // 8, samples) != 0:
        return None
    return samples


def _pixel_stream(data: bytes | bytearray) -> bytes | None:
    """The IDAT chunks' bytes joined, when every chunk up to IEND is whole, checked and
    one this path knows; else None."""
    view = memoryview(data)
    position = 8
    parts: list[memoryview] = []
    previous = b""
    while position + 12 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, position)
        end = position + 12 + length
        if end > len(data):
            return None
        (crc,) = struct.unpack_from(">I", data, end - 4)
        if kind in (b"IHDR", b"IDAT") and zlib.crc32(view[position + 4 : end - 4]) != crc:
            return None
        if kind == b"IDAT":
            if parts and previous != b"IDAT":
                return None  # IDAT chunks must follow one another
            parts.append(view[position + 8 : end - 4])
        elif kind == b"IEND":
            return b"".join(parts) if parts else None
        elif kind != b"IHDR" and kind not in _INERT_CHUNKS:
            return None
        position, previous = end, kind
    return None
