"""The grid of chunks of a volume: where each chunk lies, and which of its faces border
another chunk."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..errors import BadValue

#: The most voxels of one chunk: its labels are uint32 and its coordinate sums must stay
#: below 2**51 (pieces.py recovers them exactly from the engine's centroids).
MAX_CHUNK_VOXELS = 1 << 31

#: Chunk sizes along (z, y, x), as dask gives them: a tuple of sizes per axis.
Chunks = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class Chunk:
    """One chunk: its index in the grid, its first voxel, its shape, and the grid's."""

    index: tuple[int, int, int]
    origin: tuple[int, int, int]
    shape: tuple[int, int, int]
    volume_shape: tuple[int, int, int]
    grid: tuple[int, int, int]

    def bordered_faces(self) -> list[tuple[int, int]]:
        """(axis, side) of each face with a neighbouring chunk beyond it (side 0: low)."""
        faces = []
        for axis in range(3):
            if self.index[axis] > 0:
                faces.append((axis, 0))
            if self.index[axis] < self.grid[axis] - 1:
                faces.append((axis, 1))
        return faces

    @property
    def slices(self) -> tuple[slice, slice, slice]:
        """Where the chunk lies in the volume."""
        z, y, x = (slice(o, o + n) for o, n in zip(self.origin, self.shape, strict=True))
        return z, y, x


class Grid:
    """The chunks of a volume of `chunks` (dask's chunk sizes per axis)."""

    def __init__(self, chunks: Chunks, source: str) -> None:
        self.chunks = chunks
        self.shape = tuple(int(sum(sizes)) for sizes in chunks)
        self.grid = tuple(len(sizes) for sizes in chunks)
        self.starts = [np.concatenate(([0], np.cumsum(sizes)[:-1])) for sizes in chunks]
        for axis, sizes in enumerate(chunks):
            if any(size <= 0 for size in sizes) or not sizes:
                raise BadValue(
                    f"{source}: chunks of 0 voxels along axis {axis} ({sizes}); rechunk it"
                )
        biggest = int(np.prod([max(sizes) for sizes in chunks]))
        if biggest >= MAX_CHUNK_VOXELS:
            raise BadValue(
                f"{source}: chunks of {biggest} voxels; at most {MAX_CHUNK_VOXELS - 1} "
                "(rechunk it smaller)"
            )

    def __iter__(self) -> Iterator[Chunk]:
        for index in itertools.product(*(range(n) for n in self.grid)):
            yield self[index]

    def __getitem__(self, index: tuple[int, ...]) -> Chunk:
        i, j, k = index
        return Chunk(
            index=(i, j, k),
            origin=(int(self.starts[0][i]), int(self.starts[1][j]), int(self.starts[2][k])),
            shape=(self.chunks[0][i], self.chunks[1][j], self.chunks[2][k]),
            volume_shape=(self.shape[0], self.shape[1], self.shape[2]),
            grid=(self.grid[0], self.grid[1], self.grid[2]),
        )

    def contains(self, index: tuple[int, ...]) -> bool:
        """Whether `index` is a chunk of the grid."""
        return all(0 <= i < n for i, n in zip(index, self.grid, strict=True))
