"""Volume inputs in a run: one file (or a folder of slices) read as one (D, H, W) volume,
labeled as a batch of one through the backend with the run's parameters at rank 3, and
written in kind (io/volumes): the label volume with the input's geometry, the statistics
with physical columns where a voxel size is known, the orthogonal-views preview.

Worker processes and Dask tasks run the same steps on their inputs' paths: each reads its
volume itself, and only the records travel back.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Settings
from ..contract.params import LabelParams
from ..contract.stages import smooth_problem
from ..contract.stats import StatsTable
from ..errors import InputError
from ..io.csv_text import volume_stats_csv
from ..io.decode import is_image_path
from ..io.inputs import InputItem
from ..io.output_paths import IMAGE_ONLY_FORMATS, VOLUME_ONLY_FORMATS, label_file_format
from ..io.volumes import (
    VolumeFile,
    detached_data,
    encode_label_volume,
    natural_order,
    physical_columns,
    read_slices,
    read_volume,
    volume_preview,
)


def kind_problem(volume: str | None, params: LabelParams, label_format: str) -> str | None:
    """Why an input of this kind (`volume`: InputItem.volume, None for an image) cannot be
    labeled with the run's options, or None (admission asks, so that --dry-run says it too)."""
    if volume is None:
        if label_format in VOLUME_ONLY_FORMATS:
            return (
                f"--label-format {label_format} writes volumes; an image's labels are written "
                "as auto, png, tiff or npy"
            )
        return None
    if label_format in IMAGE_ONLY_FORMATS:
        return (
            f"--label-format {label_format} holds 2-D images; a volume's labels are written "
            "as auto (its own format), tiff, npy, nifti, nrrd or metaimage"
        )
    return volume_problem(params.at_rank(3))


def volume_problem(params: LabelParams) -> str | None:
    """Why the run's options cannot label a volume (params at rank 3), or None: outlines
    and hole filling are 2-D, and a binomial smoothing may be too wide for volumes."""
    if params.polygons:
        return "--polygons traces the outlines of 2-D images; a volume has none (leave it out)"
    if params.fill_holes:
        return "--fill-holes fills the holes of 2-D images, not of volumes (leave it out)"
    return smooth_problem(params.smooth, 3)


def slice_paths(folder: Path) -> list[Path]:
    """The slices of a folder read as a volume (--volume): its 2-D images but hidden ones, in
    natural name order."""
    found = [p for p in folder.iterdir() if p.is_file() and is_image_path(p.name)]
    return natural_order(p for p in found if not p.name.startswith("."))


def input_stat(item: InputItem) -> os.stat_result:
    """os.stat of the input `item` as its outputs' record knows it (freshness.made_by), with the
    latest modification time of it and the files its voxels are in: a folder of slices and its
    slices, an .mhd or .nhdr header and its data file (a slice or data file rewritten in place
    changes the volume, not the folder or header). Raises OSError."""
    info = os.stat(item.path)
    others = _voxel_files(item)
    if not others:
        return info
    latest = max([info.st_mtime_ns, *(os.stat(p).st_mtime_ns for p in others)])
    fields = {name: getattr(info, name) for name in dir(info) if name.startswith("st_")}
    return os.stat_result(tuple(info)[:10], {**fields, "st_mtime_ns": latest})


def _voxel_files(item: InputItem) -> list[Path]:
    """The files other than `item`'s own path that hold its voxels."""
    if item.volume == "slices":
        return slice_paths(Path(item.path))
    found = detached_data(Path(item.path)) if item.volume is not None else None
    return [] if found is None else [found]


def read_volume_input(item: InputItem, spacing: Any, max_bytes: int) -> VolumeFile:
    """The volume of `item` (a volume file, or with item.volume "slices" the 2-D images of
    its folder in natural name order), with --spacing (`spacing`, or None) over the file's
    voxel size. Raises InputError with the reason."""
    if item.volume == "slices":
        paths = slice_paths(Path(item.path))
        if not paths:
            raise InputError("no 2-D images in this folder to stack as slices")
        volume = read_slices(paths, max_bytes)
    else:
        volume = read_volume(Path(item.path), max_bytes)
    if spacing is not None:
        volume = VolumeFile(volume.values, volume.geometry.with_spacing(spacing), volume.format)
    return volume


def volume_outputs(
    volume: VolumeFile, labels: np.ndarray, table: StatsTable, settings: Settings
) -> tuple[str, Any, Any, bytes | None]:
    """(label file format, its bytes, the statistics CSV's pieces, the preview PNG or None
    without --preview) of a labeled volume, in the input's kind and geometry."""
    kept = len(table)
    file_format = label_file_format(settings.label_format, kept, volume.format)
    preview = settings.preview
    encoded = encode_label_volume(labels, kept, volume, file_format)
    columns = {name: table[name] for name in ("area", "centroid_x", "centroid_y", "centroid_z")}
    csv = volume_stats_csv(table, physical_columns(columns, volume.geometry))
    picture = volume_preview(labels, volume.geometry) if preview else None
    return file_format, encoded, csv, picture
