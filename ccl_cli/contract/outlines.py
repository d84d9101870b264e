"""Polygon outlines of label images (--polygons): the geometry, canonical form and GeoJSON.

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
put them in the one canonical order that `Outlines` defines: the CPU with
`canonical` (numpy, backends/cpu/outlines.py), the CUDA backend with its own kernels
(backends/cuda/outlines.py); the GPU tests compare the arrays and the GeoJSON
bytes of both.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, fields

import numpy as np

#: Directions E (+x), S (+y), W (-x), N (-y) as (row, column) steps; d + 1 is a
#: left turn, d + 3 a right turn. The side of a cell walked in direction d is
#: the one facing step[d + 3] (E: top, S: right, W: bottom, N: left).
STEPS = ((0, 1), (1, 0), (0, -1), (-1, 0))
#: Where an edge of direction d ends, relative to its cell's top-left corner (x, y).
ENDS = ((1, 0), (1, 1), (0, 1), (0, 0))


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


def geojson(outlines: Outlines) -> bytes:
    """The GeoJSON FeatureCollection text: compact, fixed key order, closed rings, one line.

    The same text as json.dumps(..., separators=(",", ":")) of the nested
    structure, built without a Python list per vertex: every vertex is formatted
    in one %-operation and rings are slices of that text.
    """
    vertices = outlines.vertices.astype(np.int64)
    widths = _digits(vertices).sum(axis=1) + 4  # "[x,y],"
    starts = np.zeros(len(vertices) + 1, np.int64)
    np.cumsum(widths, out=starts[1:])
    text = ("[%d,%d]," * len(vertices)) % tuple(vertices.ravel().tolist())
    at = starts.tolist()
    ring_offsets = outlines.ring_offsets.tolist()
    rings = [
        f"[{text[at[a] : at[b]]}{text[at[a] : at[a + 1] - 1]}]"
        for a, b in itertools.pairwise(ring_offsets)
    ]
    part_offsets = outlines.part_offsets.tolist()
    polygons = ["[" + ",".join(rings[a:b]) + "]" for a, b in itertools.pairwise(part_offsets)]
    feature_offsets = outlines.feature_offsets.tolist()
    features = []
    for k, area in enumerate(outlines.areas.tolist()):
        first, last = feature_offsets[k], feature_offsets[k + 1]
        if last - first == 1:
            geometry = f'{{"type":"Polygon","coordinates":{polygons[first]}}}'
        else:
            parts = ",".join(polygons[first:last])
            geometry = f'{{"type":"MultiPolygon","coordinates":[{parts}]}}'
        features.append(
            f'{{"type":"Feature","properties":{{"label":{k + 1},"area":{area}}},'
            f'"geometry":{geometry}}}'
        )
    body = ",".join(features)
    return f'{{"type":"FeatureCollection","features":[{body}]}}\n'.encode("ascii")


def _digits(values: np.ndarray) -> np.ndarray:
    """Decimal digits of non-negative integers (1 for 0)."""
    digits = np.ones(values.shape, np.int64)
    for power in range(1, 19):
        digits += values >= 10**power
    return digits


@dataclass
class Corners:
    """The corners of every ring of a batch (any order), as the numpy tracer emits them.

    image, label, part: which image, component and 4-connected part (numbered
        in raster order of its first pixel, per image) the ring outlines.
    x, y: the corner.
    next: index of the ring's next corner.
    ring: index of the ring's start corner (its smallest (y, x) vertex).
    position: steps from the start corner along the ring (0 at the start).
    """

    image: np.ndarray
    label: np.ndarray
    part: np.ndarray
    x: np.ndarray
    y: np.ndarray
    next: np.ndarray
    ring: np.ndarray
    position: np.ndarray


def rank_rings(
    x: np.ndarray, y: np.ndarray, nxt: np.ndarray, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """(ring, position) of every corner from the `nxt` cycles, by pointer jumping.

    The start of a ring is its smallest vertex key y * (width + 1) + x (rings
    are simple, so it is unique).
    """
    count = len(nxt)
    steps = max(1, math.ceil(math.log2(max(count, 2))))
    key = y.astype(np.int64) * (width + 1) + x
    low, jump = key, nxt
    for _ in range(steps):
        low, jump = np.minimum(low, low[jump]), jump[jump]
    tail = key[nxt] == low  # the corner before the start
    index = np.arange(count, dtype=nxt.dtype)
    to_tail = (~tail).astype(np.int64)
    jump = np.where(tail, index, nxt)
    for _ in range(steps):
        to_tail, jump = to_tail + to_tail[jump], jump[jump]
    ring = nxt[jump]
    return ring, to_tail[ring] - to_tail


def canonical(corners: Corners, counts: list[int], width: int) -> list[Outlines]:
    """Per image, the Outlines of components 1..counts[i] (the CPU's ordering; the
    CUDA backend reaches the same order with its own kernels, backends/cuda/outlines.py).

    Rings are ordered by (image, label, part, start vertex): parts are numbered
    in raster order of their first pixel, whose top-left corner starts the
    part's exterior, so that is the order of exterior start vertices, and the
    exterior (whose start is the part's smallest vertex) precedes its holes.
    """
    c = corners
    if len(c.position) == 0:  # no components at all
        return [Outlines.empty() for _ in counts]
    starts = np.flatnonzero(c.position == 0)
    lasts = np.flatnonzero(c.position[c.next] == 0)
    length = np.zeros(len(c.position), np.int64)
    length[c.ring[lasts]] = c.position[lasts] + 1
    key = c.y[starts].astype(np.int64) * (width + 1) + c.x[starts]
    image, label, part = c.image[starts], c.label[starts], c.part[starts]
    order = np.lexsort(np.stack([key, part.astype(np.int64), label.astype(np.int64), image]))
    starts, image, label, part = starts[order], image[order], label[order], part[order]
    ring_offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(length[starts], out=ring_offsets[1:])
    rank = np.zeros(len(c.position), np.int64)
    rank[starts] = np.arange(len(starts), dtype=np.int64)
    destination = ring_offsets[rank[c.ring]] + c.position
    vertices = np.empty((len(c.position), 2), np.int32)
    vertices[destination, 0] = c.x
    vertices[destination, 1] = c.y
    new_part = np.ones(len(starts), bool)
    new_part[1:] = (part[1:] != part[:-1]) | (image[1:] != image[:-1])
    part_offsets = np.append(np.flatnonzero(new_part), len(starts))
    new_feature = np.ones(len(part_offsets) - 1, bool)
    part_label, part_image = label[part_offsets[:-1]], image[part_offsets[:-1]]
    new_feature[1:] = (part_label[1:] != part_label[:-1]) | (part_image[1:] != part_image[:-1])
    feature_offsets = np.append(np.flatnonzero(new_feature), len(part_offsets) - 1)
    label_base = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=label_base[1:])
    check_offsets(feature_offsets, int(label_base[-1]))
    twice = np.empty(len(c.position), np.int64)
    twice[destination] = c.x.astype(np.int64) * c.y[c.next] - c.x[c.next].astype(np.int64) * c.y
    feature_starts = ring_offsets[part_offsets[feature_offsets[:-1]]]
    areas = np.add.reduceat(twice, feature_starts) // 2
    return split_batch(vertices, ring_offsets, part_offsets, feature_offsets, areas, label_base)


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
