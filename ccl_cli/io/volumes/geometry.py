"""Where a volume's voxels lie in the world: voxel size, origin, axis directions, units.

Every format's geometry comes to one form, in (x, y, z) order whatever the file's own order:
voxel (i, j, k) (x, y, z indexes, the reverse of the array's (z, y, x)) lies at

    world = origin + direction @ (spacing * (i, j, k))

in the file's `space` (NIfTI: RAS+, the scanner's; NRRD: its `space` field; MetaImage: LPS, as
ITK has it; TIFF and .npy: none, the identity). `native` carries what a format needs to write its
header back unchanged (a NIfTI header, an NRRD header dict, MetaImage keys, ImageJ/OME metadata).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: The identity direction: voxel axes x, y, z along world x, y, z.
IDENTITY = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
#: The world frames gccl converts between: the direction each world axis points to.
_FLIPS = {"RAS": ("R", "A", "S"), "LPS": ("L", "P", "S"), "LAS": ("L", "A", "S")}
#: How files spell units, to the short names gccl writes in column names.
_UNITS = {
    "mm": "mm",
    "millimeter": "mm",
    "millimeters": "mm",
    "millimetre": "mm",
    "um": "um",
    "µm": "um",
    "\u03bcm": "um",
    "micron": "um",
    "microns": "um",
    "micrometer": "um",
    "micrometre": "um",
    "nm": "nm",
    "nanometer": "nm",
    "cm": "cm",
    "m": "m",
    "meter": "m",
    "metre": "m",
    "inch": "in",
    "in": "in",
}


@dataclass(frozen=True)
class Geometry:
    """A volume's place in the world (see the module doc for the formula).

    spacing: voxel size along (x, y, z) in `units`; None where the file states none.
    origin: the world position of voxel (0, 0, 0), (x, y, z).
    direction: 3x3 rows of a matrix whose column j is the world direction of voxel axis j
        (x, y, z): unit vectors.
    units: "mm", "um", "nm", "cm", "m", "in", or "" when the file says none.
    space: the world's frame where the file names one ("RAS", "LPS", an NRRD space), else "".
    native: the format's own header, to write a label volume's back (opaque to callers).
    """

    spacing: tuple[float, float, float] | None = None
    origin: tuple[float, float, float] = (0.0, 0.0, 0.0)
    direction: tuple[tuple[float, float, float], ...] = IDENTITY
    units: str = ""
    space: str = ""
    native: Any = field(default=None, compare=False, repr=False)

    def with_spacing(self, spacing: tuple[float, float, float]) -> Geometry:
        """The same geometry with another voxel size (a --spacing given by the user)."""
        sx, sy, sz = (float(s) for s in spacing)
        return Geometry(
            (sx, sy, sz), self.origin, self.direction, self.units, self.space, self.native
        )

    def in_space(self, space: str) -> Geometry:
        """The same voxels in the world frame `space` ("RAS", "LPS" or "LAS"): axes whose
        letters differ change sign (x and y from NIfTI's RAS to ITK's LPS). A geometry in no
        frame of these three is only renamed: it has no frame to convert from."""
        if self.space not in _FLIPS or space not in _FLIPS or self.space == space:
            return Geometry(
                self.spacing, self.origin, self.direction, self.units, space, self.native
            )
        signs = np.where(np.asarray(_FLIPS[self.space]) == np.asarray(_FLIPS[space]), 1.0, -1.0)
        direction = np.asarray(self.direction, dtype=np.float64) * signs[:, None]
        origin = np.asarray(self.origin, dtype=np.float64) * signs
        return Geometry(
            self.spacing,
            _triple(origin),
            tuple(_triple(row) for row in direction),
            self.units,
            space,
            self.native,
        )

    def matrix(self) -> np.ndarray:
        """The 4x4 affine from voxel (x, y, z) indexes to the world (spacing 1 where unknown)."""
        affine = np.eye(4)
        scale = np.asarray(self.spacing if self.spacing is not None else (1.0, 1.0, 1.0))
        affine[:3, :3] = np.asarray(self.direction, dtype=np.float64) * scale
        affine[:3, 3] = self.origin
        return affine


def unit_name(text: str | None) -> str:
    """A file's unit spelled the way column names use it ("" for none or one not known)."""
    if not text:
        return ""
    return _UNITS.get(str(text).strip().lower(), "")


def from_matrix(
    axes: np.ndarray, origin: np.ndarray, units: str, space: str, native: Any
) -> Geometry:
    """A Geometry from a 3x3 matrix whose columns are the voxel axes' steps in the world
    (their lengths the spacing) and the world origin."""
    axes = np.asarray(axes, dtype=np.float64)
    spacing = np.linalg.norm(axes, axis=0)
    spacing = np.where(spacing > 0, spacing, 1.0)
    direction = axes / spacing
    return Geometry(
        spacing=_triple(spacing),
        origin=_triple(origin),
        direction=tuple(_triple(row) for row in direction),
        units=units,
        space=space,
        native=native,
    )


def _triple(values: Any) -> tuple[float, float, float]:
    x, y, z = (float(v) for v in values)
    return (x, y, z)


@dataclass
class VolumeFile:
    """A volume as read from a file.

    values: (D, H, W) = (z, y, x), C-contiguous, native byte order, a dtype labeling takes.
    geometry: where its voxels lie (Geometry).
    format: "nifti", "nrrd", "metaimage", "tiff", "npy" or "slices".
    """

    values: np.ndarray
    geometry: Geometry
    format: str
