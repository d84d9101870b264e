"""Decoding within bounded time: no format lets a small file repeat the decoder's work over
the image (JPEG scans, TIFF strips of a few pixels, empty PNG chunks, BMP run-length
escapes); such files fail at once with the reason. Files that stay within the bounds read
as their library reads them. Also: NPY header versions numpy does not write, and library
messages without Python object reprs.

Attack files are built here byte by byte (a progressive JPEG's scans are found by walking
its markers, written out below from the JPEG standard, not from ccl_cli)."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import tifffile
from PIL import Image

from ccl_cli.errors import InputError
from ccl_cli.io import decode
from ccl_cli.io.decode.checks import decoding

#: The most scans a JPEG may hold (README, Data safety).
MAX_SCANS = 100


def scans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each scan of a JPEG stream: its SOS segment and entropy-coded data,
    which ends at the first 0xFF not followed by 0x00 (stuffing) or 0xD0-0xD7 (restarts)."""
    found, position = [], 2
    while position < len(data) and data[position + 1] != 0xD9:
        assert data[position] == 0xFF
        length = int.from_bytes(data[position + 2 : position + 4], "big")
        end = position + 2 + length
        if data[position + 1] == 0xDA:
            while not (data[end] == 0xFF and data[end + 1] not in (0, *range(0xD0, 0xD8))):
                end += 1
            found.append((position, end))
        position = end
    return found


def progressive(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, "JPEG", progressive=True, quality=90)
    return buffer.getvalue()


def with_scans(data: bytes, total: int, which: int = 0) -> bytes:
    """The stream with its scan `which` repeated in place until it holds `total` scans. The
    first (DC, first pass) sets the same coefficients at each repeat: the image is unchanged.
    The last refines AC bands, which in a flat image take a few bytes."""
    found = scans(data)
    start, end = found[which]
    return data[:end] + data[start:end] * (total - len(found)) + data[end:]


def pillow_pixels(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image)


def picture(shape: tuple[int, ...]) -> np.ndarray:
    """Noise over a ramp (gray) or noise (colour): blocks with detail in every band."""
    rng = np.random.default_rng(3)
    if len(shape) == 3:
        return rng.integers(0, 255, shape).astype(np.uint8)
    return (rng.integers(0, 60, shape) + np.arange(shape[1])).astype(np.uint8)


def test_a_progressive_jpeg_at_the_scan_limit_reads_and_one_over_is_refused(
    tmp_path: Path,
) -> None:
    for array, choice in ((picture((40, 56)), None), (picture((40, 56, 3)), "luma")):
        data = progressive(array)
        assert 5 <= len(scans(data)) <= 12  # what encoders write
        at_limit = with_scans(data, MAX_SCANS)
        assert len(scans(at_limit)) == MAX_SCANS
        path = tmp_path / "limit.jpg"
        path.write_bytes(at_limit)
        want = pillow_pixels(data)  # the file as written, before the repeats
        if want.ndim == 3:
            want = np.asarray(Image.fromarray(want).convert("L"))
        got = decode.read_image(path, color_to_gray=choice)
        assert np.abs(got.astype(int) - want).max() <= (1 if choice else 0)
        path.write_bytes(with_scans(data, MAX_SCANS + 1))
        with pytest.raises(InputError, match=f"^JPEG of over {MAX_SCANS} scans"):
            decode.read_image(path, color_to_gray=choice)


def test_a_few_hundred_kb_of_empty_scans_over_a_large_image_is_refused(tmp_path: Path) -> None:
    """3000 scans over 2000x2000 pixels: every scan is a pass of the decoder over the image."""
    data = with_scans(progressive(np.zeros((2000, 2000), np.uint8)), 3000, which=-1)
    assert len(data) < 512 * 1024
    path = tmp_path / "scans.jpg"
    path.write_bytes(data)
    with pytest.raises(InputError, match=f"^JPEG of over {MAX_SCANS} scans"):
        decode.read_image(path)


def test_scan_markers_inside_metadata_are_not_scans(tmp_path: Path) -> None:
    """A baseline JPEG whose comment segment holds 500 SOS marker bytes reads."""
    array = picture((24, 32))
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, "JPEG", quality=95)
    data = buffer.getvalue()
    comment = b"\xff\xda\x00\x08" * 500
    data = data[:2] + b"\xff\xfe" + struct.pack(">H", len(comment) + 2) + comment + data[2:]
    path = tmp_path / "comment.jpg"
    path.write_bytes(data)
    np.testing.assert_array_equal(decode.read_image(path), pillow_pixels(data))


def tiff_of_jpeg_tile(path: Path, jpeg: bytes, size: int) -> Path:
    tifffile.imwrite(
        path,
        iter([jpeg]),
        shape=(size, size),
        dtype=np.uint8,
        compression="jpeg",
        tile=(size, size),
        photometric="minisblack",
    )
    return path


def test_a_jpeg_tile_of_a_tiff_holds_at_most_the_scan_limit(tmp_path: Path) -> None:
    data = progressive(picture((64, 64)))
    path = tiff_of_jpeg_tile(tmp_path / "limit.tif", with_scans(data, MAX_SCANS), 64)
    np.testing.assert_array_equal(decode.read_image(path), pillow_pixels(data))
    path = tiff_of_jpeg_tile(tmp_path / "over.tif", with_scans(data, MAX_SCANS + 1), 64)
    with pytest.raises(InputError, match=f"^JPEG of over {MAX_SCANS} scans"):
        decode.read_image(path)


def test_a_tiff_of_many_strips_of_a_few_pixels_is_refused(tmp_path: Path) -> None:
    """Each strip is a call to the decoder: 20000 one-pixel strips, where a few kilobytes of
    samples per strip is what writers make."""
    narrow = (np.arange(20000) % 251).astype(np.uint8)[:, None]
    path = tmp_path / "strips.tif"
    tifffile.imwrite(path, narrow, compression="zlib", rowsperstrip=1)
    with pytest.raises(InputError, match=r"^TIFF of 20000 strips of 1 samples \(beyond 4096"):
        decode.read_image(path)
    for rows, shape in ((1, (4096, 1)), (1, (5000, 256)), (16, (20000, 16))):  # within bounds
        array = (np.arange(np.prod(shape)) % 251).astype(np.uint8).reshape(shape)
        tifffile.imwrite(path, array, compression="zlib", rowsperstrip=rows)
        np.testing.assert_array_equal(decode.read_image(path), array)


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def test_a_png_of_a_million_empty_data_chunks_is_refused(tmp_path: Path) -> None:
    header = png_chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    pixels = png_chunk(b"IDAT", zlib.compress(b"\x00\x07"))
    empty = png_chunk(b"IDAT", b"")
    path = tmp_path / "empty.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + header + pixels + empty * 10 + png_chunk(b"IEND", b""))
    assert decode.read_image(path).tolist() == [[7]]  # a few empty ones: the pixel reads
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + header + pixels + empty * 1_000_000 + png_chunk(b"IEND", b"")
    )
    with pytest.raises(InputError, match=r"^corrupt PNG: over \d+ bytes of pixel data"):
        decode.read_image(path)


def bmp_rle8(width: int, height: int, body: bytes) -> bytes:
    palette = b"".join(bytes((i, i, i, 0)) for i in range(256))
    offset = 14 + 40 + len(palette)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 8, 1, len(body), 2835, 2835, 256, 0)
    return b"BM" + struct.pack("<IHHI", offset + len(body), 0, 0, offset) + info + palette + body


def test_a_bmp_larger_than_its_image_can_fill_is_refused(tmp_path: Path) -> None:
    """A 1x1 run-length BMP of 5 million end-of-line escapes (Pillow's decoder of them is
    Python, a loop per escape)."""
    path = tmp_path / "escapes.bmp"
    path.write_bytes(bmp_rle8(1, 1, b"\x00\x00" * 5_000_000 + b"\x01\x05\x00\x01"))
    with pytest.raises(InputError, match=r"^corrupt BMP: over 65544 bytes for a 1x1 image"):
        decode.read_image(path)
    row = b"\x01\x05" * 300 + b"\x00\x00"  # one-pixel runs: the largest code of an image
    path.write_bytes(bmp_rle8(300, 200, row * 200 + b"\x00\x01"))
    np.testing.assert_array_equal(decode.read_image(path), np.full((200, 300), 5, np.uint8))


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_npy_of_each_version_numpy_writes_reads(tmp_path: Path, version) -> None:
    array = np.arange(12, dtype=np.uint16).reshape(3, 4)
    path = tmp_path / "a.npy"
    with open(path, "wb") as handle:
        np.lib.format.write_array(handle, array, version=version)
    np.testing.assert_array_equal(decode.read_image(path), array)


@pytest.mark.parametrize("version", [(1, 5), (2, 1), (4, 0), (255, 255), (0, 0)])
def test_npy_of_a_version_numpy_does_not_write_is_refused(tmp_path: Path, version) -> None:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.zeros((3, 4), np.uint8), version=(1, 0))
    data = bytearray(buffer.getvalue())
    data[6:8] = bytes(version)
    path = tmp_path / "a.npy"
    path.write_bytes(data)
    with pytest.raises(InputError, match=rf"^NPY format version {version[0]}\.{version[1]}: "):
        decode.read_image(path)


def test_library_messages_lose_python_object_reprs(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught, decoding("JPEG"):
        raise OSError("cannot identify image file <_io.BufferedReader name='/x/a.jpg'>")
    assert str(caught.value) == "corrupt or truncated JPEG: cannot identify image file"
    with pytest.raises(InputError) as caught, decoding("PNG"):
        raise ValueError("<object object at 0x7f00>")
    assert str(caught.value) == "corrupt or truncated PNG: ValueError"
    # a JPEG whose markers Pillow cannot follow (Pillow's message names a file object)
    buffer = io.BytesIO()
    Image.fromarray((np.arange(64 * 64).reshape(64, 64) % 7 * 30).astype(np.uint8)).save(
        buffer, "JPEG"
    )
    data = bytearray(buffer.getvalue())
    data[100:108] = b"\xff\xff\x00\x01\xfe\x00\xff\x13"
    path = tmp_path / "bad.jpg"
    path.write_bytes(data)
    with pytest.raises(InputError) as caught:
        decode.read_image(path)
    assert "<" not in str(caught.value) and "BufferedReader" not in str(caught.value)


def test_a_jpeg_of_more_bytes_than_its_image_needs_is_refused_unread(tmp_path: Path) -> None:
    """An 8x8 JPEG with 32 MiB of stray bytes (a hole) between its scan and its end: every
    byte would be read and passed over by the decoder. Its scans may take twice its samples
    plus 64 KiB."""
    buffer = io.BytesIO()
    Image.fromarray(picture((8, 8))).save(buffer, "JPEG")
    data = buffer.getvalue()
    path = tmp_path / "stray.jpg"
    with path.open("wb") as handle:
        handle.write(data[:-2])
        handle.seek(32 * 2**20, io.SEEK_CUR)
        handle.write(data[-2:])
    with pytest.raises(InputError, match=r"^JPEG of over 65664 bytes of scans for its image"):
        decode.read_image(path)
    path.write_bytes(data[:-2] + bytes(60_000) + data[-2:])  # within: reads as Pillow reads it
    np.testing.assert_array_equal(decode.read_image(path), pillow_pixels(data))
