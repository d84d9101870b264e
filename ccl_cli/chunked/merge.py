"""The seams solved in one task: a union-find over the pieces on chunk faces, their
partial statistics reduced to whole components, and which components are kept.

Its inputs are face summaries only (the face pieces' partials and the pairs that join
across faces), so its memory grows with the pieces on faces, never with voxels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..contract.params import LabelParams
from .pieces import Partials, concat_partials, empty_partials


@dataclass(frozen=True)
class Keep:
    """Which whole components stay: min_area <= area <= max_area and, with largest, at or
    above `cut` = (area, key) of the largest-th component in the order larger area first,
    then smaller key (lower label) first."""

    min_area: int
    max_area: int | None
    cut: tuple[int, int] | None = None

    @classmethod
    def of(cls, params: LabelParams) -> Keep:
        return cls(int(params.min_area), params.max_area)

    def by_area(self, area: np.ndarray) -> np.ndarray:
        keep = area >= self.min_area
        if self.max_area is not None:
            keep &= area <= self.max_area
        return keep

    def __call__(self, area: np.ndarray, key: np.ndarray) -> np.ndarray:
        keep = self.by_area(area)
        if self.cut is not None:
            cut_area, cut_key = self.cut
            keep &= (area > cut_area) | ((area == cut_area) & (key <= cut_key))
        return keep


def largest_cut(
    candidates: list[tuple[np.ndarray, np.ndarray]], largest: int
) -> tuple[int, int] | None:
    """The (area, key) of the `largest`-th component among `candidates` ((area, key) arrays of
    components that pass the area filters, each chunk's largest ones among them), or None
    when there are no more than `largest` of them."""
    area = np.concatenate([c[0] for c in candidates]) if candidates else np.zeros(0, np.int64)
    key = np.concatenate([c[1] for c in candidates]) if candidates else np.zeros(0, np.int64)
    if len(area) <= largest:
        return None
    order = np.lexsort((key, -area))
    last = order[largest - 1]
    return int(area[last]), int(key[last])


def top_candidates(
    area: np.ndarray, key: np.ndarray, keep: Keep, largest: int
) -> tuple[np.ndarray, np.ndarray]:
    """The `largest` first of (area, key) that pass the area filters, in the order of Keep."""
    passing = keep.by_area(area)
    area, key = area[passing], key[passing]
    order = np.lexsort((key, -area))[:largest]
    return area[order], key[order]


@dataclass
class Components:
    """The components of the face pieces: `of_piece[i]` is face piece i's component (the
    pieces in the order given), `whole` their reduced partials (key: the root's, the
    smallest of its pieces' keys), `pieces` how many pieces each has."""

    of_piece: np.ndarray
    whole: Partials
    pieces: np.ndarray


def union_find(keys: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """For each of `keys` (distinct), the smallest key of its component, where `pairs`
    (rows of two keys, each one of `keys`) join.

    Hook and compress on indices in key order: every pair hooks the larger root under the
    smaller, then paths are halved until each points at its root; repeated until no pair
    joins two roots. Idempotent: pairs given twice change nothing.
    """
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    parent = np.arange(len(keys), dtype=np.int64)
    if len(pairs):
        ends = np.searchsorted(ordered, pairs.reshape(-1)).reshape(-1, 2)
        if not np.array_equal(ordered[ends], pairs):
            raise ValueError("a seam pair names a piece that is on no face")
        while True:
            first, second = parent[ends[:, 0]], parent[ends[:, 1]]
            apart = first != second
            if not apart.any():
                break
            low, high = np.minimum(first, second)[apart], np.maximum(first, second)[apart]
            np.minimum.at(parent, high, low)
            parent = _compress(parent)
            ends = ends[apart]
    root = np.empty(len(keys), np.int64)
    root[order] = ordered[parent]
    return root


def _compress(parent: np.ndarray) -> np.ndarray:
    while True:
        up = parent[parent]
        if np.array_equal(up, parent):
            return parent
        parent = up


def components(face: list[Partials], pairs: list[np.ndarray], floats: bool) -> Components:
    """The face pieces of every chunk (`face`, one list per chunk, concatenated in that order)
    joined by `pairs` into components, with their partials reduced."""
    pieces = concat_partials(face) if face else None
    if pieces is None or len(pieces) == 0:
        return Components(np.zeros(0, np.int64), empty_partials(), np.zeros(0, np.int64))
    joined = np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64)
    root = union_find(pieces.key, joined)
    roots, of_piece = np.unique(root, return_inverse=True)
    order = np.argsort(of_piece, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(of_piece[order]) != 0])
    sorted_pieces = pieces.take(order)
    whole = reduce_partials(sorted_pieces, starts, floats)
    whole.key = roots
    return Components(of_piece, whole, np.diff(np.r_[starts, len(order)]))


def reduce_partials(pieces: Partials, starts: np.ndarray, floats: bool) -> Partials:
    """Partials of groups of consecutive pieces (group g: starts[g] to the next start):
    exact integer sums, bounding boxes, extremes in IEEE totalOrder (-0.0 below +0.0)."""
    area = np.add.reduceat(pieces.area, starts)
    value_sum = np.add.reduceat(pieces.value_sum, starts)
    counts = np.diff(np.r_[starts, len(pieces)])
    with np.errstate(invalid="ignore", over="ignore"):
        if floats:
            mean = np.where(counts == 1, pieces.mean[starts], value_sum / area)
        else:
            mean = value_sum.astype(np.float64) / area
    v_min = _signed_zero(np.minimum.reduceat(pieces.v_min, starts), pieces.v_min, starts, True)
    v_max = _signed_zero(np.maximum.reduceat(pieces.v_max, starts), pieces.v_max, starts, False)
    if floats:
        mean = np.where(v_max == np.inf, np.inf, mean)
        mean = np.where(v_min == -np.inf, -np.inf, mean)
        mean = np.where((v_max == np.inf) & (v_min == -np.inf), np.nan, mean)
    return Partials(
        key=np.minimum.reduceat(pieces.key, starts),
        area=area,
        low=np.minimum.reduceat(pieces.low, starts, axis=0),
        high=np.maximum.reduceat(pieces.high, starts, axis=0),
        sums=np.add.reduceat(pieces.sums, starts, axis=0),
        value_sum=value_sum,
        mean=mean,
        v_min=v_min,
        v_max=v_max,
    )


def _signed_zero(
    result: np.ndarray, values: np.ndarray, starts: np.ndarray, low: bool
) -> np.ndarray:
    """`result` with a zero extreme given the sign totalOrder gives it: -0.0 for a minimum
    when any piece's minimum is -0.0, +0.0 for a maximum when any piece's maximum is +0.0."""
    negative = np.signbit(values)
    wanted = (values == 0) & (negative if low else ~negative)
    any_wanted = np.logical_or.reduceat(wanted, starts)
    zero = result == 0
    signed = -0.0 if low else 0.0
    other = 0.0 if low else -0.0
    return np.where(zero, np.where(any_wanted, signed, other), result)
