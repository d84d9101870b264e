"""Zarr volumes in and out: a source read chunk by chunk (a chunk that fails to read names
itself), and a label array written with the source's chunks and geometry.

A source is a Zarr array (v2 or v3), or an OME-Zarr image group, whose first multiscale
dataset (full resolution) is labeled; the labels of a group come out as a group of the same
form (its multiscales metadata kept for that one dataset, so voxel size and units stay).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError

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
        """The volume as a dask array of its own chunks, read by ChunkReader."""
        import dask.array as da

        return da.from_array(
            ChunkReader(self),
            chunks=self.chunks,
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


def create_labels(source: Source, path: Path, extra: dict[str, Any]) -> Any:
    """An empty uint32 label array at `path` (a new folder) of the source's shape, chunks and
    Zarr format, with its attributes (and, for an OME-Zarr group, the group's, its
    multiscales reduced to the dataset labeled); the array to store the labels into."""
    import zarr

    attributes = {**source.attributes, "gccl": extra}
    store = os.fspath(path)
    if source.group_attributes is None:
        return zarr.create_array(
            store=store,
            shape=source.shape,
            chunks=source.chunks,
            dtype=np.uint32,
            fill_value=0,
            zarr_format=source.zarr_format,  # type: ignore[arg-type]
            attributes=attributes,
        )
    group = zarr.open_group(store=store, mode="w-", zarr_format=source.zarr_format)  # type: ignore[arg-type]
    group.attrs.update(_one_scale(source.group_attributes, source.dataset))
    return group.create_array(
        name=source.dataset,
        shape=source.shape,
        chunks=source.chunks,
        dtype=np.uint32,
        fill_value=0,
        attributes=attributes,
    )


def _one_scale(attributes: dict[str, Any], dataset: str) -> dict[str, Any]:
    """OME-Zarr group attributes with each multiscale's datasets cut to `dataset`."""
    copied = json.loads(json.dumps(attributes))
    holder = copied.get("ome", copied)
    for scale in holder.get("multiscales", []):
        scale["datasets"] = [d for d in scale.get("datasets", []) if str(d.get("path")) == dataset]
    return copied
