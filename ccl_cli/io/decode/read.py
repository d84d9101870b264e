"""One input file to one 2-D array: the file opened safely, its format recognised by its
magic bytes (never by its suffix), the format's decoder called, colour reduced."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ...errors import InputError
from ...options import COLOR_TO_GRAY_CHOICES, MAX_IMAGE_BYTES
from . import camera, npy, pixels, png, tiff
from .checks import no_stop

#: Why a file of no format gccl reads fails.
NOT_AN_IMAGE = "not a PNG, TIFF, JPEG, BMP, WebP or NPY image"
#: Suffixes a directory scan picks up (compare case-insensitively).
IMAGE_SUFFIXES: tuple[str, ...] = (
    ".png",
    ".tif",
    ".tiff",
    ".jpg",
    ".jpeg",
    ".bmp",
    ".webp",
    ".npy",
)
#: Suffixes of formats that hold one image (a TIFF may hold pages: image_pages).
_ONE_IMAGE_SUFFIXES = frozenset(IMAGE_SUFFIXES) - {".tif", ".tiff"}


def is_image_path(path: str | Path) -> bool:
    """Whether a directory scan should pick up `path` (by suffix, any case)."""
    return os.path.splitext(path)[1].lower() in IMAGE_SUFFIXES


def may_hold_pages(path: str | Path) -> bool:
    """Whether `path` may be a multi-page TIFF by its suffix (any other suffix of a
    format gccl reads says one image; an unknown one is looked at: image_pages)."""
    return os.path.splitext(path)[1].lower() not in _ONE_IMAGE_SUFFIXES


def read_image(
    path: Path,
    color_to_gray: str | None = None,
    max_bytes: int = MAX_IMAGE_BYTES,
    page: int | None = None,
    check_stop: Callable[[], None] = no_stop,
) -> np.ndarray:
    """Decode one image file, or page `page` (from 0) of a multi-page TIFF (image_pages),
    to a 2-D array of displayed intensity.

    color_to_gray: None (colour images are an error) or one of
    COLOR_TO_GRAY_CHOICES: a single channel, or ITU-R 601 luma rounded half
    up; the dtype is kept and alpha dropped.
    max_bytes: the most bytes the pixels may decode to, and each buffer on the way to
    them, checked before it is allocated (checks.py).
    check_stop: called between the steps of a long decode (a TIFF's strips and tiles);
    what it raises ends the decode unchanged. Once it has raised it must raise at
    every call (a library failure after a stop request is the stop's: checks.decoding).
    Only a regular file is read (a FIFO or device is refused without
    blocking), from the one descriptor opened and checked.
    Returns a C-contiguous, native-endian array of a `SUPPORTED_DTYPES` dtype
    (1-bit images as bool with ink False).
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
        file_format = _format_of(head)
        if file_format == "png":
            array, kind = png.read_png(handle, head, max_bytes)
        elif file_format == "tiff":
            array, kind = tiff.read_tiff(handle, max_bytes, page, check_stop)
        elif page:
            raise InputError(f"no page {page + 1}: not a TIFF")
        elif file_format == "npy":
            array, kind = npy.read_npy(handle, max_bytes), "gray"
        elif file_format == "camera":
            array, kind = camera.read_camera(handle, head, max_bytes)
        else:
            raise InputError(NOT_AN_IMAGE)
    if kind != "gray":
        array = pixels.color_to_gray(array, kind, color_to_gray)
    return pixels.as_supported(array)


def unreadable(path: Path) -> str | None:
    """Why `path` is no image gccl reads, as far as its first bytes tell (no such file, not a
    file, empty, a format gccl does not read), or None where it may be one (its decoder has
    the last word): for a reason that must not hide behind another (a name collision)."""
    try:
        with _open_regular(Path(path)) as handle:
            head = _read_head(handle)
    except InputError as error:
        return str(error)
    if not head:
        return "empty file"
    return None if _format_of(head) else NOT_AN_IMAGE


def _format_of(head: bytes) -> str | None:
    """The format a file's first bytes announce (png, tiff, npy, camera: JPEG, BMP, WebP),
    or None."""
    if head.startswith(png.MAGIC):
        return "png"
    if head[:4] in tiff.MAGICS:
        return "tiff"
    if head.startswith(npy.MAGIC):
        return "npy"
    if head.startswith((camera.JPEG_MAGIC, camera.BMP_MAGIC)) or camera.is_webp(head):
        return "camera"
    return None


def image_pages(path: Path) -> int:
    """How many images `path` holds: the pages of a multi-page TIFF (a fax, a scanned
    document), each labeled as an image of its own; 1 for anything else, and for a
    file that does not read (reading it then says why)."""
    try:
        with _open_regular(Path(path)) as handle:
            if _read_head(handle)[:4] not in tiff.MAGICS:
                return 1
            return tiff.tiff_pages(handle)
    except Exception:  # every problem is the reader's to report
        return 1


def _open_regular(path: Path) -> io.BufferedReader:
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


def _read_head(handle: io.BufferedReader) -> bytes:
    """The first bytes of the file (enough for magic and PNG header); OS errors as InputError.

    The handle is left at the start of the file.
    """
    try:
        head = handle.read(32)
        handle.seek(0)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}") from None
    return head
