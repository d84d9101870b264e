"""Label volumes as the bytes of a file in the input's format (or the one --label-format
forces), with the input's geometry: uint16 labels when they fit, else uint32."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .detect import label_format_for
from .geometry import VolumeFile
from .limits import encode_threads

#: The most labels a uint16 label volume holds.
UINT16_LABELS = 65535


def label_dtype(kept: int) -> np.dtype:
    """uint16 for at most 65535 labels, else uint32 (never wrapped)."""
    return np.dtype(np.uint16 if kept <= UINT16_LABELS else np.uint32)


def encode_label_volume(
    labels: np.ndarray, kept: int, source: VolumeFile, label_format: str | None = None
) -> bytes | Iterable[bytes]:
    """The label volume of `source` as the bytes of one file (OutDir.write takes them).

    labels: (D, H, W) labels 0..kept, any unsigned or signed integer dtype.
    kept: the number of labels (their maximum): uint16 up to 65535, else uint32.
    source: the volume as read; its format (unless `label_format` forces one, see
        label_volume_suffix for the name) and its geometry go into the header: a NIfTI or
        NRRD written for an input of its own format keeps the input's header (the labels
        overlay the input wherever it is opened); other formats write source.geometry, which
        may carry a --spacing (Geometry.with_spacing).
    Raises ValueError for labels of another shape than the source's values, or beyond `kept`.
    """
    if labels.shape != source.values.shape:
        raise ValueError(f"labels {labels.shape} and values {source.values.shape} differ in shape")
    written = narrowed(labels, kept)
    fmt = label_format_for(source.format, label_format)
    geometry = source.geometry
    if fmt == "npy":
        from .npy_volume import encode_npy_volume

        return encode_npy_volume(written)
    if fmt == "nifti":
        from .nifti import encode_nifti

        return encode_nifti(written, kept, geometry, same_format=source.format == "nifti")
    if fmt == "nrrd":
        from .nrrd_volume import encode_nrrd

        return encode_nrrd(written, geometry, same_format=source.format == "nrrd")
    if fmt == "metaimage":
        from .metaimage import encode_metaimage

        return encode_metaimage(written, geometry, same_format=source.format == "metaimage")
    from .tiff_stack import encode_tiff_stack

    return encode_tiff_stack(written, geometry)


def narrowed(labels: np.ndarray, kept: int) -> np.ndarray:
    """The (D, H, W) `labels` in label_dtype(kept), checked to lie in 0..kept (ValueError if
    not), a slab of planes per thread: a large volume's labels are cast and checked in a
    fraction of the time one thread takes."""
    dtype = label_dtype(kept)
    if labels.dtype.kind not in "iu":
        raise ValueError(f"labels must be integers, got {labels.dtype}")
    if labels.dtype == dtype or not labels.size:
        return labels.astype(dtype, copy=False)
    out = np.empty(labels.shape, dtype)
    threads = min(encode_threads(), len(labels))
    cuts = [len(labels) * n // threads for n in range(threads + 1)]

    def one(n: int) -> tuple[int, int]:
        part = labels[cuts[n] : cuts[n + 1]]
        low = 0 if labels.dtype.kind == "u" else int(part.min())
        high = int(part.max())
        if low >= 0 and high <= kept:
            np.copyto(out[cuts[n] : cuts[n + 1]], part, casting="unsafe")
        return low, high

    with ThreadPoolExecutor(threads, thread_name_prefix="gccl-narrow") as pool:
        ranges = list(pool.map(one, range(threads)))
    low, high = min(r[0] for r in ranges), max(r[1] for r in ranges)
    if low < 0 or high > kept:
        raise ValueError(f"labels must lie in 0..{kept}, got {low}..{high}")
    return out
