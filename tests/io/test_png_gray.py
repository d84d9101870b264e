"""Gray PNGs (io/decode/png.py): every filter type, chunking and ancillary chunk decodes to
the samples encoded; a broken file is one line.

PNGs are built here from the specification: each row filtered by the filter type
drawn for it, the stream split into IDAT chunks of drawn sizes. The arrays encoded are
the reference.
"""

from __future__ import annotations

import io
import itertools
import struct
import tempfile
import zlib
from pathlib import Path

import cv2
import imagecodecs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from PIL import Image

from ccl_cli.errors import InputError
from ccl_cli.io import decode


def read(data: bytes) -> np.ndarray:
    """`data` decoded as gccl reads a file."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "image.png"
        path.write_bytes(data)
        return decode.read_image(path)


def chunk(kind: bytes, data: bytes, crc: int | None = None) -> bytes:
    body = kind + data
    return (
        struct.pack(">I", len(data))
        + body
        + struct.pack(">I", zlib.crc32(body) if crc is None else crc)
    )


def paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def filtered_rows(samples: np.ndarray, filters: list[int]) -> bytes:
    """The filtered scanlines of big-endian samples (the specification's forward filters)."""
    rows = np.ascontiguousarray(samples, samples.dtype.newbyteorder(">"))
    raw = rows.view(np.uint8).reshape(len(rows), -1).astype(int)
    bpp = samples.dtype.itemsize
    out = bytearray()
    for y, kind in enumerate(filters):
        line = raw[y]
        prior = raw[y - 1] if y else np.zeros_like(line)
        out.append(kind)
        for x, value in enumerate(line):
            a = line[x - bpp] if x >= bpp else 0
            b = prior[x]
            c = prior[x - bpp] if x >= bpp else 0
            predicted = [0, a, b, (a + b) // 2, paeth(a, b, c)][kind]
            out.append((value - predicted) % 256)
    return bytes(out)


def gray_png(
    samples: np.ndarray,
    filters: list[int],
    pieces: int = 1,
    level: int = 6,
    extra: bytes = b"",
    interlace: int = 0,
) -> bytes:
    """A gray PNG of `samples` (uint8 or uint16) built by hand; `extra` chunks before IDAT."""
    height, width = samples.shape
    depth = 8 * samples.dtype.itemsize
    header = struct.pack(">IIBBBBB", width, height, depth, 0, 0, 0, interlace)
    stream = zlib.compress(filtered_rows(samples, filters), level)
    cuts = np.linspace(0, len(stream), pieces + 1).astype(int)
    idat = b"".join(chunk(b"IDAT", stream[lo:hi]) for lo, hi in itertools.pairwise(cuts))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + extra + idat + chunk(b"IEND", b"")


@st.composite
def gray_images(draw: st.DrawFn) -> tuple[np.ndarray, list[int], int, int]:
    dtype = draw(st.sampled_from([np.uint8, np.uint16]))
    shape = (draw(st.integers(1, 24)), draw(st.integers(1, 24)))
    samples = draw(hnp.arrays(dtype, shape, elements=st.integers(0, np.iinfo(dtype).max)))
    filters = draw(st.lists(st.integers(0, 4), min_size=shape[0], max_size=shape[0]))
    return samples, filters, draw(st.integers(1, 4)), draw(st.integers(0, 9))


@pytest.mark.slow
@settings(max_examples=300)
@given(gray_images())
def test_every_filter_and_chunking_decodes_to_the_samples(case: tuple) -> None:
    samples, filters, pieces, level = case
    data = gray_png(samples, filters, pieces, level, extra=chunk(b"tEXt", b"a\0b"))
    got = read(data)
    assert got.dtype == samples.dtype and got.dtype.isnative
    np.testing.assert_array_equal(got, samples)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_files_of_common_encoders_decode_to_the_samples(dtype: type) -> None:
    rng = np.random.default_rng(1)
    smooth = np.cumsum(rng.integers(0, 3, (37, 53)), axis=1)
    values = (smooth * 97 % (np.iinfo(dtype).max + 1)).astype(dtype)
    buffer = io.BytesIO()
    Image.fromarray(values).save(buffer, format="PNG")
    files = [
        cv2.imencode(".png", values)[1].tobytes(),
        cv2.imencode(".png", values, [cv2.IMWRITE_PNG_COMPRESSION, 9])[1].tobytes(),
        imagecodecs.png_encode(values),
        buffer.getvalue(),
    ]
    for data in files:
        np.testing.assert_array_equal(read(data), values)


ANCILLARY = {
    b"sBIT": b"\x0c",
    b"bKGD": b"\x00\x05",
    b"gAMA": b"\x00\x00\xb1\x8f",
    b"sRGB": b"\x00",
    b"pHYs": b"\x00\x00\x00\x01\x00\x00\x00\x01\x01",
    b"tIME": b"\x07\xe9\x01\x01\x00\x00\x00",
    b"tEXt": b"Software\x00x",
}


@pytest.mark.parametrize("kind", ANCILLARY, ids=bytes.decode)
def test_ancillary_chunks_change_nothing_in_the_pixels(kind: bytes) -> None:
    values = np.arange(60, dtype=np.uint16).reshape(6, 10) * 1000 + 7
    data = gray_png(values, [0, 1, 2, 3, 4, 2], extra=chunk(kind, ANCILLARY[kind]))
    np.testing.assert_array_equal(read(data), values)


VALUES = np.arange(60, dtype=np.uint16).reshape(6, 10) * 1000
GOOD = gray_png(VALUES, [0, 1, 2, 3, 4, 4], pieces=2)


def idat_crc_broken(data: bytes) -> bytes:
    at = data.index(b"IDAT")
    (length,) = struct.unpack(">I", data[at - 4 : at])
    crc_at = at + 4 + length
    return data[:crc_at] + bytes([data[crc_at] ^ 1]) + data[crc_at + 1 :]


def stream_flipped(data: bytes) -> bytes:
    """One byte of the pixel stream changed, its chunk's CRC made to match."""
    at = data.index(b"IDAT")
    (length,) = struct.unpack(">I", data[at - 4 : at])
    body = bytearray(data[at : at + 4 + length])
    body[10] ^= 0x40
    return data[: at - 4] + chunk(bytes(body[:4]), bytes(body[4:])) + data[at + 4 + length + 4 :]


def assembled(samples: np.ndarray, rows: bytes, between: bytes | None = None) -> bytes:
    """A gray PNG of `samples`' shape whose pixel stream holds `rows` (filtered
    scanlines) in two IDAT chunks, `between` them if given."""
    height, width = samples.shape
    header = struct.pack(">IIBBBBB", width, height, 8 * samples.dtype.itemsize, 0, 0, 0, 0)
    stream = zlib.compress(rows)
    half = len(stream) // 2
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", stream[:half])
        + (between or b"")
        + chunk(b"IDAT", stream[half:])
        + chunk(b"IEND", b"")
    )


def bad_filter_type() -> bytes:
    rows = bytearray(filtered_rows(VALUES, [0] * 6))
    rows[3 * 21] = 5  # row 3's filter type (rows of 1 + 10 * 2 bytes)
    return assembled(VALUES, bytes(rows))


BROKEN = {
    "IDAT CRC": idat_crc_broken(GOOD),
    "stream corrupt": stream_flipped(GOOD),
    "cut in IDAT": GOOD[: len(GOOD) // 2],
    "filter type 5": bad_filter_type(),
}


@pytest.mark.parametrize("name", BROKEN)
def test_a_broken_file_is_one_line(tmp_path: Path, name: str) -> None:
    np.testing.assert_array_equal(read(GOOD), VALUES)
    path = tmp_path / "broken.png"
    path.write_bytes(BROKEN[name])
    with pytest.raises(InputError, match="corrupt or truncated PNG") as error:
        decode.read_image(path)
    assert "\n" not in str(error.value)
