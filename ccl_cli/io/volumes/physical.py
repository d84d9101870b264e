"""Statistics in physical units: each component's volume and its centroid in world
coordinates, from the voxel columns and the file's geometry.

A centroid at voxel (x, y, z) lies at origin + direction @ (spacing * (x, y, z)) in the file's
space (geometry.py): NIfTI's affine (sform, else qform) gives RAS+ millimetres, an NRRD's
`space directions` and `space origin` its `space` in its `space units`, a MetaImage's Offset,
TransformMatrix and ElementSpacing LPS (ITK's world). A volume is voxels times the product of
the spacings (the direction is a rotation: it changes no volume).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .geometry import Geometry


def physical_columns(
    columns: Mapping[str, np.ndarray], geometry: Geometry
) -> dict[str, np.ndarray]:
    """The physical columns of a volume's statistics, or {} when the geometry has no voxel size.

    columns: the voxel columns "area" (voxels), "centroid_x", "centroid_y", "centroid_z".
    Returns float64 columns named with the units ("" units leave the suffix out):
    `volume_mm3` (area times the voxel's volume), `world_x_mm`, `world_y_mm`, `world_z_mm`
    (the centroid in the file's world).
    """
    if geometry.spacing is None:
        return {}
    spacing = np.asarray(geometry.spacing, dtype=np.float64)
    unit = f"_{geometry.units}" if geometry.units else ""
    voxel = np.stack([np.asarray(columns[f"centroid_{axis}"], dtype=np.float64) for axis in "xyz"])
    world = np.asarray(geometry.direction, dtype=np.float64) @ (voxel * spacing[:, None])
    world += np.asarray(geometry.origin, dtype=np.float64)[:, None]
    area = np.asarray(columns["area"], dtype=np.float64)
    found = {f"volume{unit}3" if unit else "volume": area * float(np.prod(spacing))}
    for axis, row in zip("xyz", world, strict=True):
        found[f"world_{axis}{unit}"] = row
    return found
