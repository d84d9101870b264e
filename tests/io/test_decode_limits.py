"""Decoding within bounds: what an input may allocate is bounded by --max-image-bytes
(times the documented working factor, plus the TIFF metadata allowance), checked before
each allocation; a TIFF's page directories are walked once per file; a long TIFF decode
polls its stop check between strips and tiles.

Attack files are built here, in tmp_path (tifffile writes the many-page ones; the
others are crafted byte by byte). Memory is measured in a fresh interpreter: its peak
resident size after the decode (VmHWM: ru_maxrss would include the parent's peak at the
fork), less the peak after reading small images first; bytes read are rchar, both from
Linux's /proc. Large paddings are holes in sparse files: reading them costs time, not
disk.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import imagecodecs
import numpy as np
import pytest
import tifffile
from PIL import Image

from ccl_cli.errors import InputError
from ccl_cli.io import decode
from ccl_cli.io.decode.checks import WORKING_FACTOR

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/io").exists(), reason="measures memory and reads through Linux's /proc"
)

#: A byte budget far below every attack's allocation (as `--max-image-bytes 1K`).
TINY = 1024
#: Megabytes a refused or bounded decode may add to the reader's peak memory.
BOUND_MB = 24
#: Bytes of padding in the attack files (holes: no disk used).
PADDING = 300 * 2**20

MEASURE = r"""
import json, resource, sys
from ccl_cli.errors import InputError
from ccl_cli.io import decode
from ccl_cli.io.decode.checks import WORKING_FACTOR
warms, path, kwargs = sys.argv[1].split(","), sys.argv[2], json.loads(sys.argv[3])
for warm in warms:  # the libraries loaded, their first allocations made
    decode.image_pages(warm)
    decode.read_image(warm, color_to_gray="red")
def status(name, path="/proc/self/status"):
    return int(next(l.split()[1] for l in open(path) if l.startswith(name)))
def peak(): return status("VmHWM:") // 1024  # this image's own peak, unlike ru_maxrss
def rchar(): return status("rchar:", "/proc/self/io")
# a guard for the machine: an unbounded decode fails here instead of taking its memory
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (status("VmSize:") * 1024 + 2 * 2**30, hard))
before, read_before = peak(), rchar()
result = {}
try:
    pages = decode.image_pages(path)
    result["pages"] = pages
    for page in (range(pages) if kwargs.pop("every_page", False) else [kwargs.pop("page", None)]):
        array = decode.read_image(path, page=page, **kwargs)
    result["shape"], result["sum"] = list(array.shape), int(array.sum())
except InputError as error:
    result["error"] = str(error)
except MemoryError:
    result["error"] = "MemoryError"
result["added_mb"], result["read_bytes"] = peak() - before, rchar() - read_before
print(json.dumps(result))
"""


def measured(path: Path, tmp_path: Path, **kwargs: object) -> dict:
    """Read `path` in a fresh interpreter, after a small image of each format: the outcome,
    the peak memory added (MB) and the bytes read (rchar) by image_pages and the read
    (of every page with every_page)."""
    small = np.zeros((8, 8), np.uint8)
    warm = [tmp_path / f"warm.{suffix}" for suffix in ("png", "tif", "npy", "jpg", "bmp")]
    Image.fromarray(small).save(warm[0])
    tifffile.imwrite(warm[1], small, compression="zlib")
    np.save(warm[2], small)
    Image.fromarray(small).save(warm[3])
    Image.fromarray(small).save(warm[4])
    warm.append(tmp_path / "warm.webp")
    warm[-1].write_bytes(webp_bytes(np.zeros((8, 8, 3), np.uint8)))
    environment = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, ",".join(map(str, warm)), str(path), json.dumps(kwargs)],
        capture_output=True,
        text=True,
        timeout=600,
        env=environment,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# --- crafted files -----------------------------------------------------------------


def padded(path: Path, data: bytes, total: int) -> Path:
    """`data`, then zeros up to `total` bytes as a hole."""
    with path.open("wb") as file:
        file.write(data)
        file.truncate(total)
    return path


class Tiff:
    """A little-endian classic TIFF built by hand: blobs, then page directories."""

    SHORT, LONG = 3, 4

    def __init__(self) -> None:
        self.data = bytearray(b"II*\0\0\0\0\0")
        self.directories: list[int] = []

    def blob(self, data: bytes) -> int:
        if len(self.data) % 2:
            self.data += b"\0"
        offset = len(self.data)
        self.data += data
        return offset

    def page(self, tags: dict[int, tuple[int, int, int]]) -> None:
        """A page directory of {tag: (type, count, value or offset)}."""
        body = struct.pack("<H", len(tags))
        for code in sorted(tags):
            kind, count, value = tags[code]
            body += struct.pack("<HHII", code, kind, count, value)
        self.directories.append(self.blob(body + b"\0\0\0\0"))

    def save(self, path: Path, total: int = 0) -> Path:
        data = bytearray(self.data)
        links = [*self.directories, 0]
        struct.pack_into("<I", data, 4, links[0])
        for here, following in itertools.pairwise(links):
            count = struct.unpack_from("<H", data, here)[0]
            struct.pack_into("<I", data, here + 2 + 12 * count, following)
        return padded(path, bytes(data), max(total, len(data)))


def image_tags(
    width: int, height: int, bits: int = 8, compression: int = 1
) -> dict[int, tuple[int, int, int]]:
    s, n = Tiff.SHORT, Tiff.LONG
    return {
        256: (n, 1, width),
        257: (n, 1, height),
        258: (s, 1, bits),
        259: (s, 1, compression),
        262: (s, 1, 1),  # MinIsBlack
        277: (s, 1, 1),
    }


def tiled(
    width: int, height: int, tile: int, data: bytes, bits: int = 8, compression: int = 1
) -> Tiff:
    """One page of one tile of `tile` x `tile` holding `data`."""
    tiff = Tiff()
    start = tiff.blob(data)
    tags = image_tags(width, height, bits, compression)
    tags |= {322: (Tiff.LONG, 1, tile), 323: (Tiff.LONG, 1, tile)}
    tags |= {324: (Tiff.LONG, 1, start), 325: (Tiff.LONG, 1, len(data))}
    tiff.page(tags)
    return tiff


# --- memory bounded by --max-image-bytes ------------------------------------------


@pytest.mark.slow
def test_tiff_tile_larger_than_its_image_is_refused_before_decoding(tmp_path: Path) -> None:
    """A 1x1 deflate TIFF whose one tile is 8192^2 32-bit samples (256 MB decoded)."""
    stream = zlib.compress(bytes(8192 * 8192 * 4), 1)
    path = tiled(1, 1, 8192, stream, bits=32, compression=8).save(tmp_path / "tile.tif")
    result = measured(path, tmp_path, max_bytes=TINY)
    assert result["error"].startswith("one tile decoded would take 268435456 bytes")
    assert result["added_mb"] < BOUND_MB


@pytest.mark.slow
def test_jpeg_in_tiff_larger_than_its_tile_is_refused_before_decoding(tmp_path: Path) -> None:
    """A 1024x1024 TIFF whose one JPEG tile declares 12000x12000 pixels (144 MB decoded,
    1.7 MB compressed)."""
    jpeg = imagecodecs.jpeg8_encode(np.zeros((12000, 12000), np.uint8), level=10)
    path = tiled(1024, 1024, 1024, jpeg, compression=7).save(tmp_path / "jpeg.tif")
    result = measured(path, tmp_path)  # the default budget: the frame alone is refused
    assert result["error"] == (
        "corrupt TIFF: a JPEG tile of 12000x12000 with 1 components in a tile of 1024x1024"
    )
    assert result["added_mb"] < BOUND_MB


def test_jpeg_in_tiff_reads_as_pillow_reads_it(tmp_path: Path) -> None:
    """Tiled and stripped JPEG TIFFs, gray and RGB: the pixels libtiff (Pillow) gives."""
    rng = np.random.default_rng(5)
    gray = (rng.integers(0, 40, (70, 90)) + np.arange(90) * 2).astype(np.uint8)
    rgb = np.stack([gray, gray[::-1], 255 - gray], axis=-1)
    for name, array, options in [
        ("tiles.tif", gray, {"tile": (32, 32)}),
        ("strips.tif", gray, {"rowsperstrip": 16}),
        ("rgb.tif", rgb, {"tile": (16, 16), "photometric": "rgb"}),
    ]:
        path = tmp_path / name
        tifffile.imwrite(path, array, compression="jpeg", **options)
        with Image.open(path) as image:
            want = np.asarray(image.convert("L" if array.ndim == 2 else "RGB"))
        got = decode.read_image(path, color_to_gray=None if array.ndim == 2 else "red")
        np.testing.assert_array_equal(got, want if array.ndim == 2 else want[..., 0])


def shared_tables(path: Path, pages: int, entries: int) -> Path:
    """`pages` 1x1 pages whose tile tables list `entries` tiles, all in one shared table."""
    tiff = Tiff()
    pixel = tiff.blob(b"\x07" * 256)
    table = tiff.blob(struct.pack("<I", pixel) * entries)
    counts = tiff.blob(struct.pack("<I", 256) * entries)
    for _ in range(pages):
        tags = image_tags(1, 1) | {322: (Tiff.LONG, 1, 16), 323: (Tiff.LONG, 1, 16)}
        tags |= {324: (Tiff.LONG, entries, table), 325: (Tiff.LONG, entries, counts)}
        tiff.page(tags)
    return tiff.save(path)


@pytest.mark.slow
def test_tiff_pages_sharing_huge_tables_are_counted_without_loading_them(tmp_path: Path) -> None:
    """8 pages, each listing 2**20 tiles in tables they share (8 MB on disk, about 72 MB
    each once loaded): counting the pages loads none, a small budget refuses a page
    before loading its tables, and the default budget reads one page's alone."""
    path = shared_tables(tmp_path / "tables.tif", pages=8, entries=2**20)
    counted = measured(path, tmp_path, page=3, max_bytes=TINY)
    assert counted["pages"] == 8
    assert counted["error"].startswith("its strip and tile tables would take 83886080 bytes")
    assert counted["added_mb"] < BOUND_MB
    read = measured(path, tmp_path, page=3)
    assert read["shape"] == [1, 1] and read["sum"] == 7
    assert read["added_mb"] < 2 * 83886080 / 2**20  # one page's tables, not eight


def one_pixel_png(*chunks: bytes) -> bytes:
    """A 1x1 8-bit gray PNG of value 7, with `chunks` between the header and the pixels."""
    header = png_chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    pixels = png_chunk(b"IDAT", zlib.compress(b"\x00\x07"))
    return b"\x89PNG\r\n\x1a\n" + header + b"".join(chunks) + pixels + png_chunk(b"IEND", b"")


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


@pytest.mark.slow
def test_png_padded_after_its_end_reads_without_reading_the_padding(tmp_path: Path) -> None:
    path = padded(tmp_path / "tail.png", one_pixel_png(), PADDING)
    result = measured(path, tmp_path, max_bytes=TINY)
    assert result["shape"] == [1, 1] and result["sum"] == 7
    assert result["added_mb"] < BOUND_MB and result["read_bytes"] < 2**20


def test_png_with_a_huge_ancillary_chunk_passes_over_it_unread(tmp_path: Path) -> None:
    """A private chunk ('prVt') of 300 MB before the pixels: skipped, never read."""
    head = one_pixel_png()
    start = head.index(b"IDAT") - 4
    private = struct.pack(">I", PADDING) + b"prVt"
    path = tmp_path / "chunk.png"
    with path.open("wb") as file:
        file.write(head[:start] + private)
        file.seek(start + 8 + PADDING + 4)  # the chunk's data (a hole) and its CRC
        file.write(head[start:])
    result = measured(path, tmp_path, max_bytes=TINY)
    assert result["shape"] == [1, 1] and result["sum"] == 7
    assert result["added_mb"] < BOUND_MB and result["read_bytes"] < 2**20


def test_png_pixel_data_beyond_what_the_image_needs_is_refused_unread(tmp_path: Path) -> None:
    """A 1x1 PNG whose pixel data chunk holds 300 MB after its deflate stream."""
    data = one_pixel_png()
    start = data.index(b"IDAT") - 4
    stream = zlib.compress(b"\x00\x07")
    path = tmp_path / "idat.png"
    with path.open("wb") as file:
        file.write(data[:start] + struct.pack(">I", PADDING) + b"IDAT" + stream)
        file.truncate(start + 8 + PADDING)
        file.seek(0, os.SEEK_END)
        file.write(b"\0\0\0\0" + png_chunk(b"IEND", b""))
    result = measured(path, tmp_path)
    assert result["error"] == "corrupt PNG: over 65540 bytes of pixel data for 1 rows of 1 bytes"
    assert result["added_mb"] < BOUND_MB and result["read_bytes"] < 2**20


def test_tiff_strip_of_300_mb_is_refused_before_reading_it(tmp_path: Path) -> None:
    """A 1x1 deflate TIFF whose one strip claims 300 MB (a hole)."""
    tiff = Tiff()
    tags = image_tags(1, 1, compression=8) | {273: (Tiff.LONG, 1, 4096)}
    tags |= {279: (Tiff.LONG, 1, PADDING), 278: (Tiff.LONG, 1, 1)}
    tiff.page(tags)
    path = tiff.save(tmp_path / "strip.tif", total=4096 + PADDING)
    result = measured(path, tmp_path)  # whatever the budget
    assert result["error"] == f"corrupt TIFF: a strip of {PADDING} bytes for 1 bytes of samples"
    assert result["added_mb"] < BOUND_MB and result["read_bytes"] < 2**20


def test_npy_with_a_negative_dimension_is_refused_before_reading(tmp_path: Path) -> None:
    """An NPY header of shape (-1, 1) before 300 MB (a hole): numpy would read it all."""
    header = "{'descr': '|u1', 'fortran_order': False, 'shape': (-1, 1), }"
    header += " " * (63 - len(header) % 64) + "\n"
    data = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()
    path = padded(tmp_path / "negative.npy", data, PADDING)
    result = measured(path, tmp_path, max_bytes=TINY)
    assert result["error"] == "corrupt NPY: shape (-1, 1)"
    assert result["added_mb"] < BOUND_MB and result["read_bytes"] < 2**20


def test_npy_shorter_than_its_header_says_is_refused_before_reading(tmp_path: Path) -> None:
    header = "{'descr': '<u2', 'fortran_order': False, 'shape': (4000, 4000), }"
    header += " " * (63 - len(header) % 64) + "\n"
    data = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()
    path = padded(tmp_path / "short.npy", data, len(data) + 1000)
    with pytest.raises(InputError, match=r"^corrupt or truncated NPY: 500 of 16000000 values"):
        decode.read_image(path)


def noise_files(folder: Path) -> dict[str, tuple[Path, int, str | None]]:
    """Incompressible images (the largest compressed data) for each format and path of
    the decoders: their decoded sizes and the --color-to-gray they need."""
    rng = np.random.default_rng(3)
    wide = rng.integers(0, 2**16, (2000, 2000), dtype=np.uint16)
    narrow, bits = wide.astype(np.uint8), wide > 2**15
    colour = rng.integers(0, 256, (1000, 1000, 3), dtype=np.uint8)
    (folder / "wide.png").write_bytes(imagecodecs.png_encode(wide))
    (folder / "colour.png").write_bytes(imagecodecs.png_encode(colour))
    Image.fromarray(bits).save(folder / "bits.png")
    Image.fromarray(colour).save(folder / "colour.jpg", quality=95)
    Image.fromarray(colour).save(folder / "colour.webp", lossless=True)
    np.save(folder / "wide.npy", wide)
    files: dict[str, tuple[Path, int, str | None]] = {
        "png 16-bit (fast path)": (folder / "wide.png", wide.nbytes, None),
        "png 1-bit (Pillow)": (folder / "bits.png", bits.nbytes, None),
        "png RGB (Pillow), luma": (folder / "colour.png", colour.nbytes, "luma"),
        "jpeg RGB, luma": (folder / "colour.jpg", colour.nbytes, "luma"),
        "webp RGB, luma": (folder / "colour.webp", colour.nbytes * 4 // 3, "luma"),
        "npy": (folder / "wide.npy", wide.nbytes, None),
    }
    for name, array, options in [
        ("tiff deflate, one strip", wide, {"compression": "zlib", "rowsperstrip": 2000}),
        ("tiff lzw tiles, predictor", wide, {"compression": "lzw", "tile": (256, 256)}),
        ("tiff uncompressed", wide, {}),
        ("tiff jpeg tiles", narrow, {"compression": "jpeg", "tile": (256, 256)}),
    ]:
        path = folder / f"{len(files)}.tif"
        tifffile.imwrite(path, array, **options)
        files[name] = (path, array.nbytes, None)
    return files


@pytest.mark.slow
def test_decodes_at_the_limit_stay_within_the_working_factor(tmp_path: Path) -> None:
    """Every decoder path, on noise, at --max-image-bytes equal to the image's size (a
    WebP decodes to RGBA): the memory a decode adds is at most WORKING_FACTOR times it."""
    for name, (path, size, choice) in noise_files(tmp_path).items():
        result = measured(path, tmp_path, max_bytes=size, color_to_gray=choice)
        assert "error" not in result, (name, result)
        assert result["added_mb"] <= WORKING_FACTOR * size / 2**20 + 4, (name, result)


def jpeg_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, "JPEG")
    return buffer.getvalue()


@pytest.mark.slow
def test_jpeg_declaring_a_large_frame_is_refused_before_decoding(tmp_path: Path) -> None:
    data = bytearray(jpeg_bytes(np.zeros((8, 8), np.uint8)))
    sof = data.index(b"\xff\xc0")
    struct.pack_into(">HH", data, sof + 5, 40000, 40000)  # height, width: 1.6 GB
    path = tmp_path / "frame.jpg"
    path.write_bytes(data)
    result = measured(path, tmp_path, max_bytes=TINY)
    assert result["error"].startswith("image too large (40000x40000, 1 sample(s)")
    assert result["added_mb"] < BOUND_MB


@pytest.mark.slow
def test_jpeg_with_huge_metadata_is_refused_without_reading_it(tmp_path: Path) -> None:
    """600 comment segments of 64 KB (39 MB, holes) before the frame."""
    data = jpeg_bytes(np.zeros((8, 8), np.uint8))
    segment = 65535
    path = tmp_path / "metadata.jpg"
    with path.open("wb") as file:
        file.write(data[:2])
        for _ in range(600):
            file.write(b"\xff\xfe" + struct.pack(">H", segment))
            file.seek(segment - 2, os.SEEK_CUR)
        file.write(data[2:])
    result = measured(path, tmp_path)
    assert result["error"] == "JPEG with over 16777216 bytes of metadata"
    assert result["added_mb"] < BOUND_MB and result["read_bytes"] < 4 * 2**20


def webp_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, "WEBP", lossless=True)
    return buffer.getvalue()


@pytest.mark.slow
def test_webp_padded_after_its_container_reads_without_the_padding(tmp_path: Path) -> None:
    """Pillow reads a WebP file whole: it is handed the RIFF container alone."""
    path = padded(tmp_path / "tail.webp", webp_bytes(np.full((4, 4, 3), 7, np.uint8)), PADDING)
    result = measured(path, tmp_path, color_to_gray="red")
    assert result["shape"] == [4, 4] and result["sum"] == 16 * 7
    assert result["added_mb"] < BOUND_MB and result["read_bytes"] < 2**20


def test_webp_container_larger_than_its_image_needs_is_refused_unread(tmp_path: Path) -> None:
    data = bytearray(webp_bytes(np.full((4, 4, 3), 7, np.uint8)))
    struct.pack_into("<I", data, 4, PADDING)  # the RIFF size
    path = padded(tmp_path / "riff.webp", bytes(data), PADDING + 8)
    result = measured(path, tmp_path, color_to_gray="red")
    assert result["error"] == f"corrupt WebP: {PADDING + 8} bytes for a 4x4 image"
    assert result["added_mb"] < BOUND_MB and result["read_bytes"] < 2**20


@pytest.mark.slow
def test_bmp_declaring_a_large_image_is_refused_before_decoding(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(buffer, "BMP")
    data = bytearray(buffer.getvalue())
    struct.pack_into("<ii", data, 18, 20000, 20000)
    path = padded(tmp_path / "large.bmp", bytes(data), 20000 * 20000 + 2000)
    result = measured(path, tmp_path, max_bytes=TINY)
    assert result["error"].startswith("image too large (20000x20000, 1 sample(s)")
    assert result["added_mb"] < BOUND_MB and result["read_bytes"] < 2**20


# --- page directories walked once ----------------------------------------------------


@pytest.mark.slow
def test_every_page_of_a_1000_page_tiff_reads_in_linear_time(tmp_path: Path) -> None:
    """Counting the pages of a 1000-page 8x8 TIFF and reading each one reads a few small
    blocks per page, not the chain of directories again for each (bytes read, from
    /proc/self/io)."""
    stack = (np.arange(1000 * 64) % 251).astype(np.uint8).reshape(1000, 8, 8)
    path = tmp_path / "pages.tif"
    tifffile.imwrite(path, stack, metadata=None)
    result = measured(path, tmp_path, every_page=True)
    assert result["pages"] == 1000 and result["shape"] == [8, 8]
    assert result["sum"] == int(stack[-1].sum())
    assert result["read_bytes"] < 1000 * 16 * 2**10


def reduced_pages(path: Path, entries: int) -> Path:
    """One 1x1 page of value 5, then 999 pages marked reduced (thumbnails), each listing
    `entries` tiles in tables they share."""
    tiff = Tiff()
    pixel = tiff.blob(b"\x05" * 256)
    table = tiff.blob(struct.pack("<I", pixel) * entries)
    counts = tiff.blob(struct.pack("<I", 256) * entries)
    tiff.page(image_tags(1, 1) | {273: (Tiff.LONG, 1, pixel), 279: (Tiff.LONG, 1, 1)})
    for _ in range(999):
        tags = image_tags(1, 1) | {254: (Tiff.LONG, 1, 1)}
        tags |= {322: (Tiff.LONG, 1, 16), 323: (Tiff.LONG, 1, 16)}
        tags |= {324: (Tiff.LONG, entries, table), 325: (Tiff.LONG, entries, counts)}
        tiff.page(tags)
    return tiff.save(path)


def test_reduced_pages_are_walked_not_loaded(tmp_path: Path) -> None:
    """The walk that finds the one full page among 1000 reads their directories only."""
    path = reduced_pages(tmp_path / "reduced.tif", 2**16)
    result = measured(path, tmp_path)
    assert result["pages"] == 1 and result["shape"] == [1, 1] and result["sum"] == 5
    assert result["read_bytes"] < 4 * 2**20  # the file is 512 KiB; one walk, one page


@pytest.mark.slow
def test_a_stream_line_naming_a_tiff_of_1000_heavy_pages_is_labeled_at_once(
    tmp_path: Path,
) -> None:
    """`gccl label -` given a TIFF of 999 reduced pages that list 2**22 tiles each: the
    row comes while the stream is open (the walk loads no table)."""
    reduced_pages(tmp_path / "heavy.tif", 2**22)
    run = subprocess.Popen(
        [sys.executable, "-m", "ccl_cli", "label", "-", "--out", "out", "--json", "--quiet"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert run.stdin is not None and run.stdout is not None
        run.stdin.write("heavy.tif\n")
        run.stdin.flush()
        arrived, _, _ = select.select([run.stdout], [], [], 60)
        assert arrived, "no row within 60 s"
        row = json.loads(run.stdout.readline())
        _, stderr = run.communicate(timeout=30)  # the end of the stream
    finally:
        run.kill()
    assert row["status"] == "ok" and row["components"] == 1, row
    assert run.returncode == 0, stderr


# --- stop checks ---------------------------------------------------------------------


class Stopped(Exception):
    pass


def test_a_tiff_decode_checks_for_a_stop_between_tiles(tmp_path: Path) -> None:
    """check_stop runs before each of 64 tiles; what it raises ends the decode as is."""
    path = tmp_path / "tiles.tif"
    tifffile.imwrite(path, np.ones((128, 128), np.uint8), tile=(16, 16), compression="zlib")
    calls = []

    def check_stop() -> None:
        calls.append(1)
        if len(calls) >= 10:
            raise Stopped

    with pytest.raises(Stopped):
        decode.read_image(path, check_stop=check_stop)
    assert 10 <= len(calls) < 64
    calls.clear()
    assert decode.read_image(path, check_stop=lambda: calls.append(1)).sum() == 128 * 128
    assert len(calls) >= 64


def test_a_stop_during_a_library_failure_is_the_stop(tmp_path: Path) -> None:
    """A library that fails after a stop request (a signal handler raised inside it)
    ends the decode with the stop, not as a corrupt input."""
    path = tmp_path / "bad.tif"
    tifffile.imwrite(path, np.ones((64, 64), np.uint8), tile=(16, 16), compression="zlib")
    data = bytearray(path.read_bytes())
    tile = tifffile.TiffFile(path).pages.first.dataoffsets[2]
    data[tile : tile + 8] = b"\xff" * 8  # tile 2's stream is now corrupt
    path.write_bytes(data)
    with pytest.raises(InputError, match=r"^corrupt or truncated TIFF"):
        decode.read_image(path)
    stop_requested = []

    def check_stop() -> None:
        if stop_requested:
            raise Stopped

    def failing_then_stopped() -> None:
        # the stop request arrives while tile 2 decodes (after the check before it)
        check_stop()
        if len(calls) == 2:
            stop_requested.append(1)
        calls.append(1)

    calls: list[int] = []
    with pytest.raises(Stopped):
        decode.read_image(path, check_stop=failing_then_stopped)


#: Runs gccl, touching a ready file as the decode starts: argv = ready, gccl's arguments.
READY_AT_DECODE = """
import sys
from ccl_cli.io import decode
from ccl_cli.io.decode.checks import WORKING_FACTOR
real, ready = decode.read_image, sys.argv[1]
def read_image(*args, **kwargs):
    open(ready, "w").close()
    return real(*args, **kwargs)
decode.read_image = read_image
sys.argv = ["gccl", *sys.argv[2:]]
from ccl_cli.cli import main
main()
"""


@pytest.mark.slow
def test_sigterm_during_a_long_tiff_decode_stops_the_run(tmp_path: Path) -> None:
    """A 16384^2 TIFF of 2**20 16x16 tiles (all holding one shared deflate stream) takes
    far longer to decode than the run may take to stop: SIGTERM ends the decode between
    tiles, and the input is not-run (not failed)."""
    tiff = Tiff()
    stream = tiff.blob(zlib.compress(bytes(256)))
    tiles = 2**20
    table = tiff.blob(struct.pack("<I", stream) * tiles)
    counts = tiff.blob(struct.pack("<I", len(zlib.compress(bytes(256)))) * tiles)
    tags = image_tags(16384, 16384, compression=8)
    tags |= {322: (Tiff.LONG, 1, 16), 323: (Tiff.LONG, 1, 16)}
    tags |= {324: (Tiff.LONG, tiles, table), 325: (Tiff.LONG, tiles, counts)}
    tiff.page(tags)
    tiff.save(tmp_path / "long.tif")
    ready = tmp_path / "ready"
    args = ["label", "long.tif", "--out", "out", "--quiet", "--device", "cpu"]
    run = subprocess.Popen(
        [sys.executable, "-c", READY_AT_DECODE, str(ready), *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(3000):
            if ready.exists() or run.poll() is not None:
                break
            threading.Event().wait(0.02)
        threading.Event().wait(0.5)  # well inside the tiles
        run.terminate()
        _, stderr = run.communicate(timeout=30)
    finally:
        run.kill()
    assert run.returncode == -signal.SIGTERM, stderr  # ended by the signal, once stopped
    with open(tmp_path / "out" / "summary.csv", newline="") as handle:
        (row,) = csv.DictReader(handle)
    assert row["status"] == "not-run", row
