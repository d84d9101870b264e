"""The chunked labeling as two Dask graphs, each persisted at once (the chunks labeled, then
every step to each chunk's table of final labels); the client gathers only the merge's result.

    read + label each chunk (one fused task) -> Summary (stays on its worker) + Faces
    Faces -> each low plane, the rims (their edges and corners); a chunk's high planes with
      its neighbours' low planes and rims -> seam pairs
    Summary -> the face pieces' partials (and, with largest, each chunk's largest pieces)
    one merge task: union-find, reduced partials, which components stay (merge.py)
    Summary + kept face roots -> line counts -> row scans -> one task: plane bases
    -> final labels of each chunk's roots -> one task: each face component's final label
    -> each chunk's table from its own labels to final ones (held on the workers)
    client: gathers the merge's result and the face components' labels (the statistics)
    read + label each chunk again, mapped through its table -> final labels (lazy)

Every task is a pure function of its inputs, so a task Dask reruns (a worker lost) gives
the same result, and the union-find takes a pair twice as once.
"""

from __future__ import annotations

import operator
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..contract.params import LabelParams
from ..contract.stats import StatsTable
from .geometry import Chunk, Grid
from .graph import Layer, persisted_array
from .merge import Components, Keep, components, largest_cut, top_candidates
from .pieces import ChunkLabeler, Partials, Summary, concat_partials, summarize_block
from .ranks import (
    Finals,
    chunk_lut,
    finals,
    line_counts,
    plane_bases,
    plane_totals,
    relabel,
    row_offsets,
)
from .seams import chunk_pairs, chunk_rims, low_plane, plane_offsets
from .table import stats_table


def face_pieces(summary: Summary) -> tuple[np.ndarray, Partials, int]:
    """The chunk's own labels of its face pieces, their partials, and how many interior
    pieces (whole components) it has."""
    on_face = summary.on_face
    return np.flatnonzero(on_face) + 1, summary.pieces.take(on_face), int((~on_face).sum())


def interior_candidates(
    summary: Summary, keep: Keep, largest: int
) -> tuple[np.ndarray, np.ndarray]:
    """The chunk's `largest` largest interior pieces that pass the area filters."""
    inside = summary.pieces.take(~summary.on_face)
    return top_candidates(inside.area, inside.key, keep, largest)


def face_roots(result: Finals) -> tuple[np.ndarray, np.ndarray, int]:
    """What the face components' labels need of a chunk's Finals: its face roots' keys and
    labels, and how many kept roots the chunk holds."""
    kept = len(result.interior_labels) + len(result.face_root_labels)
    return result.face_root_keys, result.face_root_labels, kept


def interior_rows(result: Finals) -> tuple[Partials, np.ndarray]:
    return result.interior, result.interior_labels


@dataclass
class Solved:
    """A chunked volume whose seams are solved: its labels (lazy, `labels`), `count` (K'),
    `components` (K, before the area filters), and the statistics, all at once (`table`) or
    a slab of chunks along z at a time (`slab_tables`, in label order: every root in a slab
    comes before those of the next). `values` is the volume, `labeler` labels its chunks,
    `luts` holds each chunk's table from its own labels to final ones (a dask array of one
    table a block, held on the workers)."""

    values: Any
    labeler: ChunkLabeler
    luts: Any
    count: int
    components: int
    grid: Grid
    comps: Components
    comp_labels: np.ndarray
    comp_kept: np.ndarray
    rows: list[Any]
    integer_values: bool
    #: Seconds: "solve" (the client's clock, from the call until the merge's result and the
    #: final labels of face components are here), "merge" (the merge task's own: union-find,
    #: reduced partials, kept components).
    seconds: dict[str, float] = field(default_factory=dict)

    def labels(self, dtype: Any = np.uint32) -> Any:
        """The final labels as a lazy dask array of `dtype` (one that holds `count`) with the
        volume's chunks: each chunk read and labeled again (the engine gives the same labels
        as the first time), mapped through its table."""
        return self.values.map_blocks(
            relabel,
            self.luts,
            self.labeler,
            np.dtype(dtype),
            dtype=dtype,
            meta=np.empty((0, 0, 0), dtype),
            name=f"gccl-labels-{uuid.uuid4().hex}",
        )

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


@dataclass
class Merged:
    """The merge task's result: the face components (`comps`), which stay (`comp_kept`,
    under `keep`, whose largest cut is set), each chunk's face pieces that are kept roots
    (`root_kept`, a chunk's face pieces `bounds[n]:bounds[n + 1]` of `comps.of_piece`),
    K before the area filters (`count`), and the task's own seconds."""

    comps: Components
    comp_kept: np.ndarray
    keep: Keep
    root_kept: list[np.ndarray]
    bounds: np.ndarray
    count: int
    seconds: float


def merge_faces(
    face_parts: list[tuple[np.ndarray, Partials, int]],
    pairs: list[np.ndarray],
    candidates: list[tuple[np.ndarray, np.ndarray]],
    floats: bool,
    keep: Keep,
    largest: int | None,
) -> Merged:
    """The union-find over the face pieces, their reduced partials, which components stay."""
    began = time.perf_counter()
    comps = components([part[1] for part in face_parts], pairs, floats)
    whole = comps.whole
    if largest is not None:
        passing = keep.by_area(whole.area)
        cut = largest_cut([*candidates, (whole.area[passing], whole.key[passing])], largest)
        keep = Keep(keep.min_area, keep.max_area, cut)
    comp_kept = keep(whole.area, whole.key)
    piece_keys = concat_partials([part[1] for part in face_parts]).key
    is_root_kept = (piece_keys == whole.key[comps.of_piece]) & comp_kept[comps.of_piece]
    bounds = np.cumsum([0] + [len(part[0]) for part in face_parts])
    root_kept = [is_root_kept[bounds[n] : bounds[n + 1]] for n in range(len(face_parts))]
    count = len(whole) + sum(part[2] for part in face_parts)
    seconds = time.perf_counter() - began
    return Merged(comps, comp_kept, keep, root_kept, bounds, count, seconds)


def chunk_root_kept(merged: Merged, n: int) -> np.ndarray:
    return merged.root_kept[n]


def merged_keep(merged: Merged) -> Keep:
    return merged.keep


def component_labels(
    merged: Merged, roots: list[tuple[np.ndarray, np.ndarray, int]]
) -> tuple[np.ndarray, int]:
    """Each face component's final label (0 where removed), and K' (every kept root)."""
    whole = merged.comps.whole
    comp_labels = np.zeros(len(whole), np.uint32)
    for keys, labels, _ in roots:
        comp_labels[np.searchsorted(whole.key, keys)] = labels
    comp_labels[~merged.comp_kept] = 0
    return comp_labels, int(sum(kept for _, _, kept in roots))


def chunk_face_finals(merged: Merged, labeled: tuple[np.ndarray, int], n: int) -> np.ndarray:
    """The final labels of chunk n's face pieces (their components')."""
    of_piece = merged.comps.of_piece[merged.bounds[n] : merged.bounds[n + 1]]
    return labeled[0][of_piece]


def solve(array: Any, labeler: ChunkLabeler, params: LabelParams, source: str) -> Solved:
    """Solve the seams of the dask array `array` whose chunks `labeler` labels (with the
    options `params` resolves): the chunks labeled, then one graph from them to each chunk's
    final-label table, each persisted at once; the client then gathers the merge's result
    (face components only)."""
    import dask

    grid = Grid(array.chunks, source)
    chunks = list(grid)
    labeler = replace(labeler, chunks=len(chunks))
    where: dict[tuple[int, ...], int] = {c.index: n for n, c in enumerate(chunks)}
    began = time.perf_counter()

    # Each chunk read and labeled in one task (a blockwise map, which dask fuses with the
    # read); what leaves its worker split into parts.
    tau = params.tau is not None
    (labeled_chunks,) = dask.persist(
        array.map_blocks(
            summarize_block,
            grid,
            labeler,
            tau,
            dtype=object,
            meta=np.empty((0, 0, 0), object),
            name=f"gccl-chunks-{uuid.uuid4().hex}",
        )
    )
    blocks = _nested_keys(labeled_chunks)
    read = Layer("pieces", [labeled_chunks])
    summary_keys = [
        read.add((n, 0), operator.getitem, blocks[c.index], 0) for n, c in enumerate(chunks)
    ]
    low_keys = {
        (n, axis): read.add((n, 1, axis), low_plane, blocks[c.index], axis)
        for n, c in enumerate(chunks)
        for axis, side in c.bordered_faces()
        if side == 0
    }
    rim_keys = {}
    if params.connectivity > 6:  # (edges and corners join)
        rim_keys = {
            n: read.add((n, 3), chunk_rims, blocks[c.index])
            for n, c in enumerate(chunks)
            if any(side == 0 for _, side in c.bordered_faces())
        }
    part_keys = [read.add((n, 2), face_pieces, key) for n, key in enumerate(summary_keys)]

    # The pairs across faces (and edges and corners); with largest, each chunk's candidates.
    seams = Layer("seams", [read])
    pair_keys = []
    for n, c in enumerate(chunks):
        across: list[Any] = []
        diagonal: list[Any] = []
        for axis in _upward_axes(c, grid):
            across.append([axis, low_keys[where[_beyond(c.index, axis, (0, 0))], axis]])
            for offset in plane_offsets(params.connectivity):
                other = _beyond(c.index, axis, offset)
                if offset != (0, 0) and grid.contains(other):
                    diagonal.append([axis, offset, rim_keys[where[other]]])
        if across:
            pair_keys.append(
                seams.add((n,), chunk_pairs, blocks[c.index], across, diagonal, params)
            )
    candidate_keys = []
    if params.largest is not None:
        candidate_keys = [
            seams.add((n, 1), interior_candidates, key, Keep.of(params), params.largest)
            for n, key in enumerate(summary_keys)
        ]

    # One task: the union-find, the reduced statistics, which components stay.
    merge = Layer("merge", [seams])
    floats = np.dtype(array.dtype).kind == "f"
    merge_key = merge.add(
        (0,),
        merge_faces,
        part_keys,
        pair_keys,
        candidate_keys,
        floats,
        Keep.of(params),
        params.largest,
    )
    keep_key = merge.add((1,), merged_keep, merge_key)

    # Line counts of kept roots; their scan: rows of chunks, then plane totals in one task.
    counting = Layer("lines", [merge])
    kept_keys = [counting.add((n, 2), chunk_root_kept, merge_key, n) for n in range(len(chunks))]
    count_keys = [
        counting.add((n,), line_counts, summary_keys[n], kept_keys[n], keep_key, c)
        for n, c in enumerate(chunks)
    ]
    total_keys = [counting.add((n, 0), plane_totals, key) for n, key in enumerate(count_keys)]
    row_keys = {
        (i, j): counting.add(
            (i, j, 1), row_offsets, [count_keys[where[i, j, k]] for k in range(grid.grid[2])]
        )
        for i in range(grid.grid[0])
        for j in range(grid.grid[1])
    }
    scan = Layer("bases", [counting])
    all_bases = scan.add((0,), _bases, grid, total_keys)
    ranking = Layer("finals", [scan])
    final_keys = [
        ranking.add(
            (n,),
            finals,
            summary_keys[n],
            kept_keys[n],
            keep_key,
            c,
            (operator.getitem, all_bases, n),
            row_keys[c.index[:2]],
        )
        for n, c in enumerate(chunks)
    ]

    # Each face component's final label; each chunk's table from its own labels to final ones.
    naming = Layer("names", [ranking])
    root_keys = [naming.add((n, 0), face_roots, key) for n, key in enumerate(final_keys)]
    labeled_key = naming.add((0,), component_labels, merge_key, root_keys)
    face_final_keys = [
        naming.add((n, 1), chunk_face_finals, merge_key, labeled_key, n) for n in range(len(chunks))
    ]
    lut_layer = Layer("luts", [naming])
    lut_keys = [
        lut_layer.add(c.index, chunk_lut, final_keys[n], part_keys[n], face_final_keys[n])
        for n, c in enumerate(chunks)
    ]

    wanted = [merge_key, labeled_key, *final_keys, *lut_keys]
    held = dict(zip(wanted, dask.persist(*lut_layer.delayed(wanted)), strict=True))
    merged, (comp_labels, count) = dask.compute(held[merge_key], held[labeled_key])

    luts = persisted_array(lut_layer, held, array.chunks)
    rows = _each(Layer("rows", [held[key] for key in final_keys]), final_keys, interior_rows)
    integer_values = np.dtype(array.dtype).kind in "biu"
    seconds = {"solve": time.perf_counter() - began, "merge": merged.seconds}
    return Solved(
        array,
        labeler,
        luts,
        count,
        merged.count,
        grid,
        merged.comps,
        comp_labels,
        merged.comp_kept,
        rows,
        integer_values,
        seconds,
    )


def _bases(grid: Grid, totals: list[np.ndarray]) -> list[np.ndarray]:
    """The kept roots before each plane of each chunk (chunks in grid order), from each
    chunk's plane totals: the slabs of chunks before, then plane_bases within its slab."""
    nj, nk = grid.grid[1], grid.grid[2]
    per_slab = nj * nk
    bases: list[np.ndarray] = []
    start = 0
    for i in range(grid.grid[0]):
        slab = np.array(totals[i * per_slab : (i + 1) * per_slab]).reshape(nj, nk, -1)
        bases += list((start + plane_bases(slab)).reshape(per_slab, -1))
        start += int(slab.sum())
    return bases


def _each(layer: Layer, keys: list[Any], function: Any) -> list[Any]:
    """function(result) of each task of `keys`, as Delayed objects of `layer`."""
    for n, key in enumerate(keys):
        layer.add((n,), function, key)
    return layer.delayed()


def _nested_keys(array: Any) -> np.ndarray:
    """The keys of a 3-D dask array's blocks, as an object array indexed like its grid."""
    nested = array.__dask_keys__()
    shape = tuple(len(sizes) for sizes in array.chunks)
    out = np.empty(shape, object)
    for index in np.ndindex(*shape):
        i, j, k = index
        out[index] = nested[i][j][k]
    return out


def _upward_axes(chunk: Chunk, grid: Grid) -> list[int]:
    """The axes along which a chunk lies beyond `chunk`."""
    return [axis for axis in range(3) if chunk.index[axis] < grid.grid[axis] - 1]


def _beyond(index: tuple[int, int, int], axis: int, offset: tuple[int, int]) -> tuple[int, ...]:
    """The chunk past `index` along `axis`, at `offset` along the two other axes."""
    moved = list(index)
    moved[axis] += 1
    others = [b for b in range(3) if b != axis]
    moved[others[0]] += offset[0]
    moved[others[1]] += offset[1]
    return tuple(moved)
