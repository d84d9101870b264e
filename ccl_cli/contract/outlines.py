"""Polygon outlines of label images (--polygons): the geometry and the canonical form.

Geometry. Pixel (r, c) is the square [c, c+1] x [r, r+1]; vertices are pixel
corners (x = column, y = row). Every component is split into its 4-connected
parts (label equality, 4-connectivity); each part is one polygon: the outline
between it and each 4-connected piece of everything else. A boundary edge is a
side of a part's cell whose neighbour is another part (or outside), directed
with the cell on its left, so exteriors have positive and holes negative
shoelace area on the (x, y) numbers. Where an edge ends, the trace continues
with the cell ahead-right if it is in the part (turn right), else the cell
ahead-left (straight), else the same cell (turn left). Turning right first
keeps a part whole at a diagonal pinch of its own cells (the two complement
pieces there get one ring each, touching at the point); two parts meeting
diagonally are separate polygons touching at the point. Every ring is simple,
so every Polygon and MultiPolygon is valid (OGC, shapely is_valid).

Both backends trace the same corners (the vertices where a trace turns) and
put them in the one canonical order that `Outlines` defines: the CPU with its
compiled tracer (ccl_cli/native/src/outline.c, backends/cpu/outlines.py), the
CUDA backend with its own kernels (backends/cuda/outlines.py); the GPU tests
compare the arrays and the GeoJSON bytes of both. The GeoJSON text is
ccl_cli/io/geojson.py's.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, fields

import numpy as np


@dataclass(frozen=True)
class Outlines:
    """The outlines of components 1..K of one label image, in canonical order.

    vertices: (V, 2) int32 corners (x, y), ring after ring; each ring starts at
        its smallest (y, x) vertex and is not closed (GeoJSON repeats the start).
    ring_offsets: (R + 1,) int64; ring r is vertices[ring_offsets[r]:ring_offsets[r + 1]].
    part_offsets: (P + 1,) int64 into the rings; one polygon each, exterior
        first, then its holes by start vertex (y, x).
    feature_offsets: (K + 1,) int64 into the parts; component k + 1's polygons,
        ordered by their exterior's start vertex (y, x).
    areas: (K,) int64 pixel count of each component: half the shoelace sum
        over its rings (exact integers).
    """

    vertices: np.ndarray
    ring_offsets: np.ndarray
    part_offsets: np.ndarray
    feature_offsets: np.ndarray
    areas: np.ndarray

    def __len__(self) -> int:
        return len(self.areas)

    @classmethod
    def empty(cls) -> Outlines:
        """No components."""
        offsets = np.zeros(1, np.int64)
        return cls(np.zeros((0, 2), np.int32), offsets, offsets, offsets, np.zeros(0, np.int64))

    def equals(self, other: Outlines) -> bool:
        """Same arrays (dtype, shape, values): what CPU and GPU must produce."""
        return all(
            np.array_equal(getattr(self, f.name), getattr(other, f.name))
            and getattr(self, f.name).dtype == getattr(other, f.name).dtype
            for f in fields(self)
        )

    def rings(self, feature: int) -> list[list[np.ndarray]]:
        """Component `feature + 1` as polygons, each a list of (n, 2) rings (exterior first)."""
        rings, parts = self.ring_offsets, self.part_offsets
        first, last = self.feature_offsets[feature], self.feature_offsets[feature + 1]
        return [
            [self.vertices[rings[r] : rings[r + 1]] for r in range(parts[p], parts[p + 1])]
            for p in range(first, last)
        ]


def check_offsets(feature_offsets: np.ndarray, features: int) -> None:
    """AssertionError unless every one of the batch's features has a polygon."""
    steps = np.diff(feature_offsets)
    if len(feature_offsets) != features + 1 or feature_offsets[0] != 0 or np.any(steps <= 0):
        raise AssertionError("every kept component must have an outline")


def split_batch(
    vertices: np.ndarray,
    ring_offsets: np.ndarray,
    part_offsets: np.ndarray,
    feature_offsets: np.ndarray,
    areas: np.ndarray,
    label_base: np.ndarray,
) -> list[Outlines]:
    """Cut a batch's canonical arrays (offsets over the whole batch, features
    label_base[i]..label_base[i + 1] - 1 of image i) into one Outlines per image."""
    check_offsets(feature_offsets, int(label_base[-1]))
    result = []
    for lo, hi in itertools.pairwise(label_base.tolist()):
        features = feature_offsets[lo : hi + 1]
        parts = part_offsets[features[0] : features[-1] + 1]
        rings = ring_offsets[parts[0] : parts[-1] + 1]
        result.append(
            Outlines(
                vertices=vertices[rings[0] : rings[-1]],
                ring_offsets=rings - rings[0],
                part_offsets=parts - parts[0],
                feature_offsets=features - features[0],
                areas=areas[lo:hi],
            )
        )
    return result


PART_CONNECTIVITY = 4
