"""Brute-force references for volumes (README.md, "Volumes"), written from the text and
importing nothing from ccl_cli: the neighbourhoods, a BFS in raster order of first voxels
(z, then y, then x), min-area renumbering, per-component statistics, scipy.ndimage.label
with generate_binary_structure, and cc3d as a second opinion. Slow; small volumes only,
but for grouped_stats (numpy and scipy, for volumes of many components).
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from typing import Any

import cc3d
import numpy as np
import scipy.ndimage as ndi
from oracles import is_foreground, joins, rule_float_mean

#: The neighbour offsets (dz, dy, dx) of each connectivity: voxels sharing a face (6),
#: a face or an edge (18), a face, an edge or a corner (26), i.e. offsets with at most
#: 1, 2 or 3 nonzero coordinates.
NEIGHBOURS_3D = {
    connectivity: tuple(
        offset
        for offset in itertools.product((-1, 0, 1), repeat=3)
        if 0 < sum(map(abs, offset)) <= nonzero
    )
    for connectivity, nonzero in ((6, 1), (18, 2), (26, 3))
}
#: generate_binary_structure's connectivity argument of each.
SCIPY_RANK3 = {6: 1, 18: 2, 26: 3}


def bfs_volume(values: np.ndarray, params: Any) -> np.ndarray:
    """Labels 1..K in raster order (z, y, x) of first voxels, before min-area, int64.

    `params` carries background, invert, threshold, tau (with tau_relative and
    tau_quadratic) and connectivity (oracles.is_foreground and oracles.joins read them as the
    2-D references do).
    """
    depth, height, width = values.shape
    tau = getattr(params, "tau", None)
    fg = np.zeros(values.shape, bool)
    for index in np.ndindex(values.shape):
        fg[index] = is_foreground(values[index], values.dtype, params)
    labels = np.zeros(values.shape, np.int64)
    count = 0
    offsets = NEIGHBOURS_3D[params.connectivity]
    for start in np.ndindex(values.shape):
        if not fg[start] or labels[start]:
            continue
        count += 1
        labels[start] = count
        queue = deque([start])
        while queue:
            z, y, x = queue.popleft()
            for dz, dy, dx in offsets:
                n = (z + dz, y + dy, x + dx)
                if not (0 <= n[0] < depth and 0 <= n[1] < height and 0 <= n[2] < width):
                    continue
                if not fg[n] or labels[n]:
                    continue
                if tau is not None and not joins(
                    values[z, y, x],
                    values[n],
                    tau,
                    getattr(params, "tau_relative", 0.0),
                    getattr(params, "tau_quadratic", 0.0),
                ):
                    continue
                labels[n] = count
                queue.append(n)
    return labels


def scipy_volume(mask: np.ndarray, connectivity: int) -> tuple[np.ndarray, int]:
    """scipy.ndimage.label of a boolean volume with the connectivity's structure."""
    structure = ndi.generate_binary_structure(3, SCIPY_RANK3[connectivity])
    labels, count = ndi.label(mask, structure)
    return labels, int(count)


def cc3d_volume(values: np.ndarray, connectivity: int, delta: int | None = None) -> np.ndarray:
    """cc3d's labels of a uint volume (0 = background): binary, or with `delta` (tau on
    integers), renumbered in raster order of first voxels (cc3d's own order is not
    promised)."""
    if delta is None:
        raw = cc3d.connected_components(values != 0, connectivity=connectivity)
    else:
        raw = cc3d.connected_components(values, connectivity=connectivity, delta=delta)
    return raster_order(np.asarray(raw))


def raster_order(labels: np.ndarray) -> np.ndarray:
    """Any labeling (0 = background) renumbered 1..K in raster order of first voxels."""
    flat = labels.ravel()
    ids, first = np.unique(flat, return_index=True)
    keep = ids != 0
    ids, first = ids[keep], first[keep]
    order = ids[np.argsort(first)]
    lookup = {int(old): new for new, old in enumerate(order, start=1)}
    out = np.zeros(flat.shape, np.int64)
    for index, value in enumerate(flat.tolist()):
        if value:
            out[index] = lookup[value]
    return out.reshape(labels.shape)


def filter_min_area_3d(labels: np.ndarray, min_area: int) -> np.ndarray:
    """Components of fewer than min_area voxels removed, the rest renumbered in order."""
    counts = np.bincount(labels.ravel())
    lookup = np.zeros(len(counts), np.int64)
    new = 0
    for old in range(1, len(counts)):
        if counts[old] >= min_area:
            new += 1
            lookup[old] = new
    return lookup[labels]


def volume_stats(labels: np.ndarray, values: np.ndarray) -> list[dict[str, float]]:
    """Per component 1..max: voxels, bounding box, centroid (exact Python sums, one
    division), the exact mean (math.fsum) and min and max of the values."""
    rows = []
    for label in range(1, int(labels.max(initial=0)) + 1):
        zs, ys, xs = np.nonzero(labels == label)
        voxels = [float(v) for v in values[zs, ys, xs]]
        area = len(voxels)
        finite = all(map(math.isfinite, voxels))
        rows.append(
            {
                "area": area,
                "x": int(xs.min()),
                "y": int(ys.min()),
                "z": int(zs.min()),
                "width": int(xs.max() - xs.min() + 1),
                "height": int(ys.max() - ys.min() + 1),
                "depth": int(zs.max() - zs.min() + 1),
                "centroid_x": sum(map(int, xs)) / area,
                "centroid_y": sum(map(int, ys)) / area,
                "centroid_z": sum(map(int, zs)) / area,
                "exact_mean": (math.fsum(voxels) if finite else sum(voxels)) / area,
                "min": min(voxels),
                "max": max(voxels),
            }
        )
    return rows


def grouped_stats(labels: np.ndarray, values: np.ndarray) -> dict[str, np.ndarray]:
    """Per component 1..max of `labels`, by numpy and scipy.ndimage alone (vectorized, for
    volumes of many components): voxels, bounding box (scipy.ndimage.find_objects),
    centroid (exact int64 sums of the coordinates, one division), min and max, and for
    integer values the mean (exact int64 sum, one division) or for float values the
    float-mean rule per component (oracles.rule_float_mean). Every component has voxels."""
    count = int(labels.max(initial=0))
    flat = labels.ravel()
    order = np.argsort(flat, kind="stable")
    starts = np.searchsorted(flat[order], np.arange(1, count + 1))
    area = np.diff(np.append(starts, flat.size))
    zs, ys, xs = (axis.ravel()[order] for axis in np.indices(labels.shape, dtype=np.int64))
    picked = values.ravel()[order]
    boxes = ndi.find_objects(labels)
    out: dict[str, np.ndarray] = {
        "area": area,
        "x": np.array([box[2].start for box in boxes]),
        "y": np.array([box[1].start for box in boxes]),
        "z": np.array([box[0].start for box in boxes]),
        "width": np.array([box[2].stop - box[2].start for box in boxes]),
        "height": np.array([box[1].stop - box[1].start for box in boxes]),
        "depth": np.array([box[0].stop - box[0].start for box in boxes]),
        "min": np.minimum.reduceat(picked, starts).astype(np.float64),
        "max": np.maximum.reduceat(picked, starts).astype(np.float64),
    }
    for name, axis in (("centroid_x", xs), ("centroid_y", ys), ("centroid_z", zs)):
        out[name] = np.add.reduceat(axis, starts).astype(np.float64) / area
    if values.dtype.kind == "f":
        groups = np.split(picked[starts[0] :].astype(np.float64), starts[1:] - starts[0])
        out["mean"] = np.array([rule_float_mean(group.tolist()) for group in groups])
    else:
        out["mean"] = np.add.reduceat(picked.astype(np.int64), starts).astype(np.float64) / area
    return out
