"""The slowest decodes the input bounds allow, per format: the README's time bound per input.

    python3 benchmarks/bench_decode_bounds.py [--side 4096] [--repeat 3]

Each case is the worst file of its format that gccl still reads (README, Data safety), built
here at side x side gray pixels (side a multiple of 256), and a plain file of the same image
for comparison:

  JPEG, many scans         the last scan of a progressive file repeated up to the limits
                           (100 scans; twice the samples plus 64 KiB of bytes), of the
                           image and of a flat one (near-empty scans)
  TIFF, 256-sample strips  one-row strips of 256 pixels (the smallest beyond 4096 strips)
  TIFF, 16x16 tiles        the smallest tiles the TIFF specification allows
  PNG, empty data chunks   as many empty IDAT chunks as the pixel-data bound leaves room for
  BMP, one-pixel runs      a run-length code of one pixel per run (Pillow's decoder of run-length
                           BMPs is Python)
  WebP, lossless           the image as lossless RGB (the plain file: lossy)
  NPY                      the plain file (its values are read as they are)

Prints the median seconds of ccl_cli.io.decode.read_image and microseconds per pixel.
"""

from __future__ import annotations

import argparse
import io
import statistics
import struct
import tempfile
import time
import zlib
from pathlib import Path

import imagecodecs
import numpy as np
import tifffile
from PIL import Image

from ccl_cli.io.decode import read_image
from ccl_cli.io.decode.camera import MAX_JPEG_SCANS
from ccl_cli.io.decode.checks import COMPRESSED_SLACK

_MARKER_END = (0, *range(0xD0, 0xD8))
SOS = b"\xff\xda"


def _last_scan(data: bytes) -> tuple[int, int]:
    """(start, end) of the last scan of a JPEG stream: its SOS segment and entropy data."""
    position, found = 2, (0, 0)
    while data[position + 1] != 0xD9:
        length = int.from_bytes(data[position + 2 : position + 4], "big")
        end = position + 2 + length
        if data[position + 1] == 0xDA:
            while not (data[end] == 0xFF and data[end + 1] not in _MARKER_END):
                end += 1
            found = (position, end)
        position = end
    return found


def jpeg_files(image: np.ndarray) -> tuple[bytes, bytes]:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "JPEG", progressive=True, quality=90)
    data = buffer.getvalue()
    start, end = _last_scan(data)
    count = data.count(b"\xff\xda")  # (no thumbnail or comment here)
    most = COMPRESSED_SLACK * image.size + 2**16  # camera.py's bound on the scans' bytes
    first = data.index(SOS)
    repeats = min(MAX_JPEG_SCANS - count, (most - (len(data) - first)) // (end - start))
    return data, data[:end] + data[start:end] * repeats + data[end:]


def _tiff(image: np.ndarray, **options: object) -> bytes:
    buffer = io.BytesIO()
    tifffile.imwrite(buffer, image, compression="zlib", **options)
    return buffer.getvalue()


def png_files(image: np.ndarray) -> tuple[bytes, bytes]:
    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    height, width = image.shape
    rows = np.hstack([np.zeros((height, 1), np.uint8), image]).tobytes()
    pixels = zlib.compress(rows, 6)
    header = chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
    room = 2 * height * (width + 1) + 2**16 - 12 - len(pixels)  # png.py's bound
    plain = b"\x89PNG\r\n\x1a\n" + header + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    empty = chunk(b"IDAT", b"") * (room // 12)
    worst = plain[:-12] + empty + chunk(b"IEND", b"")
    return plain, worst


def bmp_files(image: np.ndarray) -> tuple[bytes, bytes]:
    height, width = image.shape
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "BMP")
    palette = b"".join(bytes((i, i, i, 0)) for i in range(256))
    rows = image[::-1]
    body = (
        b"".join(
            bytes(np.column_stack([np.ones(width, np.uint8), row]).ravel()) + b"\x00\x00"
            for row in rows
        )
        + b"\x00\x01"
    )
    offset = 14 + 40 + len(palette)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 8, 1, len(body), 2835, 2835, 256, 0)
    head = b"BM" + struct.pack("<IHHI", offset + len(body), 0, 0, offset)
    return buffer.getvalue(), head + info + palette + body


def webp_files(image: np.ndarray) -> tuple[bytes, bytes]:
    """Lossy and lossless WebP of the image as RGB (WebP holds colour only)."""
    rgb = np.repeat(image[..., None], 3, axis=2)
    return imagecodecs.webp_encode(rgb, level=90), imagecodecs.webp_encode(rgb, lossless=True)


def npy_file(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, image)
    return buffer.getvalue()


def seconds(path: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        read_image(path, color_to_gray="luma")
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    side = args.side
    rng = np.random.default_rng(0)
    image = (rng.integers(0, 40, (side, side)) + np.arange(side) % 200).astype(np.uint8)
    jpeg_plain, jpeg_worst = jpeg_files(image)
    flat_plain, flat_worst = jpeg_files(np.full_like(image, 90))
    png_plain, png_worst = png_files(image)
    bmp_plain, bmp_worst = bmp_files(image)
    strips = image.reshape(-1, 256)
    cases = [
        ("JPEG", f"{jpeg_worst.count(SOS)} scans", jpeg_plain, jpeg_worst, image.size),
        ("JPEG", f"{flat_worst.count(SOS)} scans, flat", flat_plain, flat_worst, image.size),
        ("TIFF", "256-sample strips", _tiff(image), _tiff(strips, rowsperstrip=1), strips.size),
        ("TIFF", "16x16 tiles", _tiff(image), _tiff(image, tile=(16, 16)), image.size),
        ("PNG", "empty data chunks", png_plain, png_worst, image.size),
        ("BMP", "one-pixel runs", bmp_plain, bmp_worst, image.size),
        ("WebP", "lossless", *webp_files(image), image.size),
        ("NPY", "(the plain file)", npy_file(image), npy_file(image), image.size),
    ]
    print(f"{side}x{side} gray, median of {args.repeat}")
    print("| format | worst file | plain file s | worst file s | worst us/pixel | worst MB |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as folder:
        for name, what, plain, worst, pixels in cases:
            times = []
            for label, data in (("plain", plain), ("worst", worst)):
                path = Path(folder) / f"{label}.{name.lower()}"
                path.write_bytes(data)
                times.append(seconds(path, args.repeat))
            per_pixel = times[1] / pixels * 1e6
            print(
                f"| {name} | {what} | {times[0]:.2f} | {times[1]:.2f} | {per_pixel:.2f} | "
                f"{len(worst) / 2**20:.1f} |"
            )


if __name__ == "__main__":
    main()
