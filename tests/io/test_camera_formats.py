"""JPEG, BMP and WebP inputs: generated here (Pillow, or byte by byte), read by gccl and
compared with OpenCV's decoders (libjpeg-turbo, OpenCV's BMP reader, libwebp), a
colour choice computed from the README's rule; found in folders, the other files of a
folder named in one line."""

from __future__ import annotations

import csv
import io
import struct
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from cli_helpers import TIMEOUT, gccl_process
from PIL import Image

from ccl_cli.errors import InputError
from ccl_cli.io import decode

RNG = np.random.default_rng(11)
#: A gray picture with structure at every scale (a ramp, noise, a bright disk).
GRAY = (RNG.integers(0, 50, (61, 83)) + np.linspace(0, 150, 83)).astype(np.uint8)
GRAY[20:40, 30:50] = 240
RGB = np.stack([GRAY, np.roll(GRAY, 7, axis=1), 255 - GRAY], axis=-1)
RGBA = np.dstack([RGB, GRAY[::-1]])


def reference(path: Path, choice: str | None) -> np.ndarray:
    """OpenCV's pixels of `path`, reduced to gray as --color-to-gray `choice` says (luma:
    ITU-R 601 weights 299, 587, 114 per mille, rounded half up)."""
    pixels = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert pixels is not None, path
    if pixels.ndim == 2:
        return pixels
    red, green, blue = (pixels[..., c].astype(np.int64) for c in (2, 1, 0))
    if choice == "luma":
        return ((299 * red + 587 * green + 114 * blue + 500) // 1000).astype(np.uint8)
    return {"red": red, "green": green, "blue": blue}[str(choice)].astype(np.uint8)


def save(path: Path, array: np.ndarray, **options: object) -> Path:
    Image.fromarray(array).save(path, **options)
    return path


CASES = {
    "gray.jpg": (GRAY, {"quality": 90}, None),
    "progressive.jpg": (GRAY, {"quality": 80, "progressive": True}, None),
    "colour 4:2:0.jpeg": (RGB, {"quality": 85}, "luma"),
    "colour 4:4:4.JPG": (RGB, {"quality": 95, "subsampling": 0}, "green"),
    "gray.bmp": (GRAY, {}, None),
    "colour.bmp": (RGB, {}, "red"),
    "alpha.bmp": (RGBA, {}, "blue"),
    "lossy.webp": (RGB, {"quality": 80}, "luma"),
    "lossless.webp": (RGB, {"lossless": True}, "red"),
    "alpha.webp": (RGBA, {"lossless": True}, "luma"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_camera_formats_read_as_opencv_decodes_them(tmp_path: Path, name: str) -> None:
    array, options, choice = CASES[name]
    path = save(tmp_path / name, array, **options)
    got = decode.read_image(path, color_to_gray=choice)
    assert got.dtype == np.uint8 and got.shape == array.shape[:2]
    np.testing.assert_array_equal(got, reference(path, choice))


def test_lossless_formats_keep_every_value(tmp_path: Path) -> None:
    bmp = save(tmp_path / "gray.bmp", GRAY)
    webp = save(tmp_path / "lossless.webp", RGB, lossless=True)
    np.testing.assert_array_equal(decode.read_image(bmp), GRAY)
    np.testing.assert_array_equal(decode.read_image(webp, color_to_gray="red"), GRAY)


def test_one_bit_bmp_reads_bool_with_ink_false(tmp_path: Path) -> None:
    ink = GRAY > 128
    path = save(tmp_path / "scan.bmp", ink)
    got = decode.read_image(path)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, reference(path, None) != 0)
    np.testing.assert_array_equal(got, ink)


def bmp_rle8(indices: np.ndarray, palette: np.ndarray) -> bytes:
    """An 8-bit run-length encoded BMP (bottom-up rows of (count, index) pairs), built
    from the format's description."""
    body = b""
    for row in indices[::-1]:
        start = 0
        while start < len(row):
            end = start
            while end < len(row) and row[end] == row[start] and end - start < 255:
                end += 1
            body += bytes([end - start, row[start]])
            start = end
        body += b"\0\0"  # end of line
    body += b"\0\1"  # end of bitmap
    colours = b"".join(bytes([b, g, r, 0]) for r, g, b in palette)
    height, width = indices.shape
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 8, 1, len(body), 0, 0, 256, 0)
    offset = 14 + len(info) + len(colours)
    return b"BM" + struct.pack("<IHHI", offset + len(body), 0, 0, offset) + info + colours + body


def test_run_length_encoded_palette_bmp(tmp_path: Path) -> None:
    indices = (GRAY // 32).astype(np.uint8)
    gray_palette = np.repeat((np.arange(256)[:, None] * 3 % 256).astype(np.uint8), 3, axis=1)
    path = tmp_path / "rle.bmp"
    path.write_bytes(bmp_rle8(indices, gray_palette))
    got = decode.read_image(path)
    np.testing.assert_array_equal(got, gray_palette[indices, 0])
    np.testing.assert_array_equal(got, cv2.imread(str(path), cv2.IMREAD_GRAYSCALE))


def one_line(path: Path, match: str, **options: object) -> None:
    with pytest.raises(InputError, match=match) as info:
        decode.read_image(path, **options)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_colour_without_a_choice_names_the_option(tmp_path: Path) -> None:
    for name in ("c.jpg", "c.bmp", "c.webp"):
        one_line(save(tmp_path / name, RGB), r"^RGB image; convert it with --color-to-gray ")


def test_animated_webp_is_3d(tmp_path: Path) -> None:
    frames = [Image.fromarray(np.full((6, 9, 3), v, np.uint8)) for v in (10, 200, 90)]
    path = tmp_path / "anim.webp"
    frames[0].save(path, save_all=True, append_images=frames[1:], lossless=True)
    one_line(path, r"^3-D image \(shape \(3, 6, 9\)\)", color_to_gray="luma")


def test_cmyk_and_12_bit_jpegs_are_refused_with_the_reason(tmp_path: Path) -> None:
    cmyk = tmp_path / "cmyk.jpg"
    Image.fromarray(RGB).convert("CMYK").save(cmyk)
    one_line(cmyk, r"^unsupported JPEG mode CMYK$", color_to_gray="luma")
    data = bytearray(save(tmp_path / "g.jpg", GRAY).read_bytes())
    sof = data.index(b"\xff\xc0")
    data[sof + 4] = 12  # the frame's sample precision
    (tmp_path / "twelve.jpg").write_bytes(data)
    one_line(tmp_path / "twelve.jpg", r"^12-bit JPEG is not read \(8-bit only\)$")


def test_truncated_and_corrupt_camera_files_fail_with_one_line(tmp_path: Path) -> None:
    for name in ("t.jpg", "t.bmp", "t.webp"):
        data = save(tmp_path / name, RGB).read_bytes()
        (tmp_path / name).write_bytes(data[: len(data) // 2])
        one_line(tmp_path / name, r"^corrupt or truncated (JPEG|BMP|WebP): ", color_to_gray="luma")
    (tmp_path / "head.jpg").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF")
    one_line(tmp_path / "head.jpg", r"^corrupt or truncated JPEG: no frame header$")


def test_format_comes_from_content(tmp_path: Path) -> None:
    path = save(tmp_path / "x.jpg", GRAY, format="BMP").rename(tmp_path / "really_a_bmp.png")
    np.testing.assert_array_equal(decode.read_image(path), GRAY)


# --- folders -------------------------------------------------------------------------


@pytest.mark.slow
def test_a_folder_of_camera_images_is_labeled_and_other_files_named(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    mask = (GRAY > 128).astype(np.uint8) * 255
    save(folder / "a.jpg", mask, quality=95)
    save(folder / "b.BMP", mask)
    save(folder / "c.webp", np.dstack([mask] * 3), lossless=True)
    for name in ("notes.txt", "d.gif", "e.heic", "f.cr2", "g.raw"):
        (folder / name).write_bytes(b"not read")
    (folder / ".hidden").write_bytes(b"")
    args = ["in", "--out", "out", "--color-to-gray", "red", "--threshold", "127"]
    result = subprocess.run(
        [sys.executable, "-m", "ccl_cli", "label", *args, "--device", "cpu"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if "passed over" in line] == [
        "gccl: passed over 5 file(s) that are not images gccl reads (.png .tif .tiff .jpg .jpeg "
        ".bmp .webp .npy): in/d.gif, in/e.heic, in/f.cr2 and 2 more"
    ]
    with open(tmp_path / "out" / "summary.csv", newline="") as handle:
        rows = {row["path"]: row for row in csv.DictReader(handle)}
    assert sorted(rows) == [f"in/{n}" for n in ("a.jpg", "b.BMP", "c.webp")]
    assert {row["status"] for row in rows.values()} == {"ok"}
    want = {row["components"] for row in rows.values()}
    assert len(want) == 1  # the same mask, whatever the format (JPEG thresholded)


@pytest.mark.slow
def test_a_folder_holding_only_a_jpeg_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    save(tmp_path / "in" / "scan.jpg", GRAY)
    result = gccl_process("in", "--out", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "scan.labels.png").exists()


def test_camera_suffixes_are_image_paths() -> None:
    for name in ("a.jpg", "b.JPEG", "c.bmp", "d.WebP"):
        assert decode.is_image_path(name) and not decode.may_hold_pages(name)
    assert decode.may_hold_pages("e.tif") and decode.may_hold_pages("f.unknown")
    assert not decode.is_image_path("g.gif")


def test_jpeg_frame_reader_stops_at_the_first_scan() -> None:
    from ccl_cli.io.decode.camera import jpeg_frame

    data = io.BytesIO()
    Image.fromarray(GRAY).save(data, "JPEG")
    frame = jpeg_frame(io.BytesIO(data.getvalue()))
    assert frame is not None and (frame.height, frame.width, frame.components) == (61, 83, 1)
