"""A reference tracer of polygon outlines, written from the contract's text (docs/design.md,
"GeoJSON outlines: the exact form") without ccl_cli: plain Python over sets of edges, for
small images. It returns the canonical arrays of ccl_cli's Outlines, by field name."""

from __future__ import annotations

from collections import deque

import numpy as np

#: Directions E, S, W, N as (row, column) steps; d + 1 turns left, d + 3 turns right.
STEPS = ((0, 1), (1, 0), (0, -1), (-1, 0))
#: Where an edge walked in direction d ends, from its pixel's top-left corner (x, y).
ENDS = ((1, 0), (1, 1), (0, 1), (0, 0))


def four_connected_parts(labels: np.ndarray) -> np.ndarray:
    """Parts 1..P: pixels of one label joined through shared sides, numbered in raster
    order of their first pixel (breadth-first search); 0 = background."""
    height, width = labels.shape
    parts = np.zeros(labels.shape, np.int64)
    count = 0
    for r in range(height):
        for c in range(width):
            if labels[r, c] == 0 or parts[r, c]:
                continue
            count += 1
            parts[r, c] = count
            queue = deque([(r, c)])
            while queue:
                y, x = queue.popleft()
                for dy, dx in STEPS:
                    ny, nx = y + dy, x + dx
                    if (
                        0 <= ny < height
                        and 0 <= nx < width
                        and not parts[ny, nx]
                        and labels[ny, nx] == labels[y, x]
                    ):
                        parts[ny, nx] = count
                        queue.append((ny, nx))
    return parts


def reference_outlines(labels: np.ndarray, count: int) -> dict[str, np.ndarray]:
    """vertices, ring_offsets, part_offsets, feature_offsets and areas of labels 1..count."""
    parts = four_connected_parts(labels)
    height, width = labels.shape

    def part(r: int, c: int) -> int:
        return int(parts[r, c]) if 0 <= r < height and 0 <= c < width else 0

    # A boundary edge: side d + 3 of a part's pixel faces another part or the outside.
    edges = {
        (r, c, d)
        for r in range(height)
        for c in range(width)
        for d in range(4)
        if parts[r, c] and part(r + STEPS[(d + 3) % 4][0], c + STEPS[(d + 3) % 4][1]) != parts[r, c]
    }
    rings = []
    for first in sorted(edges):
        if first not in edges:  # on a ring traced already
            continue
        r, c, d = first
        own = part(r, c)
        corners = []
        edge = first
        while True:
            edges.discard(edge)
            r, c, d = edge
            (dr, dc), (rr, rc) = STEPS[d], STEPS[(d + 3) % 4]
            end = (c + ENDS[d][0], r + ENDS[d][1])
            if part(r + dr + rr, c + dc + rc) == own:  # turn right
                edge = (r + dr + rr, c + dc + rc, (d + 3) % 4)
                corners.append(end)
            elif part(r + dr, c + dc) == own:  # straight on
                edge = (r + dr, c + dc, d)
            else:  # turn left
                edge = (r, c, (d + 1) % 4)
                corners.append(end)
            if edge == first:
                break
        start = min(range(len(corners)), key=lambda k: (corners[k][1], corners[k][0]))
        corners = corners[start:] + corners[:start]
        label = int(labels[first[0], first[1]])
        rings.append(((label, own, corners[0][1], corners[0][0]), corners))
    rings.sort(key=lambda ring: ring[0])
    vertices = [vertex for _, corners in rings for vertex in corners]
    ring_offsets = np.cumsum([0] + [len(corners) for _, corners in rings])
    new_part = [k for k, ring in enumerate(rings) if k == 0 or ring[0][:2] != rings[k - 1][0][:2]]
    part_labels = [rings[k][0][0] for k in new_part]
    new_feature = [
        k for k, label in enumerate(part_labels) if k == 0 or label != part_labels[k - 1]
    ]
    return {
        "vertices": np.array(vertices, np.int32).reshape(-1, 2),
        "ring_offsets": ring_offsets.astype(np.int64),
        "part_offsets": np.array([*new_part, len(rings)], np.int64),
        "feature_offsets": np.array([*new_feature, len(part_labels)], np.int64),
        "areas": np.bincount(labels.ravel(), minlength=count + 1)[1:].astype(np.int64),
    }
