"""A label volume for people: one PNG of three orthogonal maximum projections, each component in
the colour the 2-D previews give its label (previews.label_colors), background black.

Layout: the view along z (x across, y down) at the top left, the view along x (z across, y down)
at its right, the view along y (x across, z down) below it, as in an orthogonal viewer. Each view
is resampled (nearest voxel) so that its pixels are square in physical space: a voxel of spacing
(sx, sy, sz) covers sx by sy units in the top view, and so on. The picture is at most
_MAX_SIDE pixels a side and at least _MIN_SIDE where the volume is tiny.
"""

from __future__ import annotations

import numpy as np

from ..label_images import encode_png
from ..previews import label_colors
from .geometry import Geometry

_MAX_SIDE = 2048
_MIN_SIDE = 256
#: The gray of the gaps between views and of the empty corner.
_GAP_GRAY = 64
_GAP = 2


def volume_preview(labels: np.ndarray, geometry: Geometry) -> bytes:
    """The PNG (8-bit RGB) of a (D, H, W) label volume's three maximum projections (module doc).

    A view's pixel shows the largest label along its ray. Raises ValueError for labels that are
    not a 3-D array of non-negative integers.
    """
    if labels.ndim != 3 or labels.dtype.kind not in "iu":
        raise ValueError(f"labels must be a 3-D integer array, got {labels.dtype} {labels.shape}")
    depth, height, width = labels.shape
    spacing = np.asarray(geometry.spacing or (1.0, 1.0, 1.0), dtype=np.float64)
    extent = spacing / spacing.min() * (width, height, depth)  # physical size in pixels (x, y, z)
    across, down = extent[0] + extent[2], extent[1] + extent[2]
    scale = min(_MAX_SIDE / max(across, down), max(1.0, _MIN_SIDE / max(across, down)))
    px, py, pz = (max(1, round(float(n) * scale)) for n in extent)
    top = _resample(labels.max(axis=0, initial=0), py, px)  # along z: (y, x)
    side = _resample(labels.max(axis=2, initial=0).T, py, pz)  # along x: (y, z)
    bottom = _resample(labels.max(axis=1, initial=0), pz, px)  # along y: (z, x)
    palette = label_colors(int(labels.max(initial=0))).astype(np.uint8)
    picture = np.full((py + _GAP + pz, px + _GAP + pz, 3), _GAP_GRAY, dtype=np.uint8)
    picture[:py, :px] = palette[top]
    picture[:py, px + _GAP :] = palette[side]
    picture[py + _GAP :, :px] = palette[bottom]
    return encode_png(picture)


def _resample(view: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """`view` resized to (rows, cols) by the nearest pixel."""
    row_index = np.arange(rows) * view.shape[0] // rows
    col_index = np.arange(cols) * view.shape[1] // cols
    return view[row_index[:, None], col_index[None, :]]
