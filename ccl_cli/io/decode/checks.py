"""What every decoder shares: the memory limits checked before each allocation, and
every library failure turned into one InputError line.

--max-image-bytes bounds the decoded image, and so each buffer on the way to it: a
TIFF strip or tile decoded (at most the limit), its compressed data and a PNG's (at
most COMPRESSED_SLACK times the samples they hold, plus 64 KiB), a TIFF page's tables
(at most the limit). A decode holds a few of them at once: at most WORKING_FACTOR
times the limit, plus MAX_METADATA_BYTES of TIFF tags (tiff_layout.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType

from ...errors import InputError

#: Largest image accepted, in pixels: a 46340x46340 scan still reads, a
#: decompression bomb declaring billions of pixels fails before any allocation.
MAX_PIXELS = 2**31
#: Compressed bytes allowed per byte of the samples they hold: deflate, LZW and CCITT
#: codes can be larger than the samples of noise, never twice as large.
COMPRESSED_SLACK = 2
#: How many --max-image-bytes a decode may take at once: the image, a compressed
#: chunk (COMPRESSED_SLACK), that chunk decoded and the decoder's copy of it.
WORKING_FACTOR = 5


def no_stop() -> None:
    """The check_stop of a decode nothing stops."""


@contextmanager
def decoding(fmt: str, check_stop: Callable[[], None] = no_stop) -> Iterator[None]:
    """Turn whatever a decoder library raises into one InputError line.

    check_stop is called first: a stop request that came while the library ran (a
    signal handler may raise inside it, and libraries catch what they raise) is the
    stop's, not a failure of the input.
    """
    try:
        yield
    except InputError:
        raise
    except MemoryError:
        check_stop()
        raise InputError(f"{fmt} too large to decode in memory") from None
    except Exception as exc:  # every library failure is one reason for one input
        check_stop()
        raise InputError(f"corrupt or truncated {fmt}: {_library_reason(exc)}") from None


#: A Python object's repr in a library's message (Pillow names the file it could not
#: identify as `<_io.BufferedReader name='...'>`): the input's row names the file already.
_OBJECT_REPR = re.compile(r"\s*<[A-Za-z_][\w.]*(?: [^<>]*)?>")


def _library_reason(error: BaseException) -> str:
    """A decoder library's exception as a reason a user reads: its first line, without
    Python object reprs, at most 120 characters (the exception's type where it says nothing)."""
    lines = _OBJECT_REPR.sub("", str(error)).strip().splitlines()
    return (lines[0].strip() if lines and lines[0].strip() else type(error).__name__)[:120]


def check_size(height: int, width: int, samples: int, sample_bytes: int, max_bytes: int) -> None:
    """Refuse images beyond MAX_PIXELS or `max_bytes` decoded before anything is allocated."""
    if height * width > MAX_PIXELS:
        raise InputError(f"image too large ({width}x{height}; at most 2**31 pixels)")
    decoded = height * width * samples * sample_bytes
    if decoded > max_bytes:
        raise InputError(
            f"image too large ({width}x{height}, {samples} sample(s) of {sample_bytes} byte(s): "
            f"{decoded} bytes decoded; --max-image-bytes is {max_bytes})"
        )


def check_allocation(what: str, size: int, max_bytes: int) -> None:
    """Refuse a buffer of `size` bytes beyond `max_bytes`, before it is allocated."""
    if size > max_bytes:
        raise InputError(f"{what} would take {size} bytes; --max-image-bytes is {max_bytes}")


def not_2d(shape: tuple[int, ...]) -> InputError:
    """The error for an input that is not one 2-D image."""
    shape = tuple(int(n) for n in shape)
    volume = "; or one volume: a .npy, or slices with --volume"
    return InputError(
        f"{len(shape)}-D image (shape {shape}); only 2-D images are labeled: save each slice "
        "as a 2-D file of its own, or as the pages of a multi-page TIFF"
        + (volume if len(shape) == 3 else "")
    )


def pillow() -> ModuleType:
    """Pillow's Image module, imported at the first file it decodes.

    Pillow's default bomb limit (89 Mpixel) rejects legitimate large-format
    scans. Ours is checked from the header before Pillow decodes, so Pillow's
    own check (which warns above its limit, through the process-global
    warnings machinery) never fires for files we read.
    """
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    return Image
