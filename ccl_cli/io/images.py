"""Image files in and out: inputs decoded to displayed intensity, outputs encoded.

Inputs are PNG (plain gray ones through png.py, the others through imagecodecs' libpng
or Pillow), TIFF (tifffile + imagecodecs) or NPY, recognised by their magic bytes, never by
their suffix. Whatever the storage, `read_image`
returns what a viewer shows: a 2-D array of one of `params.SUPPORTED_DTYPES`
(1-bit images as bool with ink False, MinIsWhite flipped, gray palettes looked
up). Every problem with an input becomes one `InputError` line; a traceback
would mean a bug here.

Outputs are label images (16-bit PNG, 32-bit TIFF) and the colored preview.
"""

from __future__ import annotations

import io
import logging
import os
import stat
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, BinaryIO

import imagecodecs
import numpy as np

from ..contract.params import SUPPORTED_DTYPES
from ..errors import InputError
from ..options import COLOR_TO_GRAY_CHOICES, MAX_IMAGE_BYTES, TIFF_COMPRESSIONS
from . import png

if TYPE_CHECKING:  # both load at the first file that needs them (_pillow, _tifffile)
    import tifffile
    from PIL import Image

#: Suffixes a directory scan picks up (compare case-insensitively).
IMAGE_SUFFIXES: tuple[str, ...] = (".png", ".tif", ".tiff", ".npy")

#: Largest image accepted, in pixels: a 46340x46340 scan still reads, a
#: decompression bomb declaring billions of pixels fails before any allocation.
MAX_PIXELS = 2**31

#: Page directories of a TIFF looked at, at most: a file of more is refused
#: without walking the rest (the pages of a shorter one are each labeled as an
#: image of its own: image_pages).
MAX_TIFF_PAGES = 1024

# tifffile logs the oddities it works around (bad offsets, missing tags) to
# stderr. Here a file either reads or fails as one InputError line; stray log
# lines would break that one-line-per-file contract in the middle of progress.
logging.getLogger("tifffile").setLevel(logging.CRITICAL)


def _pillow() -> ModuleType:
    """Pillow's Image module, imported at the first file it decodes.

    Pillow's default bomb limit (89 Mpixel) rejects legitimate large-format
    scans. Ours is checked from the header before Pillow decodes, so Pillow's
    own check (which warns above its limit, through the process-global
    warnings machinery) never fires for files we read.
    """
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    return Image


def _tifffile() -> ModuleType:
    """tifffile, imported at the first TIFF read or written."""
    import tifffile

    return tifffile


# Label images are mostly long runs of one value, which the fastest deflate
# levels already shrink well; higher levels cost several times the CPU for a
# few percent, and writing must keep up with the labeling. PNG rows are
# filtered with "up" alone: libpng's default tries all five filters on every
# row, which on a document scan's labels costs 3.4x the time for 10% fewer
# bytes. The deflate stream comes from zlib-ng (imagecodecs), not libpng's
# zlib: at zlib-ng's level 2 a scan's labels take 15 ms and 207 kB where
# libpng at zlib level 1 took 28 ms and 288 kB (zlib-ng's level 1 is a
# quicker but much weaker method).
_PNG_LEVEL = 2
#: Bytes of compressed data per IDAT chunk (the format allows up to 2**31 - 1).
_PNG_CHUNK = 1 << 30
_TIFF_LEVEL = 1
#: TIFF codecs of label images: deflate reads everywhere; zstd encodes 3-8x
#: faster and smaller, and reads in libtiff >= 4.0.10, GDAL, tifffile and Pillow.
_TIFF_CODEC = {"deflate": "zlib", "zstd": "zstd"}

#: Written into every label image (PNG tEXt and TIFF Software), within its first bytes:
#: how a later run tells a label image it may replace from a file it must leave alone.
LABEL_MARK = b"gccl label image"

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_TIFF_MAGICS = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")  # classic and BigTIFF
_NPY_MAGIC = b"\x93NUMPY"

_COLOR_HINT = "convert it with --color-to-gray " + "|".join(COLOR_TO_GRAY_CHOICES)
_CHANNELS = {"red": 0, "green": 1, "blue": 2}
# The colour kinds a decoder may report besides "gray", and whether they carry alpha.
_HAS_ALPHA = {"RGB": False, "RGBA": True, "color palette": False, "gray+alpha": True}


def is_image_path(path: str | Path) -> bool:
    """Whether a directory scan should pick up `path` (by suffix, any case)."""
    return os.path.splitext(path)[1].lower() in IMAGE_SUFFIXES


def read_image(
    path: Path,
    color_to_gray: str | None = None,
    max_bytes: int = MAX_IMAGE_BYTES,
    page: int | None = None,
) -> np.ndarray:
    """Decode one image file, or page `page` (from 0) of a multi-page TIFF (image_pages),
    to a 2-D array of displayed intensity.

    color_to_gray: None (colour images are an error) or one of
    COLOR_TO_GRAY_CHOICES: a single channel, or ITU-R 601 luma rounded half
    up; the dtype is kept and alpha dropped.
    max_bytes: the most bytes the pixels may decode to, checked from the
    header before decoding (see MAX_IMAGE_BYTES).
    Only a regular file is read (a FIFO or device is refused without
    blocking), from the one descriptor opened and checked.
    Returns a C-contiguous, native-endian array of a `SUPPORTED_DTYPES` dtype.
    Raises InputError (one line, without the path) for anything unreadable,
    corrupt, colour without a conversion, 3-D, too large, or of an unsupported
    dtype; ValueError for a `color_to_gray` outside the choices (a caller bug).
    """
    if color_to_gray is not None and color_to_gray not in COLOR_TO_GRAY_CHOICES:
        raise ValueError(f"color_to_gray must be one of {COLOR_TO_GRAY_CHOICES}")
    with _open_regular(Path(path)) as handle:
        head = _read_head(handle)
        if not head:
            raise InputError("empty file")
        if head.startswith(_PNG_MAGIC):
            array, kind = _read_png(handle, head, max_bytes)
        elif head[:4] in _TIFF_MAGICS:
            array, kind = _read_tiff(handle, max_bytes, page)
        elif page:
            raise InputError(f"no page {page + 1}: not a TIFF")
        elif head.startswith(_NPY_MAGIC):
            array, kind = _read_npy(handle, max_bytes), "gray"
        else:
            raise InputError("not a PNG, TIFF or NPY image")
    if kind != "gray":
        array = _color_to_gray(array, kind, color_to_gray)
    return _as_supported(array)


def encode_label_png(labels: np.ndarray) -> bytes:
    """A (H, W) label array as a 16-bit grayscale PNG, marked with LABEL_MARK.

    Raises ValueError for negative labels or labels above 65535 (never wraps).
    """
    return _png(_checked_labels(labels, 65535).astype(np.uint16, copy=False), LABEL_MARK)


def encode_label_tiff(labels: np.ndarray, compression: str = "deflate") -> bytes:
    """A (H, W) label array as a single-page uint32 TIFF.

    compression: one of TIFF_COMPRESSIONS (both at their fastest level).
    Raises ValueError for negative labels or labels above 2**32 - 1.
    """
    if compression not in _TIFF_CODEC:
        raise ValueError(f"compression must be one of {TIFF_COMPRESSIONS}")
    labels32 = _checked_labels(labels, 2**32 - 1).astype(np.uint32)
    buffer = io.BytesIO()
    _tifffile().imwrite(
        buffer,
        labels32,
        photometric="minisblack",
        compression=_TIFF_CODEC[compression],
        compressionargs={"level": _TIFF_LEVEL},
        metadata=None,
        software=LABEL_MARK.decode(),
    )
    return buffer.getvalue()


def encode_preview_png(values: np.ndarray, labels: np.ndarray) -> bytes:
    """An 8-bit RGB PNG for people: the image in gray, each component tinted.

    values: the (H, W) image as read; bool shows as 0/255, numbers are
        stretched from their 1st to 99th percentile (min..max when those meet),
        NaN and infinities are black.
    labels: (H, W) non-negative labels; 0 stays untinted, every other label is
        mixed half and half with a colour that depends only on the label.
    Raises ValueError when the shapes differ.
    """
    if values.shape != labels.shape or values.ndim != 2:
        raise ValueError(f"values {values.shape} and labels {labels.shape} must be equal 2-D")
    gray = _display_gray(values).astype(np.uint16)
    palette = _label_colors(int(labels.max(initial=0)))
    tinted = (labels != 0).astype(np.uint16)
    # Untinted: (2 g + 0) / 2 = g; tinted: (g + colour) / 2.
    rgb = ((gray * (2 - tinted))[..., None] + palette[labels]) // 2
    return _png(rgb.astype(np.uint8))


def _png(array: np.ndarray, software: bytes = b"") -> bytes:
    """A (H, W) gray or (H, W, 3) RGB uint8/uint16 array as a PNG (see _PNG_LEVEL), with a
    Software text chunk when `software` is given.

    Every row gets filter type 2 ("up": each byte minus the byte above it,
    the first row minus zeros), and the filtered rows are one zlib stream.
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


# --- reading ---------------------------------------------------------------------


def _open_regular(path: Path) -> BinaryIO:
    """The file at `path` opened for reading, if it is a regular file; else InputError.

    The open does not block (a FIFO would wait for a writer forever) and the
    type is checked on the opened descriptor, so a file swapped for a FIFO or
    a device between a scan and the read is refused too.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError("no such file") from None
    except PermissionError:
        raise InputError("permission denied") from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputError("is a directory, not an image file")
        if not stat.S_ISREG(mode):
            raise InputError(f"not a regular file ({_file_kind(mode)}); only files are read")
        os.set_blocking(fd, True)
        raw = io.FileIO(fd, "rb")
        raw.name = str(path)  # decoders name the file in messages (and tifffile needs a str)
        return io.BufferedReader(raw)
    except BaseException:
        os.close(fd)
        raise


def _file_kind(mode: int) -> str:
    kinds = {
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    return next((name for test, name in kinds.items() if test(mode)), "not a file")


def _read_head(handle: BinaryIO) -> bytes:
    """The first bytes of the file (enough for magic and PNG header); OS errors as InputError.

    The handle is left at the start of the file.
    """
    try:
        head = handle.read(32)
        handle.seek(0)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}") from None
    return head


@contextmanager
def _decoding(fmt: str) -> Iterator[None]:
    """Turn whatever a decoder library raises into one InputError line."""
    try:
        yield
    except InputError:
        raise
    except MemoryError:
        raise InputError(f"{fmt} too large to decode in memory") from None
    except Exception as exc:  # every library failure is one reason for one input
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
        raise InputError(f"corrupt or truncated {fmt}: {detail}") from None


def _check_size(height: int, width: int, samples: int, sample_bytes: int, max_bytes: int) -> None:
    """Refuse images beyond MAX_PIXELS or `max_bytes` decoded before anything is allocated."""
    if height * width > MAX_PIXELS:
        raise InputError(f"image too large ({width}x{height}; at most 2**31 pixels)")
    decoded = height * width * samples * sample_bytes
    if decoded > max_bytes:
        raise InputError(
            f"image too large ({width}x{height}, {samples} sample(s) of {sample_bytes} byte(s): "
            f"{decoded} bytes decoded; --max-image-bytes is {max_bytes})"
        )


def _not_2d(shape: tuple[int, ...]) -> InputError:
    shape = tuple(int(n) for n in shape)
    return InputError(
        f"{len(shape)}-D image (shape {shape}); only 2-D images are labeled: save each slice "
        "as a 2-D file of its own, or as the pages of a multi-page TIFF"
    )


#: Samples per decoded pixel of each PNG colour type (a palette looks up to RGB).
_PNG_SAMPLES = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}


def _read_png(handle: BinaryIO, head: bytes, max_bytes: int) -> tuple[np.ndarray, str]:
    """Decode a PNG; returns the array and its kind ('gray' or a colour kind)."""
    if len(head) < 26 or head[12:16] != b"IHDR":
        raise InputError("corrupt or truncated PNG: no IHDR header")
    width, height, bit_depth, color_type = struct.unpack(">IIBB", head[16:26])
    samples = _PNG_SAMPLES.get(color_type, 4)
    _check_size(height, width, samples, 2 if bit_depth == 16 else 1, max_bytes)
    if color_type == 0 and bit_depth in (8, 16):
        data = handle.read()
        with _decoding("PNG"):
            plain = png.decode_plain_gray(data)
        if plain is not None:
            return plain, "gray"
        handle = io.BytesIO(data)
    if bit_depth == 16:
        # libpng keeps every bit; Pillow narrows 16-bit colour to 8 bits, and the
        # mode it opens 16-bit gray in ("I" or "I;16") changed across its versions.
        kind = {0: "gray", 2: "RGB", 4: "gray+alpha", 6: "RGBA"}.get(color_type)
        if kind is None:
            raise InputError(f"corrupt PNG: 16 bits with colour type {color_type}")
        with _decoding("PNG"):
            return imagecodecs.png_decode(handle.read()), kind
    if bit_depth == 8 and color_type == 0 and head[28:29] == b"\0":
        # Plain 8-bit gray, not interlaced: libpng decodes it in a fifth of Pillow's
        # time (small images). An animation (acTL) or a transparent gray (tRNS, to
        # which libpng adds an alpha channel) goes to Pillow, as does a file whose
        # chunks before the pixels merely hold those letters.
        data = handle.read()
        ahead = data[: data.find(b"IDAT")]
        if b"acTL" not in ahead and b"tRNS" not in ahead:
            with _decoding("PNG"):
                return imagecodecs.png_decode(data), "gray"
        handle = io.BytesIO(data)
    with _decoding("PNG"), _pillow().open(handle) as image:
        frames = getattr(image, "n_frames", 1)
        if frames > 1:
            raise _not_2d((frames, height, width))
        image.load()
        return _from_pillow(image)


def _from_pillow(image: Image.Image) -> tuple[np.ndarray, str]:
    """Pixels of a loaded Pillow PNG image of at most 8 bits per channel, mode by mode."""
    mode = image.mode
    if mode == "1":  # Pillow's 1-bit pixels are bytes 0/255: make them real bools
        return np.asarray(image).view(np.uint8) != 0, "gray"
    if mode == "L":
        return np.asarray(image), "gray"
    if mode == "P":
        palette = np.asarray(image.getpalette("RGB"), dtype=np.uint8).reshape(-1, 3)
        return _apply_palette(np.asarray(image), palette)
    if mode in ("LA", "RGB", "RGBA"):
        return np.asarray(image), {"LA": "gray+alpha"}.get(mode, mode)
    raise InputError(f"unsupported PNG mode {mode}")


def _apply_palette(indices: np.ndarray, palette: np.ndarray) -> tuple[np.ndarray, str]:
    """Look palette indices up: gray values when every used entry is gray, else RGB.

    Only the entries the pixels use are checked: writers often pad a gray
    palette with unused coloured entries, and what is displayed is still gray.
    Indices beyond the palette read as black (the PNG and TIFF specs leave them
    undefined).
    """
    used = np.bincount(indices.ravel(), minlength=len(palette)) > 0
    table = np.zeros((len(used), 3), dtype=palette.dtype)
    table[: len(palette)] = palette
    entries = table[used]
    if np.all(entries == entries[:, :1]):
        return table[:, 0][indices], "gray"
    return table[indices], "color palette"


def image_pages(path: Path) -> int:
    """How many images `path` holds: the pages of a multi-page TIFF (a fax, a scanned
    document), each labeled as an image of its own; 1 for anything else, and for a
    file that does not read (reading it then says why)."""
    try:
        with _open_regular(Path(path)) as handle:
            if _read_head(handle)[:4] not in _TIFF_MAGICS:
                return 1
            with _tifffile().TiffFile(handle) as tiff:
                return max(1, len(_full_pages(tiff)))
    except Exception:  # every problem is the reader's to report
        return 1


def _read_tiff(
    handle: BinaryIO, max_bytes: int, index: int | None = None
) -> tuple[np.ndarray, str]:
    """Decode a single-page TIFF, or page `index` of a multi-page one (image_pages);
    returns the array and its kind."""
    with _decoding("TIFF"), _tifffile().TiffFile(handle) as tiff:
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
            raise _not_2d(page.shape)
        samples = int(np.prod(page.shape)) // max(1, page.imagelength * page.imagewidth)
        sample_bytes = page.dtype.itemsize if page.dtype is not None else 8
        _check_size(page.imagelength, page.imagewidth, samples, sample_bytes, max_bytes)
        ends = [o + n for o, n in zip(page.dataoffsets, page.databytecounts, strict=True) if n]
        if max(ends, default=0) > size:
            raise InputError("corrupt or truncated TIFF: image data runs past the end of the file")
        array = page.asarray()
        if page.axes.startswith("S"):  # planar configuration: samples first
            array = np.moveaxis(array, 0, -1)
        return _tiff_displayed(page, array)


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


def _tiff_displayed(page: tifffile.TiffPage, array: np.ndarray) -> tuple[np.ndarray, str]:
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
        return _apply_palette(array, (page.colormap.T >> 8).astype(np.uint8))
    if kind in (photometric.RGB, photometric.YCBCR) and samples in (3, 4):
        return array, "RGB" if samples == 3 else "RGBA"
    name = getattr(kind, "name", str(kind))
    raise InputError(f"unsupported TIFF photometric {name} with {samples} sample(s) per pixel")


def _read_npy(handle: BinaryIO, max_bytes: int) -> np.ndarray:
    """Read a 2-D .npy without pickles; header checked before the data is read."""
    fmt = np.lib.format
    with _decoding("NPY"):
        major, _ = fmt.read_magic(handle)
        read_header = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
        shape, fortran_order, dtype = read_header(handle)
        if len(shape) != 2:
            raise _not_2d(shape)
        _supported_dtype(dtype)
        _check_size(shape[0], shape[1], 1, dtype.itemsize, max_bytes)
        count = shape[0] * shape[1]
        flat = np.fromfile(handle, dtype=dtype, count=count)
        if flat.size != count:
            raise InputError(f"corrupt or truncated NPY: {flat.size} of {count} values present")
        return flat.reshape(shape, order="F" if fortran_order else "C")


def _color_to_gray(array: np.ndarray, kind: str, choice: str | None) -> np.ndarray:
    """Reduce an (H, W, C) colour image to one channel, or refuse without a choice."""
    if choice is None:
        alpha = " (alpha is dropped)" if _HAS_ALPHA[kind] else ""
        raise InputError(f"{kind} image; {_COLOR_HINT}{alpha}")
    if kind == "gray+alpha":
        return array[..., 0]  # R = G = B = gray: every choice, luma included, gives it
    if choice != "luma":
        return array[..., _CHANNELS[choice]]
    if array.dtype.kind == "f":
        rgb = array[..., :3].astype(np.float64)
        luma = (299 * rgb[..., 0] + 587 * rgb[..., 1] + 114 * rgb[..., 2]) / 1000
        return luma.astype(array.dtype)
    # Integer luma, rounded half up; int32 holds 1000 * 65535, wider types need int64.
    wide = np.int32 if array.dtype.itemsize <= 2 else np.int64
    r, g, b = (array[..., c].astype(wide) for c in range(3))
    return ((299 * r + 587 * g + 114 * b + 500) // 1000).astype(array.dtype)


def _supported_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype an array of `dtype` is returned as; InputError when there is none."""
    if dtype == np.float16:
        return np.dtype(np.float32)  # exact widening
    native = dtype.newbyteorder("=")
    if native not in SUPPORTED_DTYPES:
        names = ", ".join(d.name for d in SUPPORTED_DTYPES)
        raise InputError(f"unsupported dtype {dtype.name} (supported: {names})")
    return native


def _as_supported(array: np.ndarray) -> np.ndarray:
    """Final checks shared by all formats: 2-D, non-empty, supported native dtype."""
    if array.ndim != 2:
        raise _not_2d(array.shape)
    if array.size == 0:
        raise InputError(f"empty image (shape {tuple(array.shape)})")
    dtype = _supported_dtype(array.dtype)
    return np.ascontiguousarray(array, dtype=dtype)


# --- writing ---------------------------------------------------------------------


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


def _display_gray(values: np.ndarray) -> np.ndarray:
    """The image as uint8 gray for a preview (see encode_preview_png)."""
    if values.dtype == np.bool_:
        return values.astype(np.uint8) * 255
    # Percentiles of about a million evenly spaced pixels: the same picture, far faster.
    sample = values.ravel()[:: max(1, values.size // 1_000_000)].astype(np.float64)
    sample = sample[np.isfinite(sample)]
    if sample.size == 0:
        return np.zeros(values.shape, dtype=np.uint8)
    low, high = np.percentile(sample, [1, 99])
    if high <= low:
        low, high = sample.min(), sample.max()
    if values.dtype.kind in "iu" and values.dtype.itemsize <= 2:
        # One lookup table over the whole dtype range beats arithmetic per pixel.
        info = np.iinfo(values.dtype)
        table = _stretch(np.arange(info.min, info.max + 1, dtype=np.float32), low, high)
        return table[values if info.min == 0 else values.astype(np.int32) - info.min]
    return _stretch(values if values.dtype.kind == "f" else values.astype(np.float32), low, high)


def _stretch(values: np.ndarray, low: float, high: float) -> np.ndarray:
    """Map low..high linearly to 0..255 (clipped); NaN and infinities to 0.

    A constant image (high == low) is mid gray, so that tints show on any value.
    """
    if high <= low:
        return np.where(np.isfinite(values), 128, 0).astype(np.uint8)
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = (values - low) * (255 / (high - low))
    np.nan_to_num(scaled, copy=False, nan=0, posinf=0, neginf=0)
    np.clip(scaled, 0, 255, out=scaled)
    scaled += 0.5
    return scaled.astype(np.uint8)


def _label_colors(max_label: int) -> np.ndarray:
    """(max_label + 1, 3) uint16 colours; row 0 (background) is black.

    Hues step by the golden ratio, so labels close in number (neighbours in
    raster order) get far-apart hues; saturation and value alternate a little
    so that hues that come round again still differ.
    """
    label = np.arange(max_label + 1, dtype=np.float64)
    hue = (label * 0.6180339887498949) % 1.0 * 6
    saturation = 0.65 + 0.25 * (label % 2)
    value = 1.0 - 0.2 * (label // 2 % 2)
    sector = np.floor(hue).astype(np.int64) % 6
    f = hue - np.floor(hue)
    p = value * (1 - saturation)
    q = value * (1 - saturation * f)
    t = value * (1 - saturation * (1 - f))
    # HSV to RGB: for each of the six hue sectors, where r, g and b come from.
    red = np.choose(sector, [value, q, p, p, t, value])
    green = np.choose(sector, [t, value, value, q, p, p])
    blue = np.choose(sector, [p, p, t, value, value, q])
    rgb = np.stack([red, green, blue], axis=1)
    colors = np.rint(rgb * 255).astype(np.uint16)
    colors[0] = 0
    return colors
