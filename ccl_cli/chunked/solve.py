"""The chunked labeling as Dask tasks, and the client's part between them.

    read + label each chunk -> Summary (stays on its worker) + Faces
    Faces of neighbours -> seam pairs                      } gathered: face summaries only
    Summary -> the face pieces' partials (and, with largest, each chunk's largest pieces)
    client: union-find, reduced partials, which components stay (merge.py)
    Summary + kept face roots -> line counts -> scan -> final labels of each chunk's roots
    client: each face piece's final label (its component's)
    read + label each chunk again -> final labels (lazy)

Every task is a pure function of its inputs, so a task Dask reruns (a worker lost) gives
the same result, and the union-find takes a pair twice as once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..contract.params import LabelParams
from ..contract.stats import StatsTable
from .geometry import Grid
from .merge import Components, Keep, components, largest_cut, top_candidates
from .pieces import Partials, Summary, concat_partials, summarize
from .ranks import Finals, finals, line_counts, line_offsets, relabel
from .seams import beyond_band, chunk_pairs, plane_offsets
from .table import stats_table


def face_pieces(summary: Summary) -> tuple[np.ndarray, Partials]:
    """The chunk's own labels of its face pieces, and their partials."""
    return np.flatnonzero(summary.on_face) + 1, summary.pieces.take(summary.on_face)


def interior_candidates(summary: Summary, keep: Keep, largest: int) -> tuple[np.ndarray, np.ndarray]:
    """The chunk's `largest` largest interior pieces that pass the area filters."""
    inside = summary.pieces.take(~summary.on_face)
    return top_candidates(inside.area, inside.key, keep, largest)


def face_roots(result: Finals) -> tuple[np.ndarray, np.ndarray, int]:
    """What the client needs of a chunk's Finals: its face roots' keys and labels, and how
    many kept roots the chunk holds."""
    kept = len(result.interior_labels) + len(result.face_root_labels)
    return result.face_root_keys, result.face_root_labels, kept


def interior_rows(result: Finals) -> tuple[Partials, np.ndarray]:
    return result.interior, result.interior_labels


def lut_of(result: Finals) -> np.ndarray:
    return result.lut


@dataclass
class Solved:
    """A chunked volume whose seams are solved: `labels` (lazy), `count` (K'), and the
    statistics, all at once (`table`) or a slab of chunks along z at a time (`slab_tables`,
    in label order: every root in a slab comes before those of the next)."""

    labels: Any
    count: int
    grid: Grid
    comps: Components
    comp_labels: np.ndarray
    comp_kept: np.ndarray
    rows: list[Any]
    integer_values: bool

    def slab_tables(self) -> Iterator[StatsTable]:
        """The statistics, a slab of chunks along z at a time."""
        plane = self.grid.shape[1] * self.grid.shape[2]
        bottoms = np.cumsum(self.grid.chunks[0])
        slab_of_comp = np.searchsorted(bottoms, self.comps.whole.key // plane, side="right")
        per_slab = int(np.prod(self.grid.grid[1:]))
        for slab in range(self.grid.grid[0]):
            chunks = range(slab * per_slab, (slab + 1) * per_slab)
            yield self._table(chunks, self.comp_kept & (slab_of_comp == slab))

    def table(self) -> StatsTable:
        """The statistics of every kept component."""
        return self._table(range(len(self.rows)), self.comp_kept)

    def _table(self, chunks: range, comps: np.ndarray) -> StatsTable:
        import dask

        parts = dask.compute(*[self.rows[n] for n in chunks])
        pieces = [self.comps.whole.take(comps), *(part[0] for part in parts)]
        labels = [self.comp_labels[comps], *(part[1] for part in parts)]
        return stats_table(concat_partials(pieces), np.concatenate(labels), self.integer_values)


def solve(array: Any, options: dict[str, Any], params: LabelParams, source: str) -> Solved:
    """Solve the seams of the dask array `array` labeled with `options` (`params` resolved)."""
    import dask
    import dask.array as da
    from dask import delayed

    grid = Grid(array.chunks, source)
    blocks = array.to_delayed()
    chunks = list(grid)
    tau = params.tau is not None
    made = [delayed(summarize, nout=2, pure=False)(blocks[c.index], c, options, tau) for c in chunks]
    summaries, faces = dask.persist([m[0] for m in made], [m[1] for m in made])
    where = {c.index: n for n, c in enumerate(chunks)}

    pairs = []
    for c in chunks:
        for axis in range(3):
            if c.index[axis] == grid.grid[axis] - 1:
                continue
            others = [b for b in range(3) if b != axis]
            beyond = {}
            for offset in plane_offsets(params.connectivity):
                index = list(c.index)
                index[axis] += 1
                index[others[0]] += offset[0]
                index[others[1]] += offset[1]
                if grid.contains(tuple(index)):
                    beyond[offset] = delayed(beyond_band, pure=False)(faces[where[tuple(index)]], axis, offset)
            pairs.append(delayed(chunk_pairs, pure=False)(faces[where[c.index]], axis, beyond, params))
    keep = Keep.of(params)
    face_parts = [delayed(face_pieces, pure=False)(s) for s in summaries]
    candidates = []
    if params.largest is not None:
        candidates = [delayed(interior_candidates, pure=False)(s, keep, params.largest) for s in summaries]
    face_parts, pairs, candidates = dask.compute(face_parts, pairs, candidates)
    del faces

    floats = np.dtype(array.dtype).kind == "f"
    comps = components([part[1] for part in face_parts], list(pairs), floats)
    whole = comps.whole
    if params.largest is not None:
        passing = keep.by_area(whole.area)
        cut = largest_cut([*candidates, (whole.area[passing], whole.key[passing])], params.largest)
        keep = Keep(keep.min_area, keep.max_area, cut)
    comp_kept = keep(whole.area, whole.key)
    piece_keys = np.concatenate([part[1].key for part in face_parts]) if face_parts else np.zeros(0, np.int64)
    is_root_kept = (piece_keys == whole.key[comps.of_piece]) & comp_kept[comps.of_piece]
    bounds = np.cumsum([0] + [len(part[0]) for part in face_parts])
    root_kept = [is_root_kept[bounds[n] : bounds[n + 1]] for n in range(len(chunks))]

    counts = np.empty(grid.grid, object)
    for n, c in enumerate(chunks):
        task = delayed(line_counts, pure=False)(summaries[n], root_kept[n], keep, c)
        counts[c.index] = da.from_delayed(task, shape=(c.shape[0], c.shape[1], 1), dtype=np.int64)
    offsets = line_offsets(da.block(counts.tolist())).to_delayed()
    results = [
        delayed(finals, pure=False)(summaries[n], root_kept[n], keep, c, offsets[c.index])
        for n, c in enumerate(chunks)
    ]
    (results,) = dask.persist(results)
    del summaries
    roots = dask.compute(*[delayed(face_roots, pure=False)(r) for r in results])

    comp_labels = np.zeros(len(whole), np.uint32)
    for keys, labels, _ in roots:
        comp_labels[np.searchsorted(whole.key, keys)] = labels
    count = int(sum(kept for _, _, kept in roots))
    label_blocks = np.empty(grid.grid, object)
    for n, c in enumerate(chunks):
        own, _ = face_parts[n]
        face_finals = np.where(comp_kept, comp_labels, 0)[comps.of_piece[bounds[n] : bounds[n + 1]]]
        lut = delayed(lut_of, pure=False)(results[n])
        task = delayed(relabel, pure=False)(blocks[c.index], options, lut, own, face_finals.astype(np.uint32))
        label_blocks[c.index] = da.from_delayed(task, shape=c.shape, dtype=np.uint32)
    labels = da.block(label_blocks.tolist())
    rows = [delayed(interior_rows, pure=False)(r) for r in results]
    integer_values = np.dtype(array.dtype).kind in "biu"
    return Solved(labels, count, grid, comps, comp_labels, comp_kept, rows, integer_values)
