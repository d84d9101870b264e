"""The preview: an 8-bit RGB PNG for people, the image in gray with each component tinted."""

from __future__ import annotations

import numpy as np

from .label_images import encode_png


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
    palette = label_colors(int(labels.max(initial=0)))
    tinted = (labels != 0).astype(np.uint16)
    # Untinted: (2 g + 0) / 2 = g; tinted: (g + colour) / 2.
    rgb = ((gray * (2 - tinted))[..., None] + palette[labels]) // 2
    return encode_png(rgb.astype(np.uint8))


def _display_gray(values: np.ndarray) -> np.ndarray:
    """The image as uint8 gray for a preview (see encode_preview_png)."""
    if values.dtype == np.bool_:
        return values.astype(np.uint8) * 255
    # Percentiles of about a million evenly spaced pixels: the same picture at any size.
    sample = values.ravel()[:: max(1, values.size // 1_000_000)].astype(np.float64)
    sample = sample[np.isfinite(sample)]
    if sample.size == 0:
        return np.zeros(values.shape, dtype=np.uint8)
    low, high = np.percentile(sample, [1, 99])
    if high <= low:
        low, high = sample.min(), sample.max()
    if values.dtype.kind in "iu" and values.dtype.itemsize <= 2:
        # One lookup table over the whole dtype range instead of arithmetic per pixel.
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


def label_colors(max_label: int) -> np.ndarray:
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
