"""Dense labels 1..K in raster order without gathering them: each kept component is counted
at its root (its first voxel, in the chunk that holds it), per line (z, y) of voxels; an
exclusive scan of those counts in raster order of lines gives every chunk the number of
kept components before each of its lines, and so each root's final label.

The scan has two levels, so that the line counts (one number per line of each chunk) stay
on the workers: a task per row of chunks along x scans their lines within each plane; one
task scans the chunks' plane totals (one number per plane of each chunk).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..native import gccl_cpu
from .geometry import Chunk
from .merge import Keep
from .pieces import ChunkLabeler, Partials, Summary, on_host


@dataclass
class Finals:
    """A chunk's kept roots and their final labels: `lut` maps the chunk's own labels to
    final labels for its interior pieces (face pieces are filled in later, from their
    components); `face_roots` the (key, final) of kept components rooted on its faces;
    `interior` the partials of its kept interior pieces, `interior_labels` their finals."""

    lut: np.ndarray
    face_root_keys: np.ndarray
    face_root_labels: np.ndarray
    interior: Partials
    interior_labels: np.ndarray


def kept_roots(summary: Summary, face_root_kept: np.ndarray, keep: Keep) -> np.ndarray:
    """Which of the chunk's pieces are roots of kept components: interior pieces kept by
    their own area, face pieces the merge found to be kept roots (`face_root_kept`, one
    per face piece in the chunk's order)."""
    pieces = summary.pieces
    roots = keep(pieces.area, pieces.key) & ~summary.on_face
    roots[summary.on_face] = face_root_kept
    return roots


def line_counts(
    summary: Summary, face_root_kept: np.ndarray, keep: Keep, chunk: Chunk
) -> np.ndarray:
    """The number of kept roots on each line (z, y) of the chunk, shape (depth, height)."""
    depth, height, _ = chunk.shape
    lines = _lines(summary.pieces.key[kept_roots(summary, face_root_kept, keep)], chunk)
    return np.bincount(lines, minlength=depth * height).reshape(depth, height).astype(np.int64)


def _lines(keys: np.ndarray, chunk: Chunk) -> np.ndarray:
    """The chunk's line index (z * height + y, chunk-local) of each voxel of `keys`."""
    _, height, width = chunk.volume_shape
    z = keys // (height * width) - chunk.origin[0]
    y = keys // width % height - chunk.origin[1]
    return z * chunk.shape[1] + y


def plane_totals(counts: np.ndarray) -> np.ndarray:
    """The kept roots of each plane of a chunk (what the bases task adds up)."""
    return counts.sum(axis=1)


def row_offsets(counts: list[np.ndarray]) -> list[np.ndarray]:
    """For a row of chunks along x (their line counts, in order), the kept roots before each
    line of each chunk within its plane: on the row's lines above it, and on the same line
    in the chunks to its left."""
    row = np.sum(counts, axis=0)
    above = np.cumsum(row, axis=1) - row
    left = np.cumsum(counts, axis=0) - np.asarray(counts)
    return [above + left[k] for k in range(len(counts))]


def plane_bases(totals: np.ndarray) -> np.ndarray:
    """From the plane totals of one slab of chunks (rows of chunks along y, chunks along x,
    planes), the kept roots before each plane of each chunk within the slab: on the slab's
    planes above, and on the same plane in the rows of chunks before (shape as `totals`)."""
    per_plane = totals.sum(axis=(0, 1))
    above = np.cumsum(per_plane) - per_plane
    rows = totals.sum(axis=1)  # (rows, planes)
    before_row = np.cumsum(rows, axis=0) - rows
    return np.broadcast_to(above + before_row[:, None, :], totals.shape)


def finals(
    summary: Summary,
    face_root_kept: np.ndarray,
    keep: Keep,
    chunk: Chunk,
    base: np.ndarray,
    row: list[np.ndarray],
) -> Finals:
    """Final labels of the chunk's kept roots: the kept roots before their plane in the
    volume (`base`, per plane of the chunk) and before their line within it (`row`, the
    chunk's row_offsets: row[x index]), plus those on the line to their left in the chunk,
    plus one."""
    offsets = base[:, None] + row[chunk.index[2]]
    pieces = summary.pieces
    roots = kept_roots(summary, face_root_kept, keep)
    where = np.flatnonzero(roots)  # in key order: the chunk's labels are
    lines = _lines(pieces.key[where], chunk)
    on_line = np.arange(len(lines)) - np.searchsorted(lines, lines, side="left")
    labels = offsets.reshape(-1)[lines] + on_line + 1
    lut = np.zeros(len(pieces) + 1, np.uint32)
    interior = ~summary.on_face[where]
    lut[where[interior] + 1] = labels[interior]
    return Finals(
        lut=lut,
        face_root_keys=pieces.key[where[~interior]],
        face_root_labels=labels[~interior],
        interior=pieces.take(where[interior]),
        interior_labels=labels[interior],
    )


def chunk_lut(
    result: Finals, face_parts: tuple[np.ndarray, Any, int], face_finals: np.ndarray
) -> np.ndarray:
    """The chunk's table from its own labels to final ones: its interior roots' (`result`)
    and its face pieces' (their own labels `face_parts[0]`, their components' finals)."""
    table = result.lut.copy()
    table[face_parts[0]] = face_finals
    return table


def relabel(
    values: np.ndarray, lut: np.ndarray, labeler: ChunkLabeler, dtype: np.dtype
) -> np.ndarray:
    """The chunk's final labels (`dtype`): labeled again alone (the same labels as the first
    time: the engine is deterministic), mapped through its table `lut` (on the device for
    device labels, which then come back in `dtype`)."""
    labels, _ = labeler(values, stats=False)
    table = lut.astype(dtype)
    if not isinstance(labels, np.ndarray):
        from ..backends.cuda.loader import import_cupy

        if int(labels.max()) >= len(table):  # (as map_labels checks on the host)
            raise ValueError("relabel: a label past the chunk's table")
        return on_host(import_cupy().asarray(table)[labels])
    out = np.empty(labels.shape, dtype)
    gccl_cpu.map_labels(np.ascontiguousarray(labels, np.uint32), table, out)
    return out
