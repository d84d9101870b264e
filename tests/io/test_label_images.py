"""ccl_cli.io.label_images: label images round-tripping exactly through independent
readers (libpng, Pillow, tifffile), and the PNG writer's chunks as the format wants them."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import imagecodecs
import numpy as np
import pytest
import tifffile
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from label_files import read_label_image
from PIL import Image

from ccl_cli.io import label_images


def save_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_label_png_round_trips_exactly_as_16_bit_gray(tmp_path: Path) -> None:
    labels = np.random.default_rng(1).integers(0, 65536, (50, 70)).astype(np.uint32)
    labels[0, 0], labels[-1, -1] = 0, 65535
    data = label_images.encode_label_png(labels)
    assert data[12:16] == b"IHDR" and data[24:26] == bytes([16, 0])  # 16-bit, gray
    path = save_bytes(tmp_path / "l.labels.png", data)
    result = read_label_image(path)
    assert result.dtype == np.uint32
    np.testing.assert_array_equal(result, labels)


@pytest.mark.parametrize("bad", [65536, -1])
def test_label_png_refuses_values_it_cannot_hold(bad: int) -> None:
    labels = np.zeros((3, 3), np.int64)
    labels[1, 1] = bad
    with pytest.raises(ValueError, match=r"0\.\.65535"):
        label_images.encode_label_png(labels)


def test_label_tiff_round_trips_beyond_16_bits(tmp_path: Path) -> None:
    labels = np.arange(20 * 30, dtype=np.int64).reshape(20, 30) * 7_000_000
    labels[0, :3] = [65535, 65536, 2**32 - 1]
    data = label_images.encode_label_tiff(labels)
    with tifffile.TiffFile(io.BytesIO(data)) as tiff:
        assert len(tiff.pages) == 1
        page = tiff.pages.first
        assert page.dtype == np.uint32
        assert page.compression == tifffile.COMPRESSION.ADOBE_DEFLATE
        np.testing.assert_array_equal(page.asarray(), labels)
    path = save_bytes(tmp_path / "l.labels.tif", data)
    np.testing.assert_array_equal(read_label_image(path), labels)


def test_label_tiff_with_zstd_round_trips_and_is_smaller_than_deflate() -> None:
    labels = np.repeat(np.arange(300, dtype=np.uint32) * 15_000, 200).reshape(300, 200)
    data = label_images.encode_label_tiff(labels, "zstd")
    with tifffile.TiffFile(io.BytesIO(data)) as tiff:
        page = tiff.pages.first
        assert page.compression == tifffile.COMPRESSION.ZSTD
        np.testing.assert_array_equal(page.asarray(), labels)
    with Image.open(io.BytesIO(data)) as image:  # viewers built on libtiff read it too
        np.testing.assert_array_equal(np.asarray(image), labels)
    assert len(data) < len(label_images.encode_label_tiff(labels, "deflate"))


def test_label_tiff_refuses_unknown_compression() -> None:
    with pytest.raises(ValueError, match="deflate"):
        label_images.encode_label_tiff(np.zeros((2, 2), np.uint32), "lzw")


def test_label_tiff_refuses_values_beyond_32_bits() -> None:
    with pytest.raises(ValueError, match="4294967295"):
        label_images.encode_label_tiff(np.full((2, 2), 2**32, np.int64))


@pytest.mark.slow
@given(hnp.arrays(np.uint16, hnp.array_shapes(min_dims=2, max_dims=2, max_side=40)))
def test_label_encoders_round_trip_any_uint16(labels: np.ndarray) -> None:
    for encode in (label_images.encode_label_png, label_images.encode_label_tiff):
        with Image.open(io.BytesIO(encode(labels))) as image:
            np.testing.assert_array_equal(np.asarray(image).astype(np.uint32), labels)


@pytest.mark.slow
@given(
    hnp.arrays(
        st.sampled_from([np.uint8, np.uint16]),
        st.one_of(
            hnp.array_shapes(min_dims=2, max_dims=2, max_side=30),
            st.tuples(st.integers(1, 20), st.integers(1, 20), st.just(3)),
        ),
    )
)
def test_png_writer_round_trips_through_libpng(array: np.ndarray) -> None:
    """Gray and RGB, 8 and 16 bits: libpng (which checks every CRC) reads back each value."""
    np.testing.assert_array_equal(imagecodecs.png_decode(label_images.encode_png(array)), array)


def test_png_writer_splits_long_streams_into_idat_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(label_images, "_PNG_CHUNK", 5)
    labels = np.random.default_rng(2).integers(0, 9, (31, 17)).astype(np.uint16)
    data = label_images.encode_png(labels)
    kinds, offset = [], 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kinds.append((data[offset + 4 : offset + 8], length))
        offset += 12 + length
    assert kinds[0][0] == b"IHDR" and kinds[-1] == (b"IEND", 0)
    idat = [length for kind, length in kinds[1:-1]]
    assert all(kind == b"IDAT" for kind, _ in kinds[1:-1]) and len(idat) > 1
    assert max(idat) == 5
    np.testing.assert_array_equal(imagecodecs.png_decode(data), labels)
    with Image.open(io.BytesIO(data)) as image:
        np.testing.assert_array_equal(np.asarray(image), labels)
