"""What every decoder shares: the size limits checked before pixels are allocated, and
every library failure turned into one InputError line."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from ...errors import InputError

#: Largest image accepted, in pixels: a 46340x46340 scan still reads, a
#: decompression bomb declaring billions of pixels fails before any allocation.
MAX_PIXELS = 2**31


@contextmanager
def decoding(fmt: str) -> Iterator[None]:
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


def not_2d(shape: tuple[int, ...]) -> InputError:
    """The error for an input that is not one 2-D image."""
    shape = tuple(int(n) for n in shape)
    return InputError(
        f"{len(shape)}-D image (shape {shape}); only 2-D images are labeled: save each slice "
        "as a 2-D file of its own, or as the pages of a multi-page TIFF"
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
