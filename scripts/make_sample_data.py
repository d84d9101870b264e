"""Generate sample_data/: small synthetic images that show every input kind gccl reads.

Deterministic (fixed seed, no clock, no downloads), so re-running it rewrites
the same files with the same library versions. The images are the project's
own work, under the project's licence. sample_data/README.md says which
options suit each one.

    .venv/bin/python scripts/make_sample_data.py [--out sample_data]
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import numpy as np
import tifffile
from PIL import Image, ImageDraw, ImageFont

SEED = 20261130
ROOT = Path(__file__).resolve().parent.parent


def disc(shape: tuple[int, int], cy: float, cx: float, radius: float) -> np.ndarray:
    """Boolean mask of the pixels within `radius` of (cy, cx)."""
    yy, xx = np.ogrid[: shape[0], : shape[1]]
    return (yy - cy) ** 2 + (xx - cx) ** 2 <= radius**2


def binary_mask(rng: np.random.Generator) -> np.ndarray:
    """320x256 bool: blobs, a ring, and a diagonal chain that only 8-connectivity joins."""
    shape = (256, 320)
    mask = np.zeros(shape, dtype=bool)
    for _ in range(14):
        cy, cx = rng.uniform(20, 236), rng.uniform(20, 300)
        radius = rng.uniform(5, 18)
        mask |= disc(shape, cy, cx, radius) & disc(shape, cy + radius / 3, cx, radius)
    mask |= disc(shape, 128, 160, 30) & ~disc(shape, 128, 160, 22)  # a ring with a hole
    steps = np.arange(60)
    mask[200 + steps // 2, 30 + steps] = True  # 8-connected staircase, 4-connected pieces
    mask[5:9, 5:9] = True  # a tiny speck, for --min-area
    return mask


def gray_scene(rng: np.random.Generator) -> np.ndarray:
    """320x240 uint8: bright shapes (>= 190) and dark spots (12) on a 50..120 gradient.

    Gaussian noise (sigma 4) everywhere keeps the classes apart: `--threshold 150`
    labels the bright shapes, `--invert --threshold 35` the dark spots.
    """
    shape = (240, 320)
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    image = 50 + xx * (70 / shape[1])  # the gradient
    image[40:100, 30:110] = 210  # a rectangle
    image[disc(shape, 150, 220, 40)] = 190  # a disc
    image[(yy > 150) & (yy < 220) & (np.abs(xx - 90) < (yy - 150) * 0.6)] = 230  # a triangle
    for cy, cx in ((30, 250), (60, 290), (210, 280)):
        image[disc(shape, cy, cx, 6)] = 12
    image += rng.normal(0, 4, shape)
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def depth_scene(shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Depth in millimetres (float64) of a room seen by a depth camera; 0 = no reading.

    A back wall (3200 mm, slightly tilted), a floor ramping from 3000 mm at the
    horizon to 1000 mm at the bottom, a box (1800 mm) with a shadow of missing
    readings on its left, and a dome-shaped cushion whose slope stays under
    20 mm per pixel, so that `--tau 20` keeps every surface whole and splits
    surfaces at their depth steps.
    """
    height, width = shape
    yy, xx = np.mgrid[:height, :width].astype(np.float64)
    horizon = int(height * 0.55)
    depth = 3200 + 0.4 * xx  # the wall
    floor = yy >= horizon
    depth[floor] = 3000 - (yy[floor] - horizon) * (2000 / (height - horizon))
    top, bottom, left, right = (
        int(height * 0.35),
        int(height * 0.75),
        int(width * 0.15),
        int(width * 0.4),
    )
    depth[top:bottom, left:right] = 1800 + 0.3 * (xx[top:bottom, left:right] - left)
    cy, cx, radius = height * 0.55, width * 0.7, height * 0.15
    cushion = disc(shape, cy, cx, radius)
    depth[cushion] = 1500 + 0.12 * ((yy[cushion] - cy) ** 2 + (xx[cushion] - cx) ** 2)
    depth += rng.integers(-1, 2, shape)  # a millimetre of sensor noise
    depth[top:bottom, left - width // 40 : left] = 0  # the box's shadow
    for _ in range(6):  # specular holes
        depth[disc(shape, rng.uniform(0, height), rng.uniform(0, width), rng.uniform(2, 6))] = 0
    return depth


def text_scan() -> np.ndarray:
    """640x480 bool (True = white paper) with lines of black text, like a page scan."""
    page = Image.new("1", (640, 480), 1)
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default(size=22)
    lines = [
        "gccl sample scan: connected components",
        "Every letter is one or more components;",
        "label the ink with --invert.",
        "The i and j dots are components of their own,",
        "and --min-area 3 drops specks of dust.",
    ]
    for row, text in enumerate(lines):
        draw.text((30, 40 + row * 48), text, font=font, fill=0)
    draw.rectangle((30, 300, 610, 303), fill=0)  # a rule under the text
    for x, y in ((100, 360), (400, 420), (550, 380)):
        draw.point((x, y), fill=0)  # dust
    return np.asarray(page)


def balls(
    shape: tuple[int, int, int], centres: list[tuple[float, float, float, float]]
) -> np.ndarray:
    """Boolean (z, y, x) volume of the voxels inside any ball (cz, cy, cx, radius in voxels)."""
    zz, yy, xx = np.ogrid[: shape[0], : shape[1], : shape[2]]
    mask = np.zeros(shape, dtype=bool)
    for cz, cy, cx, radius in centres:
        mask |= (zz - cz) ** 2 + (yy - cy) ** 2 + (xx - cx) ** 2 <= radius**2
    return mask


def casting(rng: np.random.Generator) -> np.ndarray:
    """(24, 32, 40) uint8 CT of a cast part: metal (about 180) with five dark pores (about 40),
    one of them two overlapping bubbles, and a single-voxel speck for --min-area."""
    shape = (24, 32, 40)
    pores = balls(
        shape,
        [
            (6, 8, 8, 3),
            (12, 20, 28, 4),
            (18, 8, 30, 2.5),
            (16, 24, 10, 3),
            (6, 24, 20, 2),
            (7, 25, 22, 2),
        ],
    )
    pores[20, 28, 34] = True
    values = 180 + rng.integers(-1, 2, shape)
    values[pores] = 40 + rng.integers(-1, 2, int(pores.sum()))
    return values.astype(np.uint8)


def organ_mask() -> np.ndarray:
    """(20, 32, 40) uint8 segmentation mask, (z, y, x): three organs as balls, one of them two
    overlapping lobes."""
    shape = (20, 32, 40)
    mask = balls(shape, [(5, 10, 9, 4), (12, 22, 28, 5), (14, 6, 30, 3), (14, 11, 30, 3)])
    return mask.astype(np.uint8)


def write_volumes(out: Path) -> None:
    """sample_data/volumes/: one small volume of each format gccl reads (README there)."""
    import nibabel
    import nrrd
    import SimpleITK as sitk
    from PIL import Image as PILImage

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED + 3)
    part = casting(rng)
    # An ImageJ hyperstack with the voxel size: 0.05 mm in x and y, 0.1 mm between slices.
    tifffile.imwrite(
        out / "part_ct.tif",
        part,
        imagej=True,
        resolution=(20.0, 20.0),
        metadata={"axes": "ZYX", "spacing": 0.1, "unit": "mm"},
        compression="zlib",
    )
    # The same part as MetaImage (LPS, mm), as industrial CT software exports it.
    image = sitk.GetImageFromArray(part)
    image.SetSpacing((0.05, 0.05, 0.1))
    image.SetOrigin((-1.0, -0.8, 0.0))
    sitk.WriteImage(image, str(out / "part_ct.mha"), True)
    # A medical mask: NIfTI with a 0.8 x 0.8 x 2.5 mm voxel and a scanner origin (RAS).
    mask = organ_mask()
    affine = np.diag([0.8, 0.8, 2.5, 1.0])
    affine[:3, 3] = (-16.0, -12.8, -25.0)
    nifti = nibabel.Nifti1Image(mask.transpose(2, 1, 0), affine)  # nibabel: (x, y, z)
    nifti.header.set_xyzt_units("mm")
    nifti.header.set_sform(affine, code=2)
    nibabel.save(nifti, out / "organs.nii.gz")
    # The same mask as 3D Slicer's segmentation NRRD, a label value per organ, in LPS: the
    # same voxels at the same place as the NIfTI's RAS (x and y flipped).
    labelmap = mask.copy()
    labelmap[:, :, 20:] *= 2
    header = {
        "space": "left-posterior-superior",
        "space directions": np.diag([-0.8, -0.8, 2.5]),
        "space origin": np.array([16.0, 12.8, -25.0]),
        "space units": ["mm", "mm", "mm"],
        "kinds": ["domain"] * 3,
        "encoding": "gzip",
    }
    buffer = io.BytesIO()
    nrrd.write(buffer, labelmap, header, index_order="C")
    # pynrrd stamps the time in a comment: without it the file is the same at every run.
    text = b"".join(
        line for line in buffer.getvalue().splitlines(True) if not line.startswith(b"# on ")
    )
    (out / "organs.seg.nrrd").write_bytes(text)
    # A Python pipeline's volume: two touching cells, each a smooth ramp, 30 levels apart:
    # one component in binary mode, two with --tau.
    _, yy, xx = np.mgrid[:12, :24, :32]
    cells = np.where(balls((12, 24, 32), [(6, 12, 10, 5)]), 10 + xx // 2, 0)
    cells = np.where(balls((12, 24, 32), [(6, 12, 19, 5)]), 40 + yy // 2, cells)
    np.save(out / "cells.npy", cells.astype(np.uint8))
    # A folder of 2-D slices, one PNG per plane, numbered without leading zeros.
    slices = out / "slices"
    slices.mkdir(exist_ok=True)
    for z, plane in enumerate(part[::2]):
        PILImage.fromarray(plane).save(slices / f"slice_{z + 1}.png", optimize=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "sample_data")
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)

    Image.fromarray(binary_mask(rng)).save(out / "blobs_mask.png", optimize=True)
    Image.fromarray(gray_scene(rng)).save(out / "shapes_gray8.png", optimize=True)

    depth_mm = depth_scene((480, 640), rng)
    Image.fromarray(np.rint(depth_mm).astype(np.uint16)).save(out / "room.depth.png", optimize=True)

    depth_m = (depth_scene((240, 320), rng) / 1000).astype(np.float32)
    depth_m[depth_m == 0] = np.nan  # no reading
    tifffile.imwrite(
        out / "room_meters.tif",
        depth_m,
        compression="zlib",
        predictor=True,  # floating-point predictor: smooth depth compresses well
        metadata=None,
    )

    # tifffile has no CCITT G4 encoder; Pillow (through libtiff) writes one.
    # Tag 262 = 0 stores it MinIsWhite (a stored 1 is ink), as scanners do.
    Image.fromarray(text_scan()).save(out / "scan_g4.tif", compression="group4", tiffinfo={262: 0})

    write_volumes(out / "volumes")

    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        print(f"{path.stat().st_size:>8}  {path.relative_to(out)}")


if __name__ == "__main__":
    main()
