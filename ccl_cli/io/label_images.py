"""Label images as files: a 16-bit gray PNG (labels up to 65535) or a 32-bit TIFF, or with
--label-format npy a .npy of uint16 or uint32 by the same rule; and the PNG writer the
previews share.

Label images are mostly long runs of one value, which the fastest deflate levels
already shrink well; higher levels cost several times the CPU for a few percent,
and writing must keep up with the labeling.
"""

from __future__ import annotations

import io
import struct
import zlib

import imagecodecs
import numpy as np

from ..errors import InputError
from ..options import TIFF_COMPRESSIONS

#: Written into every label image (PNG tEXt and TIFF Software), within its first bytes:
#: how a later run tells a label image it may replace from a file it must leave alone.
LABEL_MARK = b"gccl label image"

#: zlib-ng's level for PNG streams: its level 1 is a much weaker method, and level 2
#: both compresses better and runs faster than libpng's zlib at level 1.
_PNG_LEVEL = 2
#: Bytes of compressed data per IDAT chunk (the format allows up to 2**31 - 1).
_PNG_CHUNK = 1 << 30
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_TIFF_LEVEL = 1
#: TIFF codecs of label images: deflate reads everywhere; zstd encodes faster and
#: smaller, and reads in libtiff >= 4.0.10, GDAL, tifffile and Pillow.
_TIFF_CODEC = {"deflate": "zlib", "zstd": "zstd"}


def encode_label_png(labels: np.ndarray) -> bytes:
    """A (H, W) label array as a 16-bit grayscale PNG, marked with LABEL_MARK.

    Raises ValueError for negative labels or labels above 65535 (never wraps).
    """
    return encode_png(_checked_labels(labels, 65535).astype(np.uint16, copy=False), LABEL_MARK)


def encode_label_npy(labels: np.ndarray, wide: bool) -> bytes:
    """A (H, W) label array as a .npy file (NumPy's format, version 1.0): uint16, or uint32
    where `wide` (more labels than 16 bits hold), as the PNG/TIFF choice goes.

    Raises ValueError for labels that do not fit the chosen type (never wraps).
    """
    dtype = np.uint32 if wide else np.uint16
    checked = _checked_labels(labels, int(np.iinfo(dtype).max)).astype(dtype, copy=False)
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.ascontiguousarray(checked), allow_pickle=False)
    return buffer.getvalue()


def encode_label_tiff(labels: np.ndarray, compression: str = "deflate") -> bytes:
    """A (H, W) label array as a single-page uint32 TIFF.

    compression: one of TIFF_COMPRESSIONS (both at their fastest level).
    Raises ValueError for negative labels or labels above 2**32 - 1.
    """
    import tifffile

    if compression not in _TIFF_CODEC:
        raise ValueError(f"compression must be one of {TIFF_COMPRESSIONS}")
    labels32 = _checked_labels(labels, 2**32 - 1).astype(np.uint32)
    buffer = io.BytesIO()
    tifffile.imwrite(
        buffer,
        labels32,
        photometric="minisblack",
        compression=_TIFF_CODEC[compression],
        compressionargs={"level": _TIFF_LEVEL},
        metadata=None,
        software=LABEL_MARK.decode(),
    )
    return buffer.getvalue()


def encode_png(array: np.ndarray, software: bytes = b"") -> bytes:
    """A (H, W) gray or (H, W, 3) RGB uint8/uint16 array as a PNG, with a Software text
    chunk when `software` is given.

    Every row gets filter type 2 ("up": each byte minus the byte above it, the first
    row minus zeros), and the filtered rows are one zlib stream from zlib-ng
    (imagecodecs). libpng's default tries all five filters on every row, which on
    label images costs several times the time for a few percent fewer bytes.
    """
    height, width = array.shape[:2]
    rows = np.ascontiguousarray(array, array.dtype.newbyteorder(">"))  # PNG is big-endian
    raw = rows.view(np.uint8).reshape(height, -1)
    filtered = np.empty((height, raw.shape[1] + 1), np.uint8)
    filtered[:, 0] = 2
    filtered[0, 1:] = raw[0]
    np.subtract(raw[1:], raw[:-1], out=filtered[1:, 1:])  # wraps modulo 256, as PNG wants
    color_type = 0 if array.ndim == 2 else 2  # gray or RGB
    header = struct.pack(">IIBBBBB", width, height, 8 * array.dtype.itemsize, color_type, 0, 0, 0)
    # imagecodecs takes any contiguous buffer (its stubs list only bytes-like types).
    stream = memoryview(imagecodecs.zlibng_encode(filtered, level=_PNG_LEVEL))  # type: ignore[arg-type]
    chunks = [_png_chunk(b"IHDR", header)]
    if software:
        chunks.append(_png_chunk(b"tEXt", b"Software\0" + software))
    chunks += [
        _png_chunk(b"IDAT", stream[start : start + _PNG_CHUNK])
        for start in range(0, max(1, len(stream)), _PNG_CHUNK)
    ]
    return b"".join([_PNG_MAGIC, *chunks, _png_chunk(b"IEND", b"")])


def _png_chunk(kind: bytes, data: bytes | memoryview) -> bytes:
    """One PNG chunk: length, type, data, CRC-32 of type and data."""
    crc = zlib.crc32(data, zlib.crc32(kind))
    return struct.pack(">I", len(data)) + kind + bytes(data) + struct.pack(">I", crc)


def _checked_labels(labels: np.ndarray, limit: int) -> np.ndarray:
    """Validate a (H, W) integer label array whose values must lie in 0..limit.

    Values are only scanned when the dtype could hold values outside.
    """
    if labels.ndim != 2 or labels.dtype.kind not in "biu":
        raise ValueError(f"labels must be a 2-D integer array, got {labels.dtype} {labels.shape}")
    fits = labels.dtype.kind == "u" and np.iinfo(labels.dtype).max <= limit
    if labels.size and not fits and (labels.min() < 0 or labels.max() > limit):
        raise ValueError(f"labels must lie in 0..{limit}, got {labels.min()}..{labels.max()}")
    return labels


def encode_label_image(
    labels: np.ndarray, file_format: str, wide: bool, compression: str = "deflate"
) -> bytes:
    """An image's labels in `file_format` ("png", "tiff" or "npy": output_paths'
    label_file_format); `wide`: the labels exceed uint16 (a .npy is uint32 then; a PNG
    cannot hold them: InputError, never wrapped)."""
    if file_format == "png" and wide:
        raise InputError(
            f"{int(labels.max())} components do not fit a 16-bit PNG; use --label-format auto, "
            "tiff or npy"
        )
    if file_format == "npy":
        return encode_label_npy(labels, wide)
    if file_format == "tiff":
        return encode_label_tiff(labels, compression)
    return encode_label_png(labels)
