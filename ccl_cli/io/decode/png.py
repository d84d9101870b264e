"""PNG decoding: plain gray files through the fast path (plain_png), the others through
imagecodecs' libpng (every 16-bit file, plain 8-bit gray) or Pillow (1-bit, palettes,
transparency, animations)."""

from __future__ import annotations

import io
import struct
from typing import TYPE_CHECKING, BinaryIO

import imagecodecs
import numpy as np

from ...errors import InputError
from . import plain_png
from .checks import check_size, decoding, not_2d, pillow
from .pixels import apply_palette

if TYPE_CHECKING:
    from PIL import Image

MAGIC = b"\x89PNG\r\n\x1a\n"

#: Samples per decoded pixel of each PNG colour type (a palette looks up to RGB).
_SAMPLES = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}


def read_png(handle: BinaryIO, head: bytes, max_bytes: int) -> tuple[np.ndarray, str]:
    """Decode a PNG; returns the array and its kind ('gray' or a colour kind)."""
    if len(head) < 26 or head[12:16] != b"IHDR":
        raise InputError("corrupt or truncated PNG: no IHDR header")
    width, height, bit_depth, color_type = struct.unpack(">IIBB", head[16:26])
    samples = _SAMPLES.get(color_type, 4)
    check_size(height, width, samples, 2 if bit_depth == 16 else 1, max_bytes)
    if color_type == 0 and bit_depth in (8, 16):
        data = handle.read()
        with decoding("PNG"):
            plain = plain_png.decode_plain_gray(data)
        if plain is not None:
            return plain, "gray"
        handle = io.BytesIO(data)
    if bit_depth == 16:
        # libpng keeps every bit; Pillow narrows 16-bit colour to 8 bits, and the
        # mode it opens 16-bit gray in ("I" or "I;16") changed across its versions.
        kind = {0: "gray", 2: "RGB", 4: "gray+alpha", 6: "RGBA"}.get(color_type)
        if kind is None:
            raise InputError(f"corrupt PNG: 16 bits with colour type {color_type}")
        with decoding("PNG"):
            return imagecodecs.png_decode(handle.read()), kind
    if bit_depth == 8 and color_type == 0 and head[28:29] == b"\0":
        # Plain 8-bit gray, not interlaced, that the fast path left: libpng decodes it
        # with less overhead than Pillow. An animation (acTL) or a transparent gray
        # (tRNS, to which libpng adds an alpha channel) goes to Pillow, as does a file
        # whose chunks before the pixels merely hold those letters.
        data = handle.read()
        ahead = data[: data.find(b"IDAT")]
        if b"acTL" not in ahead and b"tRNS" not in ahead:
            with decoding("PNG"):
                return imagecodecs.png_decode(data), "gray"
        handle = io.BytesIO(data)
    with decoding("PNG"), pillow().open(handle) as image:
        frames = getattr(image, "n_frames", 1)
        if frames > 1:
            raise not_2d((frames, height, width))
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
        return apply_palette(np.asarray(image), palette)
    if mode in ("LA", "RGB", "RGBA"):
        return np.asarray(image), {"LA": "gray+alpha"}.get(mode, mode)
    raise InputError(f"unsupported PNG mode {mode}")
