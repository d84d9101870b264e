"""ccl_cli.io.decode: every input format read as displayed intensity, every bad input
as one InputError line.

Files are generated in tmp_path with Pillow, tifffile, imagecodecs and numpy (or
taken from scikit-image's bundled data), never from ../shared.
"""

from __future__ import annotations

import hashlib
import io
import os
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import imagecodecs
import numpy as np
import pytest
import tifffile
from PIL import Image

from ccl_cli.contract.params import SUPPORTED_DTYPES
from ccl_cli.errors import InputError
from ccl_cli.io import decode
from ccl_cli.io.decode.checks import MAX_PIXELS
from ccl_cli.options import COLOR_TO_GRAY_CHOICES

REPO = Path(__file__).resolve().parents[2]

# Pixels whose ITU-R 601 luma was worked out by hand: (299 R + 587 G + 114 B + 500) // 1000.
# (1, 13, 5) weighs exactly 8.5: rounding half up gives 9 (banker's rounding would give 8).
RGB_PIXELS = np.array(
    [[[255, 0, 0], [0, 255, 0], [0, 0, 255]], [[10, 20, 30], [1, 13, 5], [255, 255, 255]]],
    dtype=np.uint8,
)
LUMA = np.array([[76, 150, 29], [18, 9, 255]], dtype=np.uint8)


def save_pil(path: Path, image: Image.Image, **options: object) -> Path:
    image.save(path, **options)
    return path


def save_tiff(path: Path, array: np.ndarray, **options: object) -> Path:
    tifffile.imwrite(path, array, **options)
    return path


def ramp(dtype: np.dtype, shape: tuple[int, int] = (7, 9)) -> np.ndarray:
    """Values spread over the dtype's whole range, its extremes included."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return (np.arange(shape[0] * shape[1]).reshape(shape) % 3) == 0
    if dtype.kind == "f":
        values = np.linspace(-1e6, 1e6, shape[0] * shape[1]).reshape(shape)
        values[0, :3] = [np.nan, np.inf, -np.inf]
        return values.astype(dtype)
    info = np.iinfo(dtype)
    values = np.linspace(int(info.min), int(info.max), shape[0] * shape[1]).reshape(shape)
    return np.round(values).astype(dtype)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def raises_one_line(path: Path, match: str, color_to_gray: str | None = None) -> str:
    """Read `path`, expect one InputError line matching `match`; return the message."""
    with pytest.raises(InputError, match=match) as info:
        decode.read_image(path, color_to_gray)
    message = str(info.value)
    assert "\n" not in message and len(message) < 200
    return message


# --- PNG ---------------------------------------------------------------------------


def test_png_one_bit_reads_bool_with_ink_false(tmp_path: Path) -> None:
    page = ramp(np.bool_)
    path = save_pil(tmp_path / "a.png", Image.fromarray(page))
    with Image.open(path) as written:
        assert written.mode == "1"
    result = decode.read_image(path)
    assert result.dtype == np.bool_
    np.testing.assert_array_equal(result, page)
    assert set(np.unique(result.view(np.uint8))) == {0, 1}  # real bools, not Pillow's 0/255


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_png_gray_round_trips(tmp_path: Path, dtype: type) -> None:
    values = ramp(np.dtype(dtype))
    path = save_pil(tmp_path / "a.png", Image.fromarray(values))
    result = decode.read_image(path)
    assert result.dtype == dtype
    np.testing.assert_array_equal(result, values)


def test_png_8_bit_gray_with_transparency_reads_gray(tmp_path: Path) -> None:
    values = ramp(np.dtype(np.uint8))
    path = save_pil(tmp_path / "a.png", Image.fromarray(values), transparency=7)
    assert b"tRNS" in path.read_bytes()
    np.testing.assert_array_equal(decode.read_image(path), values)


def adam7_gray_png(values: np.ndarray) -> bytes:
    """An interlaced (Adam7) 8-bit gray PNG of `values`, built pass by pass (no filter)."""
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4)]
    passes += [(1, 0, 2, 2), (0, 1, 1, 2)]
    raw = b""
    for x0, y0, dx, dy in passes:
        sub = values[y0::dy, x0::dx]
        if sub.size:
            raw += b"".join(b"\0" + row.tobytes() for row in sub)
    height, width = values.shape

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 1)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + (chunk(b"IEND", b""))
    )


def test_png_interlaced_gray_reads_every_pixel_in_place(tmp_path: Path) -> None:
    values = ramp(np.dtype(np.uint8))
    path = tmp_path / "a.png"
    path.write_bytes(adam7_gray_png(values))
    with Image.open(path) as image:  # the file is what it should be, as Pillow reads it
        assert image.info.get("interlace") == 1
        np.testing.assert_array_equal(np.asarray(image), values)
    np.testing.assert_array_equal(decode.read_image(path), values)


def palette_png(path: Path, palette: np.ndarray, indices: np.ndarray) -> Path:
    """An 8-bit palette PNG of `indices` into the (N, 3) `palette`."""
    image = Image.new("P", indices.shape[::-1])
    image.putpalette(palette.ravel().tolist())
    image.putdata(indices.ravel().tolist())
    save_pil(path, image)
    with Image.open(path) as written:
        assert written.mode == "P"
    return path


def test_png_gray_palette_reads_palette_values(tmp_path: Path) -> None:
    # Used entries are gray; entry 3 is red but no pixel uses it.
    palette = np.array([[200, 200, 200], [7, 7, 7], [90, 90, 90], [255, 0, 0]])
    path = palette_png(tmp_path / "p.png", palette, np.array([[0, 1, 2], [2, 1, 0]]))
    result = decode.read_image(path)
    assert result.dtype == np.uint8
    np.testing.assert_array_equal(result, [[200, 7, 90], [90, 7, 200]])


def color_palette_png(path: Path) -> Path:
    return palette_png(path, RGB_PIXELS.reshape(-1, 3), np.arange(6).reshape(2, 3))


def test_png_color_palette_needs_conversion(tmp_path: Path) -> None:
    path = color_palette_png(tmp_path / "p.png")
    raises_one_line(path, r"^color palette image; convert it with --color-to-gray luma")
    np.testing.assert_array_equal(decode.read_image(path, "luma"), LUMA)


def test_png_rgb_needs_conversion_and_each_choice_matches_hand_values(tmp_path: Path) -> None:
    path = save_pil(tmp_path / "c.png", Image.fromarray(RGB_PIXELS, mode="RGB"))
    raises_one_line(path, r"^RGB image; convert it with --color-to-gray luma\|red\|green\|blue$")
    for choice, expected in [
        ("luma", LUMA),
        ("red", [[255, 0, 0], [10, 1, 255]]),
        ("green", [[0, 255, 0], [20, 13, 255]]),
        ("blue", [[0, 0, 255], [30, 5, 255]]),
    ]:
        result = decode.read_image(path, choice)
        assert result.dtype == np.uint8
        np.testing.assert_array_equal(result, expected, err_msg=choice)


def test_png_rgba_drops_alpha(tmp_path: Path) -> None:
    rgba = np.dstack([RGB_PIXELS, np.full(RGB_PIXELS.shape[:2], 17, np.uint8)])
    path = save_pil(tmp_path / "c.png", Image.fromarray(rgba, mode="RGBA"))
    raises_one_line(path, r"^RGBA image; .*--color-to-gray .*\(alpha is dropped\)")
    np.testing.assert_array_equal(decode.read_image(path, "luma"), LUMA)
    np.testing.assert_array_equal(decode.read_image(path, "blue"), RGB_PIXELS[..., 2])


def test_png_gray_alpha_reads_gray_channel_when_asked(tmp_path: Path) -> None:
    la = np.dstack([ramp(np.uint8)[:2, :3], np.zeros((2, 3), np.uint8)])
    path = save_pil(tmp_path / "la.png", Image.fromarray(la, mode="LA"))
    raises_one_line(path, r"^gray\+alpha image; ")
    for choice in COLOR_TO_GRAY_CHOICES:
        np.testing.assert_array_equal(decode.read_image(path, choice), la[..., 0])


def test_png_16_bit_rgb_keeps_every_bit(tmp_path: Path) -> None:
    rgb = RGB_PIXELS.astype(np.uint16) * 257 + np.array([1, 2, 3], np.uint16) * (RGB_PIXELS < 255)
    path = tmp_path / "c16.png"
    path.write_bytes(imagecodecs.png_encode(rgb))
    red = decode.read_image(path, "red")
    assert red.dtype == np.uint16
    np.testing.assert_array_equal(red, rgb[..., 0])
    wide = rgb.astype(np.int64)
    expected = (299 * wide[..., 0] + 587 * wide[..., 1] + 114 * wide[..., 2] + 500) // 1000
    np.testing.assert_array_equal(decode.read_image(path, "luma"), expected)


def test_png_animation_is_3d(tmp_path: Path) -> None:
    frames = [Image.fromarray(np.full((4, 5), v, np.uint8)) for v in (10, 200)]
    path = save_pil(tmp_path / "anim.png", frames[0], save_all=True, append_images=frames[1:])
    raises_one_line(
        path, r"^3-D image \(shape \(2, 4, 5\)\); only 2-D images are labeled: save each slice "
    )


def test_png_dimension_bomb_fails_before_decoding(tmp_path: Path) -> None:
    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 100_000, 100_000, 1, 0, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 1000)
    path = tmp_path / "bomb.png"
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
    )
    raises_one_line(path, r"^image too large \(100000x100000")


def test_large_legitimate_scans_pass_pillow_limit() -> None:
    # A 2550x3300 A4 scan at 300 dpi is 8.4 Mpixel; an A0 one at 600 dpi ~ 670 Mpixel.
    assert Image.MAX_IMAGE_PIXELS is not None
    assert Image.MAX_IMAGE_PIXELS >= MAX_PIXELS >= 19866 * 28087


# --- TIFF --------------------------------------------------------------------------


def g4_scan(path: Path, paper: np.ndarray, min_is_white: bool) -> Path:
    """A 1-bit CCITT G4 TIFF written by Pillow/libtiff (tifffile cannot encode G4)."""
    tags = {262: 0} if min_is_white else {}
    return save_pil(path, Image.fromarray(paper), compression="group4", tiffinfo=tags)


@pytest.mark.parametrize("min_is_white", [True, False])
def test_tiff_g4_reads_ink_as_false(tmp_path: Path, min_is_white: bool) -> None:
    paper = np.ones((40, 64), dtype=bool)
    paper[10:14, 5:50] = False  # a stroke of ink
    path = g4_scan(tmp_path / "scan.tif", paper, min_is_white)
    with tifffile.TiffFile(path) as tiff:
        page = tiff.pages.first
        assert page.compression == tifffile.COMPRESSION.CCITT_T6
        assert page.photometric == (0 if min_is_white else 1)
        stored = page.asarray()
    np.testing.assert_array_equal(stored, ~paper if min_is_white else paper)
    result = decode.read_image(path)
    assert result.dtype == np.bool_
    np.testing.assert_array_equal(result, paper)


@pytest.mark.parametrize("compression", [None, "lzw", "zlib"])
@pytest.mark.parametrize(
    "dtype",
    [np.bool_, np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.float32, np.float64],
)
def test_tiff_dtypes_and_compressions_round_trip(
    tmp_path: Path, dtype: type, compression: str | None
) -> None:
    values = ramp(np.dtype(dtype))
    path = save_tiff(tmp_path / "a.tif", values, compression=compression, photometric="minisblack")
    result = decode.read_image(path)
    assert result.dtype == dtype
    np.testing.assert_array_equal(result, values)


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.uint16, np.int16, np.uint32])
def test_tiff_min_is_white_reads_displayed_intensity(tmp_path: Path, dtype: type) -> None:
    stored = ramp(np.dtype(dtype))
    path = save_tiff(tmp_path / "w.tif", stored, photometric="miniswhite")
    result = decode.read_image(path)
    assert result.dtype == dtype
    if dtype is np.bool_:
        np.testing.assert_array_equal(result, ~stored)  # a stored 1 is ink: False
        return
    info = np.iinfo(dtype)
    # The stored extremes swap places: black becomes the dtype's minimum.
    expected = int(info.max) + int(info.min) - stored.astype(np.int64)
    np.testing.assert_array_equal(result, expected)


def test_tiff_4_bit_min_is_white_flips_within_4_bits(tmp_path: Path) -> None:
    stored = (np.arange(32, dtype=np.uint8) % 16).reshape(4, 8)
    path = save_tiff(tmp_path / "w4.tif", stored, photometric="miniswhite", bitspersample=4)
    np.testing.assert_array_equal(decode.read_image(path), 15 - stored)


def test_tiff_float_min_is_white_is_refused(tmp_path: Path) -> None:
    path = save_tiff(tmp_path / "w.tif", ramp(np.float32), photometric="miniswhite")
    raises_one_line(path, r"MinIsWhite")


def tiff_colormap(palette: np.ndarray) -> np.ndarray:
    """A (3, 256) TIFF colormap from (N, 3) 8-bit entries, stored the usual v * 257 way."""
    colormap = np.zeros((3, 256), dtype=np.uint16)
    colormap[:, : len(palette)] = palette.T.astype(np.uint16) * 257
    return colormap


def test_tiff_gray_palette_reads_palette_values(tmp_path: Path) -> None:
    palette = np.array([[0, 0, 0], [128, 128, 128], [255, 255, 255], [250, 0, 0]])
    indices = np.array([[2, 1], [0, 2]], dtype=np.uint8)
    path = save_tiff(
        tmp_path / "p.tif", indices, photometric="palette", colormap=tiff_colormap(palette)
    )
    np.testing.assert_array_equal(decode.read_image(path), [[255, 128], [0, 255]])


def test_tiff_color_palette_needs_conversion(tmp_path: Path) -> None:
    indices = np.arange(6, dtype=np.uint8).reshape(2, 3)
    colormap = tiff_colormap(RGB_PIXELS.reshape(-1, 3))
    path = save_tiff(tmp_path / "p.tif", indices, photometric="palette", colormap=colormap)
    raises_one_line(path, r"^color palette image; convert it")
    np.testing.assert_array_equal(decode.read_image(path, "luma"), LUMA)


@pytest.mark.parametrize("planar", ["contig", "separate"])
def test_tiff_rgb_needs_conversion(tmp_path: Path, planar: str) -> None:
    data = RGB_PIXELS if planar == "contig" else np.moveaxis(RGB_PIXELS, -1, 0)
    path = save_tiff(tmp_path / "c.tif", data, photometric="rgb", planarconfig=planar)
    raises_one_line(path, r"^RGB image; convert it with --color-to-gray")
    np.testing.assert_array_equal(decode.read_image(path, "luma"), LUMA)
    np.testing.assert_array_equal(decode.read_image(path, "green"), RGB_PIXELS[..., 1])


def test_tiff_float_rgb_luma_in_float64(tmp_path: Path) -> None:
    rgb = np.array([[[0.5, 0.25, 1.0], [1e-3, 2e-3, 3e-3]]], dtype=np.float32)
    path = save_tiff(tmp_path / "f.tif", rgb, photometric="rgb")
    wide = rgb.astype(np.float64)
    expected = ((299 * wide[..., 0] + 587 * wide[..., 1] + 114 * wide[..., 2]) / 1000).astype(
        np.float32
    )
    result = decode.read_image(path, "luma")
    assert result.dtype == np.float32
    np.testing.assert_array_equal(result, expected)


def test_tiff_multi_page_is_read_a_page_at_a_time(tmp_path: Path) -> None:
    path = save_tiff(
        tmp_path / "stack.tif", np.zeros((2, 4, 5), np.uint8), photometric="minisblack"
    )
    raises_one_line(path, r"^2 pages; gccl label labels each page as an image of its own$")
    assert decode.image_pages(path) == 2
    assert decode.read_image(path, page=1).shape == (4, 5)


def test_tiff_thumbnail_page_is_not_a_second_image(tmp_path: Path) -> None:
    values = ramp(np.uint16, (16, 20))
    path = tmp_path / "thumb.tif"
    with tifffile.TiffWriter(path) as tiff:
        tiff.write(values)
        tiff.write(values[::4, ::4], subfiletype=1)  # a reduced-resolution thumbnail
    np.testing.assert_array_equal(decode.read_image(path), values)


@pytest.mark.parametrize("options", [{"byteorder": ">"}, {"bigtiff": True}])
def test_tiff_big_endian_and_bigtiff(tmp_path: Path, options: dict[str, object]) -> None:
    values = ramp(np.int32)
    path = save_tiff(tmp_path / "a.tif", values, **options)
    result = decode.read_image(path)
    assert result.dtype == np.dtype("=i4")
    np.testing.assert_array_equal(result, values)


def test_tiff_volume_in_one_page_is_3d(tmp_path: Path) -> None:
    volume = np.zeros((3, 16, 16), np.uint8)
    path = save_tiff(
        tmp_path / "vol.tif", volume, volumetric=True, tile=(1, 16, 16), photometric="minisblack"
    )
    with tifffile.TiffFile(path) as tiff:
        assert len(tiff.pages) == 1
    raises_one_line(path, r"^3-D image \(shape \(3, 16, 16\)\)")


def test_tiff_unsupported_dtype_is_named(tmp_path: Path) -> None:
    path = save_tiff(tmp_path / "i64.tif", np.zeros((3, 3), np.int64))
    raises_one_line(path, r"^unsupported dtype int64")


# --- NPY ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
def test_npy_2d_round_trips(tmp_path: Path, dtype: np.dtype) -> None:
    values = ramp(dtype)
    np.save(tmp_path / "a.npy", values)
    result = decode.read_image(tmp_path / "a.npy")
    assert result.dtype == dtype
    np.testing.assert_array_equal(result, values)


def test_npy_big_endian_fortran_and_float16_are_normalised(tmp_path: Path) -> None:
    values = np.asfortranarray(ramp(np.uint16).astype(">u2"))
    np.save(tmp_path / "be.npy", values)
    result = decode.read_image(tmp_path / "be.npy")
    assert result.dtype == np.dtype("=u2") and result.flags.c_contiguous
    np.testing.assert_array_equal(result, values)
    np.save(tmp_path / "half.npy", np.array([[0.5, -2.0]], dtype=np.float16))
    half = decode.read_image(tmp_path / "half.npy")
    assert half.dtype == np.float32
    np.testing.assert_array_equal(half, [[0.5, -2.0]])


@pytest.mark.parametrize(
    ("array", "match"),
    [
        (np.zeros((2, 3, 4), np.uint8), r"^3-D image \(shape \(2, 3, 4\)\); only 2-D"),
        (np.zeros(5, np.uint8), r"^1-D image \(shape \(5,\)\)"),
        (np.zeros((2, 2), np.int64), r"^unsupported dtype int64"),
        (np.zeros((2, 2), np.uint64), r"^unsupported dtype uint64"),
        (np.zeros((2, 2), np.complex64), r"^unsupported dtype complex64"),
        (np.zeros((0, 4), np.uint8), r"^empty image \(shape \(0, 4\)\)"),
    ],
)
def test_npy_refusals(tmp_path: Path, array: np.ndarray, match: str) -> None:
    np.save(tmp_path / "a.npy", array)
    raises_one_line(tmp_path / "a.npy", match)


def test_npy_object_array_is_refused_without_unpickling(tmp_path: Path) -> None:
    np.save(tmp_path / "o.npy", np.array([[object()]], dtype=object), allow_pickle=True)
    raises_one_line(tmp_path / "o.npy", r"^unsupported dtype object")


# --- bad inputs --------------------------------------------------------------------


def truncated(path: Path, keep: float = 0.5) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def noisy(dtype: type = np.uint8) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 255, (64, 80)).astype(dtype)


def save_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def save_npy(path: Path, array: np.ndarray) -> Path:
    np.save(path, array)
    return path


def npy_header(shape: tuple[int, ...]) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": "|u1", "fortran_order": False, "shape": shape}
    )
    return buffer.getvalue()


BAD_INPUTS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "zero bytes": (lambda d: save_bytes(d / "z.png", b""), r"^empty file$"),
    "text named png": (
        lambda d: save_bytes(d / "t.png", b"hello, not an image\n"),
        r"^not a PNG, TIFF, JPEG, BMP, WebP or NPY image$",
    ),
    "truncated png": (
        lambda d: truncated(save_pil(d / "a.png", Image.fromarray(noisy()))),
        r"^corrupt or truncated PNG: ",
    ),
    "truncated 16-bit png": (
        lambda d: truncated(save_pil(d / "a.png", Image.fromarray(noisy(np.uint16) * 257))),
        r"^corrupt or truncated PNG: ",
    ),
    "png cut inside its header": (
        lambda d: save_bytes(
            d / "h.png", save_pil(d / "a.png", Image.new("L", (4, 4))).read_bytes()[:20]
        ),
        r"^corrupt or truncated PNG: ",
    ),
    "truncated tiff": (
        lambda d: truncated(save_tiff(d / "a.tif", noisy(np.uint16), compression="zlib")),
        r"^corrupt or truncated TIFF: ",
    ),
    "truncated uncompressed tiff": (
        lambda d: truncated(save_tiff(d / "a.tif", noisy(), metadata=None), 0.9),
        r"^corrupt or truncated TIFF: image data runs past the end of the file$",
    ),
    "tiff cut before its directory": (  # Pillow writes the directory after the pixels
        lambda d: truncated(g4_scan(d / "g4.tif", noisy() > 9, min_is_white=True)),
        r"^corrupt or truncated TIFF: no readable image directory$",
    ),
    "truncated npy": (
        lambda d: truncated(save_npy(d / "a.npy", noisy())),
        r"^corrupt or truncated NPY: \d+ of 5120 values present$",
    ),
    "npy bomb header": (
        lambda d: save_bytes(d / "b.npy", npy_header((60_000, 60_000))),
        r"^image too large",
    ),
    "directory": (lambda d: d, r"^is a directory"),
    "missing": (lambda d: d / "nope.png", r"^no such file$"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_inputs_fail_with_one_line(tmp_path: Path, case: str) -> None:
    build, match = BAD_INPUTS[case]
    raises_one_line(build(tmp_path), match)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_unreadable_file(tmp_path: Path) -> None:
    path = save_pil(tmp_path / "a.png", Image.fromarray(noisy()))
    path.chmod(0)
    raises_one_line(path, r"^permission denied$")


def test_os_errors_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.png").symlink_to(tmp_path / "b.png")
    (tmp_path / "b.png").symlink_to(tmp_path / "a.png")
    raises_one_line(tmp_path / "a.png", r"^cannot read: Too many levels of symbolic links$")

    path = save_npy(tmp_path / "a.npy", noisy())
    real_open = os.open

    def forbidden(name: object, *args: Any, **kwargs: Any) -> int:
        if name == path:
            raise PermissionError(13, "Permission denied")
        return real_open(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", forbidden)  # as root, chmod 0 reads
    raises_one_line(path, r"^permission denied$")


def test_tiff_library_logs_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = truncated(g4_scan(tmp_path / "g4.tif", noisy() > 9, min_is_white=True))
    raises_one_line(path, r"no readable image directory")  # tifffile would log a warning
    assert not [record for record in caplog.records if record.name.startswith("tifffile")]


def test_format_comes_from_magic_bytes_not_suffix(tmp_path: Path) -> None:
    values = noisy(np.uint16)
    disguised = tmp_path / "really_a_png.tif"
    Image.fromarray(values).save(disguised, format="PNG")
    np.testing.assert_array_equal(decode.read_image(disguised), values)
    npy_as_png = save_npy(tmp_path / "x.npy", values).rename(tmp_path / "x.png")
    np.testing.assert_array_equal(decode.read_image(npy_as_png), values)


def test_unknown_color_choice_is_a_caller_bug(tmp_path: Path) -> None:
    path = save_npy(tmp_path / "a.npy", noisy())
    with pytest.raises(ValueError, match="color_to_gray"):
        decode.read_image(path, "purple")


def test_reading_never_modifies_the_input(tmp_path: Path) -> None:
    paths = [
        save_pil(tmp_path / "a.png", Image.fromarray(noisy())),
        color_palette_png(tmp_path / "p.png"),
        save_tiff(tmp_path / "w.tif", noisy(np.uint16), photometric="miniswhite"),
        g4_scan(tmp_path / "g4.tif", noisy() > 100, min_is_white=True),
        save_npy(tmp_path / "a.npy", np.asfortranarray(noisy().astype(">u2"))),
    ]
    for path in paths:
        before = (sha256(path), path.stat().st_mtime_ns)
        decode.read_image(path, "luma")
        assert (sha256(path), path.stat().st_mtime_ns) == before, path.name


def test_is_image_path_ignores_case() -> None:
    assert decode.is_image_path("a/B.TIFF") and decode.is_image_path(Path("x.Npy"))
    assert not decode.is_image_path("notes.txt") and not decode.is_image_path("png")


# --- real images -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["page", "text", "coins", "horse"])
@pytest.mark.parametrize("suffix", [".png", ".tif"])
def test_scikit_image_bundled_images(tmp_path: Path, name: str, suffix: str) -> None:
    data = pytest.importorskip("skimage.data")
    values = getattr(data, name)()
    path = tmp_path / f"{name}{suffix}"
    if suffix == ".png":
        Image.fromarray(values).save(path)
    else:
        tifffile.imwrite(path, values, compression="zlib", photometric="minisblack")
    result = decode.read_image(path)
    assert result.dtype == values.dtype and result.shape == values.shape
    np.testing.assert_array_equal(result, values)


def test_scikit_image_astronaut_luma_matches_the_formula(tmp_path: Path) -> None:
    data = pytest.importorskip("skimage.data")
    rgb = data.astronaut()
    path = save_pil(tmp_path / "astronaut.png", Image.fromarray(rgb))
    # The same weights written independently: floor(luma + 1/2), in floating point.
    weighted = rgb.astype(np.int64) @ np.array([299, 587, 114])
    expected = np.floor(weighted / 1000 + 0.5).astype(np.uint8)
    np.testing.assert_array_equal(decode.read_image(path, "luma"), expected)


SAMPLES = {
    "blobs_mask.png": (np.bool_, (256, 320)),
    "shapes_gray8.png": (np.uint8, (240, 320)),
    "room.depth.png": (np.uint16, (480, 640)),
    "room_meters.tif": (np.float32, (240, 320)),
    "scan_g4.tif": (np.bool_, (480, 640)),
}


@pytest.mark.parametrize("name", list(SAMPLES))
def test_sample_data_reads_as_documented(name: str) -> None:
    path = REPO / "sample_data" / name
    assert path.stat().st_size < 200_000
    dtype, shape = SAMPLES[name]
    values = decode.read_image(path)
    assert values.dtype == dtype and values.shape == shape
    if name == "scan_g4.tif":
        assert 0.9 < values.mean() < 1  # white paper, a little black ink
    if name == "room.depth.png":
        assert 0 < (values == 0).mean() < 0.05 and values.max() < 4000  # holes, millimetres
    if name == "room_meters.tif":
        assert 0 < np.isnan(values).mean() < 0.05 and np.nanmax(values) < 4  # holes, metres
