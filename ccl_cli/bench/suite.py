"""The cases a benchmark runs: the built-in generated suite, or the user's own images.

A case is one 2-D image and the labeling it is measured with (mode, tau,
connectivity). Generated images are seeded from the case's name, so every run
and every machine measures the same pixels, and they take well under a second
to make even at 4000x3000:

* random-D: binary noise, each pixel foreground with probability D (uint8 0/255);
  the classic stress test of the GPU papers (many tiny components at 0.1 and
  0.9, a few huge tangled ones at 0.5).
* document: text-like strokes (binarized ink 255 on 0): glyphs drawn from a
  small bank of random strokes, set in words, lines and paragraphs.
* depth: a depth map (uint16, millimetres): a tilted floor, boxes with their
  own tilted planes, clutter, sensor noise, and holes of invalid depth (0). It
  runs in tau mode, where ramps chain into one component and depth jumps split.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..contract.params import LabelParams

#: The generated image families, in report order.
FAMILIES = ("random-0.1", "random-0.5", "random-0.9", "document", "depth")
#: The generated sizes (width, height): VGA, full HD, a 12-Mpixel camera.
SIZES = ((640, 480), (1920, 1080), (4000, 3000))
#: The tau the depth family runs with unless --tau says otherwise: above its
#: noise and ramp steps (<= 6 mm between neighbours), far below its depth jumps.
SUITE_TAU = 8


@dataclass(frozen=True)
class Case:
    """One benchmark case: an image and how it is labeled.

    name: unique within a run, e.g. 'random-0.5 1920x1080 8c'.
    image: the (H, W) image; the cases of one image share the array.
    source: the file it came from, or None for a generated image.
    """

    name: str
    family: str
    image: np.ndarray
    params: LabelParams
    source: str | None = None

    @property
    def size(self) -> str:
        """'WxH'."""
        height, width = self.image.shape
        return f"{width}x{height}"

    @property
    def pixels(self) -> int:
        """Pixels of one image."""
        return int(self.image.size)


def parse_size(text: str) -> tuple[int, int]:
    """(width, height) from 'WxH'; ValueError when malformed or below 8x8."""
    width_text, sep, height_text = text.strip().lower().partition("x")
    if not sep or not width_text.isdigit() or not height_text.isdigit():
        raise ValueError(f"a size is WIDTHxHEIGHT, got {text!r}")
    width, height = int(width_text), int(height_text)
    if width < 8 or height < 8:
        raise ValueError(f"a size is at least 8x8, got {text!r}")
    return width, height


def generate(family: str, width: int, height: int) -> np.ndarray:
    """The image of a generated family at one size (deterministic)."""
    rng = np.random.default_rng(zlib.crc32(f"{family} {width}x{height}".encode()))
    if family.startswith("random-"):
        density = float(family.partition("-")[2])
        return ((rng.random((height, width), np.float32) < density) * 255).astype(np.uint8)
    return _GENERATORS[family](rng, width, height)


def generated_cases(
    families: Sequence[str],
    sizes: Sequence[tuple[int, int]],
    connectivities: Sequence[int],
    tau: float | None,
    growth: LabelParams | None = None,
) -> list[Case]:
    """The generated suite: every family at every size and connectivity.

    The depth family runs in tau mode (tau, or SUITE_TAU when None; `growth` holds the
    tolerance's tau_relative and tau_quadratic); the others are binary images and run
    in binary mode.
    """
    cases = []
    for width, height in sizes:
        for family in families:
            image = generate(family, width, height)
            family_tau = (SUITE_TAU if tau is None else tau) if family == "depth" else None
            base = growth if family == "depth" else None
            stem = f"{family} {width}x{height}"
            cases.extend(_cases_of(stem, family, image, family_tau, connectivities, base=base))
    return cases


def input_cases(
    images: Iterable[tuple[str, np.ndarray, str]],
    connectivities: Sequence[int],
    tau: float | None,
    base: LabelParams | None = None,
) -> list[Case]:
    """Cases of the user's images, (name, image, file) each: binary mode, or tau mode when
    tau is given; `base` holds background, invert and threshold as gccl label takes them."""
    return [
        case
        for name, image, path in images
        for case in _cases_of(name, "input", image, tau, connectivities, source=path, base=base)
    ]


def _cases_of(
    stem: str,
    family: str,
    image: np.ndarray,
    tau: float | None,
    connectivities: Sequence[int],
    source: str | None = None,
    base: LabelParams | None = None,
) -> list[Case]:
    return [
        Case(
            f"{stem} {connectivity}c",
            family,
            image,
            replace(base or LabelParams(), tau=tau, connectivity=connectivity),
            source,
        )
        for connectivity in connectivities
    ]


def _document(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """Binarized text: lines of words of stroke glyphs inside page margins."""
    glyph_h = max(4, height // 90)
    glyph_w = max(3, glyph_h * 2 // 3)
    bank = _glyph_bank(rng, 48, glyph_h, glyph_w)
    line_h = glyph_h + max(2, glyph_h // 2)
    margin_x, margin_y = width // 12, height // 14
    lines = max(1, (height - 2 * margin_y) // line_h)
    chars = max(1, (width - 2 * margin_x) // glyph_w)
    # Index 0 is the blank glyph: word gaps, short last lines of paragraphs.
    index = rng.integers(1, len(bank), (lines, chars))
    index[rng.random((lines, chars)) < 0.17] = 0
    line_ends = np.where(rng.random(lines) < 0.15, rng.integers(1, chars + 1, lines), chars)
    index[np.arange(chars)[None, :] >= line_ends[:, None]] = 0
    cells = np.zeros((lines, line_h, chars, glyph_w), np.uint8)
    cells[:, :glyph_h] = bank[index].transpose(0, 2, 1, 3)
    text = cells.reshape(lines * line_h, chars * glyph_w)
    page = np.zeros((height, width), np.uint8)
    page[margin_y : margin_y + text.shape[0], margin_x : margin_x + text.shape[1]] = text
    return page


def _glyph_bank(rng: np.random.Generator, count: int, height: int, width: int) -> np.ndarray:
    """`count` glyphs (255 ink on 0) of 1 to 3 thick strokes each; glyph 0 is blank."""
    bank = np.zeros((count, height, width), np.uint8)
    thickness = max(1, height // 8)
    ys, xs = np.mgrid[0:height, 0:width]
    for glyph in bank[1:]:
        for _ in range(rng.integers(1, 4)):
            (y0, y1), (x0, x1) = rng.uniform(0, height - 1, 2), rng.uniform(0, width - 1, 2)
            # Distance of every pixel to the segment (y0, x0)-(y1, x1).
            dy, dx = y1 - y0, x1 - x0
            t = np.clip(((ys - y0) * dy + (xs - x0) * dx) / max(dy * dy + dx * dx, 1e-9), 0, 1)
            distance = np.hypot(ys - (y0 + t * dy), xs - (x0 + t * dx))
            glyph[distance <= thickness / 2 + 0.25] = 255
    return bank


def _depth(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """A depth map in mm: tilted floor, boxes on their own planes, clutter, noise, holes."""
    scale = width / 640  # objects grow with the image, slopes per pixel do not
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    depth = 6000 - ys + 0.2 * xs  # the floor: 1 mm farther per row up, 0.2 per column
    for count, size, offset in ((12, 120, 400), (300, 14, 150)):  # boxes, then clutter
        for _ in range(count):
            h, w = (rng.uniform(0.3, 1.0, 2) * size * scale).astype(int) + 2
            y, x = rng.integers(0, max(1, height - h)), rng.integers(0, max(1, width - w))
            tilt_y, tilt_x = rng.uniform(-1.5, 1.5, 2)
            near = depth[y, x] - offset * rng.uniform(0.5, 1.5)
            depth[y : y + h, x : x + w] = (
                near
                + tilt_y * (ys[y : y + h, x : x + w] - y)
                + tilt_x * (xs[y : y + h, x : x + w] - x)
            )
    depth += rng.integers(-1, 2, depth.shape)  # sensor noise, +-1 mm
    values = np.clip(depth, 1, 65535).astype(np.uint16)
    for _ in range(int(20 * scale)):  # holes: shadows and reflections
        h, w = (rng.uniform(0.2, 1.0, 2) * 40 * scale).astype(int) + 1
        y, x = rng.integers(0, height), rng.integers(0, width)
        values[y : y + h, x : x + w] = 0
    values[rng.random(values.shape, np.float32) < 0.01] = 0  # dropout pixels
    return values


_GENERATORS: dict[str, Callable[[np.random.Generator, int, int], np.ndarray]] = {
    "document": _document,
    "depth": _depth,
}
