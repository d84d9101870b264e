"""TIFF decoding: one page at a time, to what a viewer shows (MinIsWhite flipped, gray
palettes looked up).

tifffile interprets a page's tags and decodes its strips or tiles (through imagecodecs);
everything it would allocate is sized first: the page's tables and tags before it reads
the directory (tiff_layout.py), then each strip or tile before it is read and decoded,
one at a time, with a stop check between them. A codec whose output size the file
alone declares (JPEG) is checked against the strip or tile it fills; codecs this cannot
be done for are refused.
"""

from __future__ import annotations

import io
import logging
import math
import os
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from ...errors import InputError
from . import tiff_layout
from .camera import check_scans, jpeg_frame
from .checks import COMPRESSED_SLACK, check_allocation, check_size, decoding, not_2d
from .pixels import apply_palette

if TYPE_CHECKING:  # loads at the first TIFF read (_tifffile)
    import tifffile

MAGICS = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")  # classic and BigTIFF

#: Compressions read, by TIFF code: those whose decoders write into a buffer of the
#: strip's or tile's size, and JPEG (_JPEG_COMPRESSIONS), whose frame size is checked
#: first. Others (JPEG 2000, JPEG XR, JPEG XL, WebP, LERC, old-style JPEG) decode to
#: whatever size their data declares and are refused.
_COMPRESSIONS = frozenset(
    {1, 2, 3, 4}  # none, CCITT RLE, G3, G4
    | {5, 8, 32946, 32773}  # LZW, deflate (two codes), PackBits
    | {34925, 34926, 50000}  # LZMA, Zstandard (two codes)
)
_JPEG_COMPRESSIONS = frozenset({7, 34892})  # JPEG, and JPEG in DNG files
#: A page of more strips or tiles than this holds at least MIN_CHUNK_SAMPLES samples in each:
#: each strip or tile costs a call into the decoder (tens of microseconds), so a page of
#: millions of one-pixel strips would take minutes for a small image. Tiles hold at least
#: 16x16 pixels (the TIFF specification); writers make strips of some kilobytes.
MAX_SMALL_CHUNKS = 4096
MIN_CHUNK_SAMPLES = 256

# tifffile logs the oddities it works around (bad offsets, missing tags) to
# stderr. Here a file either reads or fails as one InputError line; stray log
# lines would break that one-line-per-file contract in the middle of progress.
logging.getLogger("tifffile").setLevel(logging.CRITICAL)


def _tifffile() -> ModuleType:
    """tifffile, imported at the first TIFF read."""
    import tifffile

    return tifffile


def tiff_pages(handle: io.BufferedReader) -> int:
    """How many images the TIFF open in `handle` holds (its full-resolution pages)."""
    return max(1, len(tiff_layout.layout(handle.fileno()).pages))


def read_tiff(
    handle: io.BufferedReader,
    max_bytes: int,
    index: int | None,
    check_stop: Callable[[], None],
) -> tuple[np.ndarray, str]:
    """Decode a single-page TIFF, or page `index` of a multi-page one (tiff_pages);
    returns the array and its kind. check_stop is called between strips and tiles."""
    fd = handle.fileno()
    layout = tiff_layout.layout(fd)
    pages = layout.pages
    if not pages:  # what a file cut before its image directory looks like
        raise InputError("corrupt or truncated TIFF: no readable image directory")
    if index is None and len(pages) > 1:
        raise InputError(f"{len(pages)} pages; gccl label labels each page as an image of its own")
    if index is not None and index >= len(pages):
        raise InputError(f"no page {index + 1} (the file has {len(pages)})")
    size = os.fstat(fd).st_size
    offset = pages[index or 0]
    tiff_layout.check_loads(tiff_layout.read_directory(fd, layout, offset, size), max_bytes)
    view = tiff_layout.PageView(fd, layout, offset, str(handle.name))
    with (
        decoding("TIFF", check_stop),
        # The flags keep tifffile from loading other pages for formats it knows.
        _tifffile().TiffFile(view, is_lsm=False, is_ndpi=False, is_scanimage=False) as tiff,
    ):
        page = tiff.pages.first
        if "Z" in page.axes:
            raise not_2d(page.shape)
        samples = int(np.prod(page.shape)) // max(1, page.imagelength * page.imagewidth)
        sample_bytes = page.dtype.itemsize if page.dtype is not None else 8
        check_size(page.imagelength, page.imagewidth, samples, sample_bytes, max_bytes)
        array = _pixels(page, fd, size, max_bytes, check_stop)
        if page.axes.startswith("S"):  # planar configuration: samples first
            array = np.moveaxis(array, 0, -1)
        return _displayed(page, array)


def _pixels(
    page: tifffile.TiffPage,
    fd: int,
    size: int,
    max_bytes: int,
    check_stop: Callable[[], None],
) -> np.ndarray:
    """The page's samples in its shape, its strips or tiles read and decoded one at a
    time, each checked against `max_bytes` first."""
    compression = int(page.compression)
    if compression not in _COMPRESSIONS and compression not in _JPEG_COMPRESSIONS:
        name = getattr(page.compression, "name", str(compression))
        raise InputError(f"TIFF compression {name} is not read")
    if page.dtype is None:
        raise InputError(f"unsupported TIFF samples ({page.bitspersample} bits)")
    kind = "tile" if page.is_tiled else "strip"
    chunk_bytes = math.prod(int(n) for n in page.chunks) * page.dtype.itemsize
    check_allocation(f"one {kind} decoded", chunk_bytes, max_bytes)
    count = math.prod(page.chunked)
    samples = math.prod(int(n) for n in page.chunks)
    if count > MAX_SMALL_CHUNKS and samples < MIN_CHUNK_SAMPLES:
        raise InputError(
            f"TIFF of {count} {kind}s of {samples} samples (beyond {MAX_SMALL_CHUNKS} {kind}s, "
            f"each holds at least {MIN_CHUNK_SAMPLES}: every {kind} is a call to the decoder)"
        )
    offsets, bytecounts = page.dataoffsets, page.databytecounts
    if len(offsets) < count or len(bytecounts) < count:
        raise InputError(f"corrupt TIFF: {min(len(offsets), len(bytecounts))} of {count} {kind}s")
    most = COMPRESSED_SLACK * chunk_bytes + 2**16
    for start, length in zip(offsets[:count], bytecounts[:count], strict=True):
        if length:
            if length > most:
                raise InputError(
                    f"corrupt TIFF: a {kind} of {length} bytes for {chunk_bytes} bytes of samples"
                )
            if start + length > size:
                raise InputError(
                    "corrupt or truncated TIFF: image data runs past the end of the file"
                )
    if page.is_contiguous:  # one read of the image's own size
        return page.asarray(maxworkers=1)
    out = np.zeros(page.shaped, page.dtype)
    decode = page.decode
    jpeg = compression in _JPEG_COMPRESSIONS
    tables = page.jpegtables if jpeg else None
    for index in range(count):
        check_stop()
        start, length = offsets[index], bytecounts[index]
        data = os.pread(fd, length, start) if start and length else None
        if data is not None and jpeg:
            _check_jpeg_frame(data, page)
        segment, (s, d, h, w, _), shape = decode(data, index, jpegtables=tables)
        target = out[s, d : d + shape[0], h : h + shape[1], w : w + shape[2]]
        if segment is None:
            target[...] = page.nodata
        else:
            target[...] = segment[: target.shape[0], : target.shape[1], : target.shape[2]]
    return out.reshape(page.shape)


def _check_jpeg_frame(data: bytes, page: tifffile.TiffPage) -> None:
    """Refuse a JPEG strip or tile whose frame is larger than the strip or tile, or has
    more than 4 components (the decoder allocates what the frame declares), or that holds
    more than camera.MAX_JPEG_SCANS scans."""
    kind, rows, columns = (
        ("tile", page.tilelength, page.tilewidth)
        if page.is_tiled
        else ("strip", page.rowsperstrip, page.imagewidth)
    )
    frame = jpeg_frame(io.BytesIO(data))
    if frame is None:
        raise InputError(f"corrupt TIFF: a JPEG {kind} without a frame header")
    height, width, components, _ = frame
    if not (0 < height <= rows and 0 < width <= columns and components <= 4):
        raise InputError(
            f"corrupt TIFF: a JPEG {kind} of {width}x{height} with {components} components "
            f"in a {kind} of {columns}x{rows}"
        )
    check_scans(io.BytesIO(data), len(data))  # (its length was checked: _pixels)


def _displayed(page: tifffile.TiffPage, array: np.ndarray) -> tuple[np.ndarray, str]:
    """Apply the TIFF photometric interpretation: what a viewer would show."""
    photometric = _tifffile().PHOTOMETRIC
    samples = array.shape[2] if array.ndim == 3 else 1
    kind = page.photometric
    if kind == photometric.MINISWHITE and samples == 1:
        if array.dtype.kind == "f":
            raise InputError("float TIFF stored MinIsWhite is not supported")
        if array.dtype.kind == "u" and page.bitspersample < array.dtype.itemsize * 8:
            return np.asarray((1 << page.bitspersample) - 1 - array, dtype=array.dtype), "gray"
        return ~array, "gray"  # reverses bool, unsigned and signed ranges alike
    if kind == photometric.MINISBLACK and samples in (1, 2):
        return array, "gray" if samples == 1 else "gray+alpha"
    if kind == photometric.PALETTE and samples == 1:
        if page.colormap is None:
            raise InputError("corrupt TIFF: palette image without a colormap")
        # 16-bit colormap entries hold v * 257 or v << 8: the high byte is v either way.
        return apply_palette(array, (page.colormap.T >> 8).astype(np.uint8))
    if kind in (photometric.RGB, photometric.YCBCR) and samples in (3, 4):
        return array, "RGB" if samples == 3 else "RGBA"
    name = getattr(kind, "name", str(kind))
    raise InputError(f"unsupported TIFF photometric {name} with {samples} sample(s) per pixel")
