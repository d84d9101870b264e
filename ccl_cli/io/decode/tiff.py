"""TIFF decoding through tifffile and imagecodecs: one page at a time, to what a viewer
shows (MinIsWhite flipped, gray palettes looked up)."""

from __future__ import annotations

import logging
import os
from types import ModuleType
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from ...errors import InputError
from .checks import check_size, decoding, not_2d
from .pixels import apply_palette

if TYPE_CHECKING:  # loads at the first TIFF read (_tifffile)
    import tifffile

MAGICS = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")  # classic and BigTIFF

#: Page directories of a TIFF looked at, at most: a file of more is refused
#: without walking the rest (the pages of a shorter one are each labeled as an
#: image of its own: tiff_pages).
MAX_TIFF_PAGES = 1024

# tifffile logs the oddities it works around (bad offsets, missing tags) to
# stderr. Here a file either reads or fails as one InputError line; stray log
# lines would break that one-line-per-file contract in the middle of progress.
logging.getLogger("tifffile").setLevel(logging.CRITICAL)


def _tifffile() -> ModuleType:
    """tifffile, imported at the first TIFF read."""
    import tifffile

    return tifffile


def tiff_pages(handle: BinaryIO) -> int:
    """How many images the TIFF open in `handle` holds (its full-resolution pages)."""
    with _tifffile().TiffFile(handle) as tiff:
        return max(1, len(_full_pages(tiff)))


def read_tiff(handle: BinaryIO, max_bytes: int, index: int | None = None) -> tuple[np.ndarray, str]:
    """Decode a single-page TIFF, or page `index` of a multi-page one (tiff_pages);
    returns the array and its kind."""
    with decoding("TIFF"), _tifffile().TiffFile(handle) as tiff:
        size = os.fstat(handle.fileno()).st_size
        pages = _full_pages(tiff)
        if not pages:  # what a file cut before its image directory looks like
            raise InputError("corrupt or truncated TIFF: no readable image directory")
        if index is None and len(pages) > 1:
            raise InputError(
                f"{len(pages)} pages; gccl label labels each page as an image of its own"
            )
        if index is not None and index >= len(pages):
            raise InputError(f"no page {index + 1} (the file has {len(pages)})")
        page = pages[index or 0]
        if "Z" in page.axes:
            raise not_2d(page.shape)
        samples = int(np.prod(page.shape)) // max(1, page.imagelength * page.imagewidth)
        sample_bytes = page.dtype.itemsize if page.dtype is not None else 8
        check_size(page.imagelength, page.imagewidth, samples, sample_bytes, max_bytes)
        ends = [o + n for o, n in zip(page.dataoffsets, page.databytecounts, strict=True) if n]
        if max(ends, default=0) > size:
            raise InputError("corrupt or truncated TIFF: image data runs past the end of the file")
        array = page.asarray()
        if page.axes.startswith("S"):  # planar configuration: samples first
            array = np.moveaxis(array, 0, -1)
        return _displayed(page, array)


def _full_pages(tiff: tifffile.TiffFile) -> list[tifffile.TiffPage]:
    """The pages of `tiff` that are not reduced-resolution ones (thumbnails, pyramid levels).

    The page directories form a chain; one that points back to an earlier one
    (a loop) is refused, and so is a chain longer than MAX_TIFF_PAGES: walking
    either to its end would never finish or take minutes and gigabytes.
    """
    pages = tiff.pages
    pages.cache = False  # a page is looked at once; keeping them all is what grows
    offsets: set[int] = set()
    full: list[tifffile.TiffPage] = []
    for index in range(MAX_TIFF_PAGES + 1):
        try:
            page = pages[index]
        except IndexError:
            return full
        if index == MAX_TIFF_PAGES:
            raise InputError(
                f"TIFF of more than {MAX_TIFF_PAGES} pages; split it into files of fewer"
            )
        if page.offset in offsets:
            raise InputError("corrupt TIFF: its page directories form a loop")
        offsets.add(page.offset)
        if isinstance(page, _tifffile().TiffPage) and not page.is_reduced:
            full.append(page)
    return full


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
