"""From decoded samples to displayed gray intensity, whatever the format: palettes looked
up, colour reduced by --color-to-gray, and the dtypes gccl labels."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...contract.params import SUPPORTED_DTYPES
from ...errors import InputError
from ...options import COLOR_TO_GRAY_CHOICES
from .checks import not_2d

if TYPE_CHECKING:
    from PIL import Image

_COLOR_HINT = "convert it with --color-to-gray " + "|".join(COLOR_TO_GRAY_CHOICES)
_CHANNELS = {"red": 0, "green": 1, "blue": 2}
#: Pixels of a colour image reduced to luma at a time: its wide temporaries stay small.
_LUMA_BLOCK = 2**18
#: The colour kinds a decoder may report besides "gray", and whether they carry alpha.
_HAS_ALPHA = {"RGB": False, "RGBA": True, "color palette": False, "gray+alpha": True}


def apply_palette(indices: np.ndarray, palette: np.ndarray) -> tuple[np.ndarray, str]:
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


def from_pillow(image: Image.Image, fmt: str) -> tuple[np.ndarray, str]:
    """The samples of a loaded Pillow image of at most 8 bits per channel, and their kind,
    mode by mode; InputError naming `fmt` for another mode (CMYK, for one)."""
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
    raise InputError(f"unsupported {fmt} mode {mode}")


def color_to_gray(array: np.ndarray, kind: str, choice: str | None) -> np.ndarray:
    """Reduce an (H, W, C) colour image to one channel, or refuse without a choice."""
    if choice is None:
        alpha = " (alpha is dropped)" if _HAS_ALPHA[kind] else ""
        raise InputError(f"{kind} image; {_COLOR_HINT}{alpha}")
    if kind == "gray+alpha":
        return array[..., 0]  # R = G = B = gray: every choice, luma included, gives it
    if choice != "luma":
        return array[..., _CHANNELS[choice]]
    gray = np.empty(array.shape[:2], array.dtype)
    rows = max(1, _LUMA_BLOCK // max(1, array.shape[1]))
    for start in range(0, array.shape[0], rows):
        gray[start : start + rows] = _luma(array[start : start + rows])
    return gray


def _luma(rgb: np.ndarray) -> np.ndarray:
    """ITU-R 601 luma of (H, W, 3+) samples: in float64 for floats, else in integers
    rounded half up (int32 holds 1000 * 65535; wider types need int64)."""
    if rgb.dtype.kind == "f":
        red, green, blue = (rgb[..., c].astype(np.float64) for c in range(3))
        return (299 * red + 587 * green + 114 * blue) / 1000
    wide = np.int32 if rgb.dtype.itemsize <= 2 else np.int64
    r, g, b = (rgb[..., c].astype(wide) for c in range(3))
    return (299 * r + 587 * g + 114 * b + 500) // 1000


def supported_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype an array of `dtype` is returned as; InputError when there is none."""
    if dtype == np.float16:
        return np.dtype(np.float32)  # exact widening
    native = dtype.newbyteorder("=")
    if native not in SUPPORTED_DTYPES:
        names = ", ".join(d.name for d in SUPPORTED_DTYPES)
        raise InputError(f"unsupported dtype {dtype.name} (supported: {names})")
    return native


def as_supported(array: np.ndarray) -> np.ndarray:
    """Final checks shared by all formats: 2-D, non-empty, supported native dtype."""
    if array.ndim != 2:
        raise not_2d(array.shape)
    if array.size == 0:
        raise InputError(f"empty image (shape {tuple(array.shape)})")
    dtype = supported_dtype(array.dtype)
    return np.ascontiguousarray(array, dtype=dtype)
