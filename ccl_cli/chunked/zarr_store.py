"""Zarr volumes in and out: a source read in work blocks of whole chunks, chunk by chunk (a
chunk that fails to read names itself), and a label array written with the source's chunks
and geometry.

A work block is what one task labels: whole chunks of the source, grouped up to
WORK_BLOCK_VOXELS (Dask's fixed cost per task, in its scheduler and in the worker, is then
spread over that many voxels rather than one chunk's). Blocks are made of whole
chunks, so each writes whole chunks of the label array, which no other block touches.

A source is a Zarr array (v2 or v3), or an OME-Zarr image group, whose first multiscale
dataset (full resolution) is labeled; the labels of a group come out as a group of the same
form (its multiscales metadata kept for that one dataset, so voxel size and units stay).
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError

#: The most voxels of a work block (of at least one chunk): 256^3, whose values, labels and
#: summary take a few hundred MB of a worker's memory.
WORK_BLOCK_VOXELS = 1 << 24
#: Where a Zarr store says what it is: v2 arrays and groups, v3 nodes.
_MARKERS = (".zarray", ".zgroup", "zarr.json")


def is_zarr(path: Path) -> bool:
    """Whether `path` is a folder holding a Zarr array or group (False where it cannot be
    looked at: reading the input says why, on that input's own line)."""
    try:
        return path.is_dir() and any((path / marker).is_file() for marker in _MARKERS)
    except OSError:  # a name too long, a folder the user may not enter
        return False


@dataclass
class Source:
    """A Zarr volume to label: the store, the array in it, and the attributes to carry."""

    path: Path
    dataset: str  # "" for an array at the store's root
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: np.dtype
    zarr_format: int
    attributes: dict[str, Any] = field(default_factory=dict)
    group_attributes: dict[str, Any] | None = None

    def dask_array(self) -> Any:
        """The volume as a dask array of work blocks, read by ChunkReader."""
        import dask.array as da

        return da.from_array(
            ChunkReader(self),
            chunks=work_blocks(self.shape, self.chunks, WORK_BLOCK_VOXELS),
            asarray=False,
            lock=False,
            fancy=False,
            name=f"gccl-read-{os.fspath(self.path)}-{self.dataset}",
        )


def open_source(path: Path) -> Source:
    """The Zarr volume at `path`, or InputError (one line) for what is not one."""
    import zarr

    try:
        node = zarr.open(store=os.fspath(path), mode="r")
    except Exception as error:
        raise InputError(f"{path}: not a readable Zarr store ({error})") from None
    group_attributes = None
    dataset = ""
    if isinstance(node, zarr.Group):
        group_attributes = dict(node.attrs)
        first = _first_dataset(group_attributes)
        if first is None:
            raise InputError(f"{path}: a Zarr group without OME-Zarr multiscales; name its array")
        dataset = first
        try:
            node = node[dataset]
        except KeyError:
            raise InputError(
                f"{path}: its multiscales name {dataset!r}, which is not there"
            ) from None
        if not isinstance(node, zarr.Array):
            raise InputError(f"{path}/{dataset}: not a Zarr array")
    if node.ndim != 3:
        raise InputError(
            f"{path}: a {node.ndim}-D array {tuple(node.shape)}; gccl labels 3-D volumes (z, y, x)"
        )
    return Source(
        path=path,
        dataset=dataset,
        shape=tuple(int(n) for n in node.shape),
        chunks=tuple(int(n) for n in node.chunks),
        dtype=np.dtype(node.dtype),
        zarr_format=int(node.metadata.zarr_format),
        attributes=dict(node.attrs),
        group_attributes=group_attributes,
    )


def _first_dataset(attributes: dict[str, Any]) -> str | None:
    """The path of the first (full-resolution) dataset of OME-Zarr multiscales metadata
    (v0.4 at the top, v0.5 under "ome")."""
    multiscales = attributes.get("multiscales") or attributes.get("ome", {}).get("multiscales")
    try:
        return str(multiscales[0]["datasets"][0]["path"])
    except (TypeError, KeyError, IndexError):
        return None


def work_blocks(
    shape: tuple[int, ...], chunks: tuple[int, ...], most: int
) -> tuple[tuple[int, ...], ...]:
    """Dask's block sizes per axis for a volume of `shape` in `chunks`: blocks of whole
    chunks, of at most `most` voxels (one chunk where a chunk is larger), grown one chunk
    at a time along the axis where the block is shortest."""
    count = [1, 1, 1]

    def extent(axis: int, chunks_along: int) -> int:
        return min(chunks_along * chunks[axis], shape[axis])

    while True:
        growing = [
            axis
            for axis in range(3)
            if count[axis] * chunks[axis] < shape[axis]
            and np.prod([extent(b, count[b] + (b == axis)) for b in range(3)]) <= most
        ]
        if not growing:
            break
        count[min(growing, key=lambda axis: extent(axis, count[axis]))] += 1
    return tuple(_sizes(shape[axis], count[axis] * chunks[axis]) for axis in range(3))


def _sizes(length: int, step: int) -> tuple[int, ...]:
    """`length` cut into parts of `step` (the last one shorter)."""
    return tuple(min(step, length - start) for start in range(0, length, step))


class ChunkReader:
    """Reads a Source's chunks where a task runs (opened once per process): a read that
    fails raises InputError naming the chunk."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.shape = source.shape
        self.dtype = source.dtype
        self.ndim = len(source.shape)
        self._array: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"source": self.source}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["source"])  # type: ignore[misc]

    def __getitem__(self, where: tuple[slice, ...]) -> np.ndarray:
        """The block `where` (whole chunks), read a chunk at a time."""
        block = np.empty(tuple(s.stop - s.start for s in where), self.dtype)
        spans = [
            [slice(start, min(start + size, s.stop)) for start in range(s.start, s.stop, size)]
            for s, size in zip(where, self.source.chunks, strict=True)
        ]
        for chunk in itertools.product(*spans):
            inside = tuple(
                slice(c.start - s.start, c.stop - s.start)
                for c, s in zip(chunk, where, strict=True)
            )
            block[inside] = self._chunk(chunk)
        return block

    def _chunk(self, where: tuple[slice, ...]) -> np.ndarray:
        """One chunk (`where`), or InputError naming it."""
        index = tuple(s.start // c for s, c in zip(where, self.source.chunks, strict=True))
        try:
            if self._array is None:
                import zarr

                node: Any = zarr.open(store=os.fspath(self.source.path), mode="r")
                self._array = node[self.source.dataset] if self.source.dataset else node
            return np.asarray(self._array[where])
        except Exception as error:
            spans = ", ".join(f"{s.start}:{s.stop}" for s in where)
            raise InputError(
                f"{self.source.path}: chunk {'.'.join(map(str, index))} ([{spans}]) could not "
                f"be read ({type(error).__name__}: {error})"
            ) from None


def create_labels(source: Source, path: Path, extra: dict[str, Any], dtype: np.dtype) -> Any:
    """An empty label array of `dtype` at `path` (a new folder) of the source's shape, chunks
    and Zarr format, with its attributes (and, for an OME-Zarr group, the group's, its
    multiscales reduced to the dataset labeled); the array to store the labels into.

    Every chunk is written, background ones too (a few compressed bytes each): zarr's test
    of whether a chunk holds only the fill value, to leave it out, reads the whole chunk
    again before compressing it."""
    import zarr

    attributes = {**source.attributes, "gccl": extra}
    store = os.fspath(path)
    options: dict[str, Any] = {
        "shape": source.shape,
        "chunks": source.chunks,
        "dtype": dtype,
        "fill_value": 0,
        "attributes": attributes,
        "config": {"write_empty_chunks": True},
    }
    if source.group_attributes is None:
        return zarr.create_array(store=store, zarr_format=source.zarr_format, **options)  # type: ignore[arg-type]
    group = zarr.open_group(store=store, mode="w-", zarr_format=source.zarr_format)  # type: ignore[arg-type]
    group.attrs.update(_one_scale(source.group_attributes, source.dataset))
    return group.create_array(name=source.dataset, **options)


def _one_scale(attributes: dict[str, Any], dataset: str) -> dict[str, Any]:
    """OME-Zarr group attributes with each multiscale's datasets cut to `dataset`."""
    copied = json.loads(json.dumps(attributes))
    holder = copied.get("ome", copied)
    for scale in holder.get("multiscales", []):
        scale["datasets"] = [d for d in scale.get("datasets", []) if str(d.get("path")) == dataset]
    return copied
