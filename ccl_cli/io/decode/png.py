"""PNG decoding: imagecodecs' libpng (every 16-bit file, plain 8-bit gray) or Pillow (1-bit,
palettes, transparency).

The decoders are handed the file's chunks that make its samples (header, palette,
transparency, pixel data, end), up to the end chunk; pixel data (its chunks' headers
counted, so that millions of empty ones are refused too) beyond COMPRESSED_SLACK times
what the image's rows take, plus 64 KiB, is refused. A file within that size is
read at once; in a larger one every other chunk is passed over without being read.
"""

from __future__ import annotations

import io
import os
import struct

import imagecodecs
import numpy as np

from ...errors import InputError
from .checks import COMPRESSED_SLACK, check_size, decoding, not_2d, pillow
from .pixels import from_pillow

MAGIC = b"\x89PNG\r\n\x1a\n"

#: Samples per decoded pixel of each PNG colour type (a palette looks up to RGB).
_SAMPLES = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}
#: Samples per stored pixel of each colour type (a palette stores indices).
_STORED_SAMPLES = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
#: The chunks handed to the decoders; the rest do not change the samples they return.
_KEPT_CHUNKS = frozenset({b"IHDR", b"PLTE", b"tRNS", b"IDAT", b"IEND"})
#: Bytes a kept chunk other than the pixel data may hold (a palette, transparency).
_MAX_SMALL_CHUNK = 4096
#: Chunks passed over, at most: files have a few dozen.
_MAX_SKIPPED_CHUNKS = 4096


def read_png(handle: io.BufferedReader, head: bytes, max_bytes: int) -> tuple[np.ndarray, str]:
    """Decode a PNG; returns the array and its kind ('gray' or a colour kind)."""
    if len(head) < 29 or head[12:16] != b"IHDR":
        raise InputError("corrupt or truncated PNG: no IHDR header")
    width, height, bit_depth, color_type = struct.unpack(">IIBB", head[16:26])
    samples = _SAMPLES.get(color_type, 4)
    check_size(height, width, samples, 2 if bit_depth == 16 else 1, max_bytes)
    stride = -(-width * bit_depth * _STORED_SAMPLES.get(color_type, 4) // 8)  # bytes per row
    most = COMPRESSED_SLACK * height * (stride + 1) + 2**16
    whole = handle.read() if os.fstat(handle.fileno()).st_size <= most + 2**16 else None
    source = handle if whole is None else io.BytesIO(whole)
    spans, transparent = _sample_chunks(source, (width, height, stride), most)
    data = whole if whole is not None and spans == [[0, len(whole)]] else _gather(source, spans)
    if bit_depth == 16:
        # libpng keeps every bit; Pillow narrows 16-bit colour to 8 bits, and the
        # mode it opens 16-bit gray in ("I" or "I;16") changed across its versions.
        kind = {0: "gray", 2: "RGB", 4: "gray+alpha", 6: "RGBA"}.get(color_type)
        if kind is None:
            raise InputError(f"corrupt PNG: 16 bits with colour type {color_type}")
        with decoding("PNG"):
            return imagecodecs.png_decode(data), kind
    if bit_depth == 8 and color_type == 0 and head[28] == 0 and not transparent:
        # Plain 8-bit gray, not interlaced: libpng decodes it with less overhead than
        # Pillow. A transparent gray (tRNS, to which libpng adds
        # an alpha channel) goes to Pillow.
        with decoding("PNG"):
            return imagecodecs.png_decode(data), "gray"
    with decoding("PNG"), pillow().open(io.BytesIO(data)) as image:
        image.load()
        return from_pillow(image, "PNG")


def _sample_chunks(
    source: io.BufferedIOBase, shape: tuple[int, int, int], most: int
) -> tuple[list[list[int]], bool]:
    """Where the PNG's chunks that make its samples are (module docstring), as [offset,
    bytes] runs of adjacent chunks, and whether one of them is transparency (tRNS).

    shape: width, height, and bytes per row. Only chunk headers are read. Refuses an
    animation of several frames (a 3-D image), and more than `most` bytes of pixel
    data, before reading them.
    """
    width, height, stride = shape
    spans: list[list[int]] = [[0, len(MAGIC)]]  # [where in the file, bytes]
    position, pixel_bytes, skipped, transparent = len(MAGIC), 0, 0, False
    while True:
        source.seek(position)
        header = source.read(8)
        if len(header) < 8:
            break  # cut short: the decoders say what is missing
        length, kind = struct.unpack(">I4s", header)
        if kind == b"IDAT":
            pixel_bytes += 12 + length  # with its header and CRC: empty chunks count too
            if pixel_bytes > most:
                raise InputError(
                    f"corrupt PNG: over {most} bytes of pixel data for {height} rows of "
                    f"{stride} bytes"
                )
        elif kind in _KEPT_CHUNKS and length > _MAX_SMALL_CHUNK:
            raise InputError(f"corrupt PNG: a {kind.decode('latin-1')} chunk of {length} bytes")
        if kind in _KEPT_CHUNKS:  # with its CRC, for the decoder to check
            if spans[-1][0] + spans[-1][1] == position:
                spans[-1][1] += 12 + length
            else:
                spans.append([position, 12 + length])
            transparent |= kind == b"tRNS"
            if kind == b"IEND":
                break
        elif kind == b"acTL":
            frames = int.from_bytes(source.read(4), "big")
            if frames > 1:
                raise not_2d((frames, height, width))
        else:
            skipped += 1
            if skipped > _MAX_SKIPPED_CHUNKS:
                raise InputError(f"corrupt PNG: over {_MAX_SKIPPED_CHUNKS} chunks")
        position += 12 + length
    return spans, transparent


def _gather(source: io.BufferedIOBase, spans: list[list[int]]) -> bytearray:
    """The bytes of `spans` of the file, one after the other (as far as the file goes)."""
    data = bytearray(sum(size for _, size in spans))
    view, filled = memoryview(data), 0
    for start, size in spans:
        source.seek(start)
        got = source.readinto(view[filled : filled + size])
        filled += got
        if got < size:
            break
    view.release()
    del data[filled:]
    return data
