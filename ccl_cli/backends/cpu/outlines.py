"""The CPU's polygon tracer: ring corners of a label image with numpy (contract/outlines.py
defines the geometry and the canonical order)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...contract.outlines import (
    ENDS,
    PART_CONNECTIVITY,
    STEPS,
    Corners,
    Outlines,
    canonical,
    rank_rings,
)
from ...contract.params import LabelParams
from .labels import raster_components


def outlines(labels: np.ndarray, count: int) -> Outlines:
    """The Outlines of components 1..count of one (H, W) label image, on the CPU."""
    return canonical(trace(labels), [count], labels.shape[1])[0]


def trace(labels: np.ndarray) -> Corners:
    """The corners of every ring of one label image (numpy), with their ring order."""
    height, width = labels.shape
    parts, _ = raster_components(
        labels, LabelParams(tau=0, connectivity=PART_CONNECTIVITY, background=0)
    )
    padded = np.pad(parts, 1)
    rows, cols = np.indices((height, width))

    def at(dr: int, dc: int) -> np.ndarray:
        return padded[1 + dr : 1 + dr + height, 1 + dc : 1 + dc + width]

    own = at(0, 0)
    pieces = []
    for d, (dr, dc) in enumerate(STEPS):
        rr, rc = STEPS[(d + 3) % 4]
        ahead_left = at(dr, dc) == own
        ahead_right = at(dr + rr, dc + rc) == own
        corner = (own > 0) & (at(rr, rc) != own) & (ahead_right | ~ahead_left)
        r, c = rows[corner], cols[corner]
        turn_right = ahead_right[corner]
        # The next edge: the ahead-right cell walked in direction d + 3, or this cell in d + 1.
        next_d = np.where(turn_right, (d + 3) % 4, (d + 1) % 4)
        next_r = np.where(turn_right, r + dr + rr, r)
        next_c = np.where(turn_right, c + dc + rc, c)
        pieces.append((d, r, c, next_d, next_r, next_c))
    return _chain(pieces, parts, labels, width)


def _chain(
    pieces: list[tuple[Any, ...]], parts: np.ndarray, labels: np.ndarray, width: int
) -> Corners:
    """Corners with `next` (the first corner edge on from each corner's next edge) and ring order.

    The edges after a corner go straight along one grid line until the next
    corner edge of that direction on the line: for E the nearest corner edge
    at or right of it in its row, for W at or left of it, for S and N below or
    above it in its column. Sorted keys per direction and searchsorted find it.
    """
    height = parts.shape[0]
    counts = [len(piece[1]) for piece in pieces]
    base = np.zeros(5, np.int64)
    np.cumsum(counts, out=base[1:])

    def line_key(d: int, r: np.ndarray, c: np.ndarray) -> np.ndarray:
        r, c = r.astype(np.int64), c.astype(np.int64)
        return r * width + c if d % 2 == 0 else c * height + r

    keys = [line_key(d, piece[1], piece[2]) for d, piece in enumerate(pieces)]
    orders = [np.argsort(key, kind="stable") for key in keys]
    sorted_keys = [key[order] for key, order in zip(keys, orders, strict=True)]
    nxt = np.empty(base[-1], np.int64)
    for d, (_, _, _, next_d, next_r, next_c) in enumerate(pieces):
        for e in range(4):
            pick = next_d == e
            target = line_key(e, next_r[pick], next_c[pick])
            if e in (0, 1):  # E, S: the first corner edge at or after the target
                slot = np.searchsorted(sorted_keys[e], target, side="left")
            else:  # W, N: the last at or before it
                slot = np.searchsorted(sorted_keys[e], target, side="right") - 1
            nxt[base[d] : base[d + 1]][pick] = base[e] + orders[e][slot]
    r = np.concatenate([piece[1] for piece in pieces])
    c = np.concatenate([piece[2] for piece in pieces])
    d_all = np.repeat(np.arange(4), counts)
    x = (c + np.take([end[0] for end in ENDS], d_all)).astype(np.int32)
    y = (r + np.take([end[1] for end in ENDS], d_all)).astype(np.int32)
    ring, position = rank_rings(x, y, nxt, width)
    return Corners(
        image=np.zeros(len(x), np.int64),
        label=labels[r, c],
        part=parts[r, c],
        x=x,
        y=y,
        next=nxt,
        ring=ring,
        position=position,
    )
