"""Which files are volumes, by name (and for a TIFF by a look at its metadata), the names of
the label volumes written for them, and slices in natural name order."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

#: Volume formats by (lower-case) file name ending; the longest ending that fits wins.
VOLUME_SUFFIXES = {
    ".nii": "nifti",
    ".nii.gz": "nifti",
    ".nrrd": "nrrd",
    ".nhdr": "nrrd",
    ".mha": "metaimage",
    ".mhd": "metaimage",
    ".npy": "npy",
    ".tif": "tiff",
    ".tiff": "tiff",
}
#: What --label-format may force for a label volume, and the ending each one writes.
LABEL_VOLUME_FORMATS = {
    "nifti": ".nii.gz",
    "nrrd": ".nrrd",
    "metaimage": ".mha",
    "tiff": ".tif",
    "npy": ".npy",
}
#: The format of a label volume when --label-format says none: the input's own, where one
#: file holds it (an .mhd's labels go to one .mha, an .nhdr's to one .nrrd, slices to a stack).
_IN_KIND = {
    "nifti": "nifti",
    "nrrd": "nrrd",
    "metaimage": "metaimage",
    "tiff": "tiff",
    "npy": "npy",
    "slices": "tiff",
}
_DIGITS = re.compile(r"(\d+)")


def format_of_name(path: str | Path) -> str | None:
    """The volume format a file's name announces, or None (for .tif, .tiff and .npy, a format
    that holds images too: volume_format looks further)."""
    name = Path(path).name.lower()
    return next(
        (
            VOLUME_SUFFIXES[end]
            for end in sorted(VOLUME_SUFFIXES, key=len, reverse=True)
            if name.endswith(end)
        ),
        None,
    )


def volume_format(path: Path, volume_flag: bool = False) -> str | None:
    """The volume format of `path`, or None for a file that is an image (or pages of images).

    NIfTI, NRRD and MetaImage names are volumes. A .npy is one when its header declares 3
    axes (or more: reading says what to do with a 4-D one). A TIFF is one when its metadata
    gives it a z axis (an ImageJ hyperstack's `slices=`, OME's SizeZ), or with `volume_flag`
    (--volume) when it holds more than one page; a plain multi-page TIFF stays pages. A file
    that cannot be looked at is None: reading it as an image says why.
    Only headers are read (a few hundred bytes, a TIFF's first directory).
    """
    fmt = format_of_name(path)
    if fmt in ("npy", "tiff") and not _regular(path):
        return None  # (a FIFO would block the look inside; reading it says why)
    if fmt == "npy":
        return "npy" if _npy_axes(path) >= 3 else None
    if fmt == "tiff":
        return "tiff" if _tiff_is_stack(path, volume_flag) else None
    return fmt


def _regular(path: Path) -> bool:
    """Whether `path` is a regular file (links followed)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _npy_axes(path: Path) -> int:
    """How many axes a .npy's header declares (0 when it does not read)."""
    import numpy as np

    try:
        with open(path, "rb") as handle:
            major, _ = np.lib.format.read_magic(handle)
            read = (
                np.lib.format.read_array_header_1_0
                if major == 1
                else np.lib.format.read_array_header_2_0
            )
            shape, _, _ = read(handle)
    except Exception:  # not a .npy gccl reads: the image reader says why
        return 0
    return len(shape)


def _tiff_is_stack(path: Path, volume_flag: bool) -> bool:
    """Whether a TIFF is a z-stack: ImageJ or OME metadata with a z axis of more than one
    plane, or (with --volume) any file of more than one page."""
    from .tiff_stack import tiff_z_planes

    try:
        planes, declared = tiff_z_planes(path)
    except Exception:  # unreadable: the image reader says why
        return False
    return declared or (volume_flag and planes > 1)


def volume_stem(path: Path) -> str:
    """The name of a volume file without its format's ending (`ct.nii.gz` -> `ct`,
    `heart.seg.nrrd` -> `heart.seg`); a name of no known ending loses its last suffix."""
    name = path.name
    lower = name.lower()
    for end in sorted(VOLUME_SUFFIXES, key=len, reverse=True):
        if lower.endswith(end):
            return name[: len(name) - len(end)]
    return path.stem


def label_format_for(source_format: str, label_format: str | None) -> str:
    """The format a label volume is written in: `label_format` when given (one of
    LABEL_VOLUME_FORMATS), else the input's own (slices: a TIFF stack)."""
    if label_format is None:
        return _IN_KIND[source_format]
    if label_format not in LABEL_VOLUME_FORMATS:
        raise ValueError(f"label_format must be one of {tuple(LABEL_VOLUME_FORMATS)}")
    return label_format


def label_volume_suffix(source_format: str, label_format: str | None) -> str:
    """The ending of a label volume's name, `.labels` and the format's ending (".labels.nii.gz",
    ".labels.nrrd", ".labels.mha", ".labels.tif", ".labels.npy"), whatever the number of
    labels (it picks the dtype inside the file). A NIfTI input's labels are gzipped whatever
    the input was: they are long runs of few values."""
    return ".labels" + LABEL_VOLUME_FORMATS[label_format_for(source_format, label_format)]


def natural_order(paths: Iterable[Path]) -> list[Path]:
    """`paths` in natural name order: runs of digits compare as numbers (`slice_2` before
    `slice_10`), the rest as text, ties broken by the plain name."""

    def key(path: Path) -> tuple[tuple[tuple[int, int | str], ...], str]:
        parts = _DIGITS.split(path.name)
        return (
            tuple((1, int(p)) if i % 2 else (0, p.lower()) for i, p in enumerate(parts)),
            path.name,
        )

    return sorted(paths, key=key)
