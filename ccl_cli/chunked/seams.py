"""The pairs of pieces that join across a boundary plane between chunks (on a worker).

A chunk's task pairs the voxels of its high plane along one axis with their neighbours in
the next plane, which lie in the chunk beyond it and, one voxel off its edges, in the chunks
beside that one (with 18- and 26-connectivity: edges and corners). Every pair of neighbours
in two chunks crosses some axis's boundary plane upward from one of them, so these tasks
find them all (some twice, which a union-find takes as once).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..contract.params import LabelParams, tau_joins
from .pieces import Faces

#: A neighbouring chunk beyond the boundary, by its offset (db, dc) along the plane's two axes.
Offset = tuple[int, int]


def plane_offsets(connectivity: int) -> list[Offset]:
    """The in-plane offsets of a voxel's neighbours in the next plane: 6-connectivity the
    one straight across, 18 also the four sharing an edge, 26 all nine."""
    every = [(db, dc) for db in (-1, 0, 1) for dc in (-1, 0, 1)]
    most = {6: 0, 18: 1, 26: 2}[connectivity]
    return [(db, dc) for db, dc in every if abs(db) + abs(dc) <= most]


def seam_pairs(
    keys: np.ndarray,
    values: np.ndarray | None,
    beyond: dict[Offset, tuple[np.ndarray, np.ndarray | None]],
    params: LabelParams,
) -> np.ndarray:
    """The distinct (key, key) pairs that join across the plane (int64, shape (n, 2)).

    keys, values: this chunk's high plane (keys + 1, 0 for no foreground; values in tau
    mode). beyond: the low planes of the chunks past it, at each in-plane offset present.
    """
    rows, cols = keys.shape
    # The next plane, one voxel wider on each side, from the chunks beyond.
    far_keys = np.zeros((rows + 2, cols + 2), np.int64)
    far_values = None if values is None else np.zeros((rows + 2, cols + 2), values.dtype)
    for (db, dc), (other_keys, other_values) in beyond.items():
        into = (_into(db, rows), _into(dc, cols))
        far_keys[into] = other_keys
        if far_values is not None and other_values is not None:
            far_values[into] = other_values
    found = []
    for db, dc in plane_offsets(params.connectivity):
        there = far_keys[1 + db : 1 + db + rows, 1 + dc : 1 + dc + cols]
        joins = (keys > 0) & (there > 0)
        if far_values is not None and values is not None:
            across = far_values[1 + db : 1 + db + rows, 1 + dc : 1 + dc + cols]
            joins &= tau_joins(
                values,
                across,
                float(params.tau if params.tau is not None else 0),
                np,
                params.tau_relative,
                params.tau_quadratic,
            )
        if joins.any():
            found.append(_runs(keys[joins], there[joins]))
    if not found:
        return np.zeros((0, 2), np.int64)
    pairs = np.unique(np.concatenate(found), axis=0) - 1  # keys + 1 back to keys
    return pairs.astype(np.int64)


def _runs(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The pairs (first, second) without those equal to the one before: neighbours along a
    row mostly pair the same two pieces, so the sort that makes the pairs distinct gets few."""
    new = np.ones(len(first), bool)
    new[1:] = (first[1:] != first[:-1]) | (second[1:] != second[:-1])
    return np.stack([first[new], second[new]], axis=1)


def band(plane: np.ndarray, offset: Offset) -> np.ndarray:
    """The part of a neighbouring chunk's low plane next to a plane at `offset` from it: its
    last row (column) for a chunk before along that axis, its first for one after, all of it
    for one straight across."""
    rows, cols = (_part(d) for d in offset)
    return np.ascontiguousarray(plane[rows, cols])


def _part(offset: int) -> slice:
    return slice(-1, None) if offset < 0 else slice(0, 1) if offset > 0 else slice(None)


def _into(offset: int, inner: int) -> slice:
    """Where a band lands in the widened plane along one axis."""
    return (
        slice(0, 1)
        if offset < 0
        else slice(inner + 1, inner + 2)
        if offset > 0
        else slice(1, inner + 1)
    )


def low_planes(faces: Faces) -> dict[int, tuple[np.ndarray, np.ndarray | None]]:
    """A chunk's low planes (keys, and values in tau mode) by axis: what the chunk before it
    along that axis pairs its high plane with."""
    return {
        axis: (faces.keys[axis, side], faces.values.get((axis, side)))
        for axis, side in faces.keys
        if side == 0
    }


def rims(faces: Faces) -> dict[tuple[int, Offset], tuple[np.ndarray, np.ndarray | None]]:
    """The edges and corners of a chunk's low planes (`band` at each diagonal offset), by
    (axis, offset): what the chunks before it diagonally pair their high planes with."""
    found = {}
    for axis, (keys, values) in low_planes(faces).items():
        for offset in plane_offsets(26):
            if offset != (0, 0):
                cut = None if values is None else band(values, offset)
                found[axis, offset] = (band(keys, offset), cut)
    return found


def low_plane(labeled: tuple[Any, Faces], axis: int) -> tuple[np.ndarray, np.ndarray | None]:
    """A chunk's low plane along `axis` (keys, and values in tau mode; `labeled`: its Summary
    and Faces): what the chunk before it along that axis pairs its high plane with. A task of
    its own per axis, so that a neighbour takes only the plane it borders."""
    return low_planes(labeled[1])[axis]


def chunk_rims(labeled: tuple[Any, Faces]) -> dict[tuple[int, Offset], Any]:
    """A chunk's rims (`labeled`: its Summary and Faces): the few voxels the chunks before it
    diagonally pair their high planes with."""
    return rims(labeled[1])


def chunk_pairs(
    labeled: tuple[Any, Faces],
    across: list[tuple[int, Any]],
    diagonal: list[tuple[int, Offset, Any]],
    params: LabelParams,
) -> np.ndarray:
    """seam_pairs across each of the chunk's high planes that border a chunk (`labeled`: its
    Summary and Faces): `across` gives (axis, the low_plane of the chunk beyond along it),
    `diagonal` (axis, offset, the chunk_rims of the chunk there)."""
    faces = labeled[1]
    found = [np.zeros((0, 2), np.int64)]
    for axis, plane in across:
        bands: dict[Offset, tuple[np.ndarray, np.ndarray | None]] = {(0, 0): plane}
        for rim_axis, offset, rims_there in diagonal:
            if rim_axis == axis:
                bands[tuple(offset)] = rims_there[axis, tuple(offset)]  # type: ignore[index]
        found.append(seam_pairs(faces.keys[axis, 1], faces.values.get((axis, 1)), bands, params))
    return np.concatenate(found)
