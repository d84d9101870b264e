"""JPEG, BMP and WebP, the formats cameras and inspection software save: JPEG and BMP
decoded by Pillow, WebP by libwebp (imagecodecs), straight into one array.

Each file's header is read here first, so that the decode is sized before the decoder
reads it: a JPEG's markers up to its first scan (their metadata is bounded, the frame
sized), its scans counted (MAX_JPEG_SCANS) and their bytes up to the end of the image
(COMPRESSED_SLACK times its samples, plus 64 KiB), a BMP's header (the file must fit the
image: at most 4 bytes a pixel and 4 a row, plus 64 KiB; a run-length code of empty runs
would otherwise feed Pillow's decoder, written in Python, for minutes), a WebP's RIFF
header and image size (the decoder is handed the RIFF's bytes alone, which must fit the
image).
Pixels are read as stored: EXIF orientation is not applied.
"""

from __future__ import annotations

import io
import os
import re
import struct
from typing import NamedTuple

import imagecodecs
import numpy as np

from ...errors import InputError
from .checks import COMPRESSED_SLACK, check_size, decoding, not_2d, pillow
from .pixels import from_pillow

JPEG_MAGIC = b"\xff\xd8\xff"
BMP_MAGIC = b"BM"

#: Bytes of metadata (EXIF, ICC profiles, comments) before a JPEG's frame, at most.
MAX_JPEG_METADATA = 16 * 2**20
#: The most scans a JPEG stream may hold. The decoder makes a pass over every block of the
#: image per scan, however few bytes the scan holds: a few hundred KB of near-empty scans
#: would hold a decode for minutes. Progressive files have about 10 (libjpeg's scripts: 10
#: for colour, 6 for gray); libjpeg-turbo's TJPARAM_SCANLIMIT is the same guard.
MAX_JPEG_SCANS = 100
#: A marker: 0xFF then a byte other than 0x00 (a 0xFF stuffed in entropy-coded data), a
#: restart marker 0xD0-0xD7 (inside a scan's data) or 0xFF (fill).
_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")
#: Bytes read at a time while looking for the next marker.
_CHUNK = 1 << 16


def is_webp(head: bytes) -> bool:
    """Whether a file starting with `head` is a WebP (a RIFF container of type WEBP)."""
    return head[:4] == b"RIFF" and head[8:12] == b"WEBP"


class JpegFrame(NamedTuple):
    """What a JPEG stream's frame header (SOF) declares."""

    height: int
    width: int
    components: int
    precision: int


def jpeg_frame(stream: io.BufferedIOBase) -> JpegFrame | None:
    """The frame header of the JPEG stream at `stream`'s position, reading the marker
    segments up to the first scan by their lengths only (refusing more than
    MAX_JPEG_METADATA bytes of them); None when there is no frame before the scan."""
    frame: JpegFrame | None = None
    metadata = 0
    start = stream.read(2)
    if start != b"\xff\xd8":  # a TIFF tile may hold a stream without its start marker
        stream.seek(-len(start), io.SEEK_CUR)
    while True:
        if stream.read(1) != b"\xff":
            return frame
        kind = stream.read(1)
        while kind == b"\xff":  # fill bytes
            kind = stream.read(1)
        if not kind or kind in (b"\xd9", b"\xda"):  # the end, or the first scan
            return frame
        code = kind[0]
        if code == 0x01 or 0xD0 <= code <= 0xD8:  # markers without a length
            continue
        field = stream.read(2)
        if len(field) < 2:
            return frame
        length = int.from_bytes(field, "big")
        if frame is None and 0xC0 <= code <= 0xCF and code not in (0xC4, 0xC8, 0xCC):
            header = stream.read(6)
            if len(header) < 6:
                return None
            precision, height, width, components = struct.unpack(">BHHB", header)
            frame = JpegFrame(height, width, components, precision)
            stream.seek(length - 8, io.SEEK_CUR)
            continue
        metadata += length
        if metadata > MAX_JPEG_METADATA:
            raise InputError(f"JPEG with over {MAX_JPEG_METADATA} bytes of metadata")
        stream.seek(length - 2, io.SEEK_CUR)


def check_scans(stream: io.BufferedIOBase, most: int) -> None:
    """Refuse a JPEG stream (from `stream`'s position) of more than MAX_JPEG_SCANS scans, or
    of more than `most` bytes from its first scan to its end (metadata before it may take
    MAX_JPEG_METADATA more), counted as a decoder meets them: marker segments passed over by
    their lengths, a scan's entropy-coded data and any bytes between segments up to the next
    marker, to the end of the image or of the data. Reads the stream once, a chunk at a time,
    and no further than those bounds."""
    scans, end = 0, stream.tell() + MAX_JPEG_METADATA + 2**16 + most
    while True:
        code = _next_marker(stream, end)
        if stream.tell() > end:
            raise InputError(f"JPEG of over {most} bytes of scans for its image")
        if code is None or code == 0xD9:  # the end of the data, or of the image
            return
        if code in (0x01, 0xD8):  # markers without a length
            continue
        field = stream.read(2)
        if len(field) < 2:
            return
        if code == 0xDA:
            if scans == 0:
                end = stream.tell() - 4 + most
            scans += 1
            if scans > MAX_JPEG_SCANS:
                raise InputError(
                    f"JPEG of over {MAX_JPEG_SCANS} scans (progressive files have about 10; "
                    "each is a pass over the whole image)"
                )
        stream.seek(int.from_bytes(field, "big") - 2, io.SEEK_CUR)  # (never before the marker)


def _next_marker(stream: io.BufferedIOBase, end: int) -> int | None:
    """The code of the next marker from `stream`'s position, the stream left after it; None
    at the end of the data, or once the stream is past `end`."""
    while stream.tell() <= end:
        start = stream.tell()
        chunk = stream.read(_CHUNK)
        match = _MARKER.search(chunk)
        if match is not None:
            stream.seek(start + match.end())
            return chunk[match.start() + 1]
        if len(chunk) < _CHUNK:
            return None
        stream.seek(start + len(chunk) - 1)  # a 0xFF at the chunk's end may start a marker
    return None


def read_camera(handle: io.BufferedReader, head: bytes, max_bytes: int) -> tuple[np.ndarray, str]:
    """Decode a JPEG, BMP or WebP file (by its magic bytes); the array and its kind."""
    if is_webp(head):
        return _read_webp(handle, max_bytes)
    source: io.BufferedIOBase
    if head.startswith(JPEG_MAGIC):
        fmt, source = "JPEG", _checked_jpeg(handle, max_bytes)
    else:
        fmt, source = "BMP", handle
        width, height, samples = _bmp_size(head)
        check_size(height, width, samples, 1, max_bytes)
        most = height * (4 * width + 4) + 2**16
        if os.fstat(handle.fileno()).st_size > most:
            raise InputError(f"corrupt BMP: over {most} bytes for a {width}x{height} image")
    with decoding(fmt), pillow().open(source, formats=[fmt]) as image:
        width, height = image.size
        check_size(height, width, len(image.getbands()), 1, max_bytes)
        image.load()
        return from_pillow(image, fmt)


def _checked_jpeg(handle: io.BufferedReader, max_bytes: int) -> io.BufferedReader:
    frame = jpeg_frame(handle)
    if frame is None:
        raise InputError("corrupt or truncated JPEG: no frame header")
    if frame.precision != 8:
        raise InputError(f"{frame.precision}-bit JPEG is not read (8-bit only)")
    if frame.height == 0:  # the height would come after the pixels (a DNL marker)
        raise InputError("JPEG without its height in the frame header is not read")
    check_size(frame.height, frame.width, frame.components, 1, max_bytes)
    handle.seek(0)
    check_scans(handle, COMPRESSED_SLACK * frame.height * frame.width * frame.components + 2**16)
    handle.seek(0)
    return handle


def _read_webp(handle: io.BufferedReader, max_bytes: int) -> tuple[np.ndarray, str]:
    """Decode a WebP once its image size is checked and its RIFF container found to hold
    no more than COMPRESSED_SLACK times the image's RGBA bytes, plus 64 KiB; an
    animation of several frames is a 3-D image."""
    header = handle.read(30)
    size = struct.unpack("<I", header[4:8])[0] + 8
    width, height = _webp_size(header)
    check_size(height, width, 4, 1, max_bytes)
    most = COMPRESSED_SLACK * width * height * 4 + 2**16
    if size > most:
        raise InputError(f"corrupt WebP: {size} bytes for a {width}x{height} image")
    handle.seek(0)
    data = handle.read(size)
    frames = _webp_frames(data)
    if frames > 1:
        raise not_2d((frames, height, width))
    with decoding("WebP"):
        array = imagecodecs.webp_decode(data)
    return array, "RGBA" if array.ndim == 3 and array.shape[2] == 4 else "RGB"


def _webp_frames(data: bytes) -> int:
    """The frames (ANMF chunks) of an animated WebP; 1 for a still image."""
    frames, position = 0, 12
    while position + 8 <= len(data):
        kind, length = struct.unpack_from("<4sI", data, position)
        frames += kind == b"ANMF"
        position += 8 + length + length % 2
    return max(1, frames)


def _bmp_size(head: bytes) -> tuple[int, int, int]:
    """Width, height and decoded samples per pixel from a BMP's headers (the OS/2 one of
    12 bytes, or a Windows one of 40 bytes or more)."""
    if len(head) >= 26 and struct.unpack("<I", head[14:18])[0] == 12:
        width, height, _, bits = struct.unpack("<HHHH", head[18:26])
    elif len(head) >= 30:
        width, height, _, bits = struct.unpack("<iiHH", head[18:30])
    else:
        raise InputError("corrupt or truncated BMP: no header")
    return abs(width), abs(height), 1 if bits <= 8 else 4 if bits == 32 else 3


def _webp_size(header: bytes) -> tuple[int, int]:
    """Width and height from the first chunk of a WebP: extended (VP8X, the canvas),
    lossy (VP8) or lossless (VP8L)."""
    kind, payload = header[12:16], header[20:30]
    if kind == b"VP8X" and len(payload) >= 10:
        width = int.from_bytes(payload[4:7], "little") + 1
        return width, int.from_bytes(payload[7:10], "little") + 1
    if kind == b"VP8 " and len(payload) >= 10 and payload[3:6] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", payload[6:10])
        return width & 0x3FFF, height & 0x3FFF
    if kind == b"VP8L" and len(payload) >= 5 and payload[0] == 0x2F:
        bits = int.from_bytes(payload[1:5], "little")
        return (bits & 0x3FFF) + 1, (bits >> 14 & 0x3FFF) + 1
    raise InputError("corrupt or truncated WebP: no image header")
