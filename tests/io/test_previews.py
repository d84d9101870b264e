"""ccl_cli.io.previews: the preview PNG keeps the image in gray and tints each component."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from ccl_cli.io.previews import encode_preview_png


def decode_preview(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "PNG" and image.mode == "RGB"
        return np.asarray(image)


def test_preview_keeps_background_and_tints_components() -> None:
    values = np.zeros((30, 40), dtype=bool)
    values[5:10, 5:10] = values[20:25, 20:35] = True
    values[0, 39] = True  # foreground left unlabeled: stays white
    labels = np.zeros((30, 40), np.uint32)
    labels[5:10, 5:10], labels[20:25, 20:35] = 1, 2
    rgb = decode_preview(encode_preview_png(values, labels))
    assert rgb.shape == (30, 40, 3)
    np.testing.assert_array_equal(
        rgb[labels == 0], np.repeat(values[labels == 0, None] * 255, 3, 1)
    )
    first, second = rgb[7, 7], rgb[22, 22]
    assert (rgb[5:10, 5:10] == first).all() and (rgb[20:25, 20:35] == second).all()
    assert len({tuple(first), tuple(second), (255, 255, 255)}) == 3
    assert first.max() - first.min() > 30  # a real colour, not a gray
    assert encode_preview_png(values, labels) == encode_preview_png(values, labels)


def test_preview_stretches_numbers_and_blacks_out_non_finite() -> None:
    values = np.tile(np.linspace(0, 100, 101), (3, 1))
    values[1, :3] = [np.nan, np.inf, -np.inf]
    rgb = decode_preview(encode_preview_png(values, np.zeros(values.shape, np.uint8)))
    gray = rgb[..., 0]
    assert (rgb[..., 0] == rgb[..., 2]).all()
    assert gray[0, 0] == 0 and gray[0, -1] == 255  # beyond the 1st/99th percentiles: clipped
    assert (np.diff(gray[0].astype(int)) >= 0).all() and 120 <= gray[0, 50] <= 135
    assert (gray[1, :3] == 0).all()


def test_preview_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError):
        encode_preview_png(np.zeros((3, 4)), np.zeros((4, 3), np.uint8))
