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

Volume families (3-D, (D, H, W), labeled at 26 and 6 unless --connectivity says):

* blobs3d: half the voxels foreground in smooth blobs (few large tangled components).
* pores3d: sparse small balls (radius 1..4), thousands of components.
* random3d: binary noise of density 0.3 (near 26-connectivity's percolation: huge tangles).
* ct3d: a CT-like uint16 casting in tau mode (tau VOLUME_TAU): a cylinder of material on a
  slow ramp along z with noise and pores, 0 outside.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..contract.params import LabelParams

#: The generated image families, in report order.
FAMILIES = ("random-0.1", "random-0.5", "random-0.9", "document", "depth")
#: The generated volume families (--cases names them; the default suite is 2-D).
VOLUME_FAMILIES = ("blobs3d", "pores3d", "random3d", "ct3d")
#: The generated sizes (width, height): VGA, full HD, a 12-Mpixel camera.
SIZES = ((640, 480), (1920, 1080), (4000, 3000))
#: The generated volume sizes (width, height, depth).
VOLUME_SIZES = ((128, 128, 128), (512, 512, 512))
#: The tau the ct3d family runs with unless --tau says otherwise: above its noise and ramp
#: steps (<= 7 between neighbours), far below the jump from material to pores (about 2200).
VOLUME_TAU = 20
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
        """'WxH', or 'WxHxD' for a volume."""
        return "x".join(str(side) for side in reversed(self.image.shape))

    @property
    def is_volume(self) -> bool:
        """Whether the case is a 3-D volume (D, H, W)."""
        return self.image.ndim == 3

    @property
    def pixels(self) -> int:
        """Pixels of one image."""
        return int(self.image.size)


def parse_size(text: str) -> tuple[int, ...]:
    """(width, height) from 'WxH', (width, height, depth) from 'WxHxD' (a volume);
    ValueError when malformed or below 8 on a side."""
    parts = text.strip().lower().split("x")
    if len(parts) not in (2, 3) or not all(part.isdigit() for part in parts):
        raise ValueError(f"a size is WIDTHxHEIGHT, or WIDTHxHEIGHTxDEPTH for volumes, got {text!r}")
    sides = tuple(int(part) for part in parts)
    if min(sides) < 8:
        raise ValueError(f"a size is at least 8 on every side, got {text!r}")
    return sides


def generate(family: str, *size: int) -> np.ndarray:
    """The image of a generated family at one size (width, height), or the volume of a
    volume family at (width, height, depth) (deterministic)."""
    rng = np.random.default_rng(zlib.crc32(f"{family} {'x'.join(map(str, size))}".encode()))
    if family in VOLUME_FAMILIES:
        width, height, depth = size
        return _VOLUME_GENERATORS[family](rng, (depth, height, width))
    width, height = size
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


def generated_volume_cases(
    families: Sequence[str],
    sizes: Sequence[tuple[int, ...]],
    connectivities: Sequence[int],
    tau: float | None,
) -> list[Case]:
    """The generated volumes: every volume family at every (width, height, depth) and
    volume connectivity; ct3d runs in tau mode (tau, or VOLUME_TAU when None), the others
    are binary masks."""
    cases = []
    for size in sizes:
        for family in families:
            volume = generate(family, *size)
            family_tau = (VOLUME_TAU if tau is None else tau) if family == "ct3d" else None
            stem = f"{family} {'x'.join(map(str, size))}"
            cases.extend(_cases_of(stem, family, volume, family_tau, connectivities))
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


def _blobs3d(rng: np.random.Generator, shape: tuple[int, int, int]) -> np.ndarray:
    """Half the voxels foreground in smooth blobs: six random plane waves of a few periods
    across the volume, summed and thresholded at their median."""
    axes = [np.arange(n, dtype=np.float32) / max(shape) for n in shape]
    field = np.zeros(shape, np.float32)
    for _ in range(6):
        k = rng.normal(0, 8, 3).astype(np.float32)
        phase = np.float32(rng.uniform(0, 2 * np.pi))
        field += np.cos(
            k[0] * axes[0][:, None, None] + k[1] * axes[1][None, :, None] + k[2] * axes[2] + phase
        )
    return ((field > np.median(field)) * 255).astype(np.uint8)


def _balls(
    rng: np.random.Generator, shape: tuple[int, int, int], count: int, radii: range
) -> np.ndarray:
    """A mask of about `count` balls of the radii in `radii` at random centres (clipped at
    the border)."""
    mask = np.zeros(shape, bool)
    for radius in radii:
        d = np.arange(-radius, radius + 1)
        dz, dy, dx = np.meshgrid(d, d, d, indexing="ij")
        inside = dz**2 + dy**2 + dx**2 <= radius**2
        offsets = np.stack([dz[inside], dy[inside], dx[inside]], 1)
        centres = rng.integers(0, shape, (max(1, count // len(radii)), 3))
        voxels = (centres[:, None, :] + offsets[None, :, :]).reshape(-1, 3)
        voxels = voxels[((voxels >= 0) & (voxels < shape)).all(1)]
        mask[voxels[:, 0], voxels[:, 1], voxels[:, 2]] = True
    return mask


def _pores3d(rng: np.random.Generator, shape: tuple[int, int, int]) -> np.ndarray:
    """Sparse pores: balls of radius 1..4, about one per 3300 voxels (3 % foreground)."""
    count = max(1, int(np.prod(shape)) // 3300)
    return (_balls(rng, shape, count, range(1, 5)) * 255).astype(np.uint8)


def _random3d(rng: np.random.Generator, shape: tuple[int, int, int]) -> np.ndarray:
    """Binary noise, each voxel foreground with probability 0.3."""
    return ((rng.random(shape, np.float32) < 0.3) * 255).astype(np.uint8)


def _ct3d(rng: np.random.Generator, shape: tuple[int, int, int]) -> np.ndarray:
    """A CT-like uint16 casting: 0 outside a cylinder; inside, material of about 3000 on a
    ramp of 400 along z with +-3 noise, and pores (radius 2..6) of about 800."""
    depth, height, width = shape
    y, x = np.ogrid[:height, :width]
    cylinder = (y - height / 2) ** 2 + (x - width / 2) ** 2 < (0.45 * min(height, width)) ** 2
    ramp = 3000 + 400 * np.arange(depth, dtype=np.float32)[:, None, None] / depth
    values = ramp + rng.integers(-3, 4, shape, dtype=np.int16)
    pores = _balls(rng, shape, max(1, int(np.prod(shape)) // 20000), range(2, 7))
    values = np.where(pores, 800 + rng.integers(-3, 4, shape, dtype=np.int16), values)
    return np.where(cylinder, values, 0).astype(np.uint16)


_VOLUME_GENERATORS: dict[str, Callable[[np.random.Generator, tuple[int, int, int]], np.ndarray]] = {
    "blobs3d": _blobs3d,
    "pores3d": _pores3d,
    "random3d": _random3d,
    "ct3d": _ct3d,
}

_GENERATORS: dict[str, Callable[[np.random.Generator, int, int], np.ndarray]] = {
    "document": _document,
    "depth": _depth,
}
