"""Every CUDA kernel's name, formed here and nowhere else.

The .cu sources make their kernels' names with macros (one per pixel type of dtypes.cuh,
per connectivity, per step kind); Python launches them by name. KERNELS lists each
template of a name with every set of values its fields take where Python forms it, and
kernel_name refuses a name outside that list, so every name Python can form is one of
every_kernel_name(): a test checks each against the committed fatbin, and a missing
instantiation fails there rather than on a user's GPU.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import product
from typing import Any

#: The pixel types' suffixes (dtypes.cuh; loader.KERNEL_SUFFIX maps numpy dtypes to them).
DTYPES = ("u8", "i8", "u16", "i16", "u32", "i32", "f32", "f64")
FLOAT_DTYPES = ("f32", "f64")
#: Integer types of 8 and 16 bits (smoothing sums them in int32 where it cannot overflow).
NARROW_DTYPES = ("u8", "i8", "u16", "i16")
IMAGE_CONNECTIVITIES = (4, 8)
VOLUME_CONNECTIVITIES = (6, 18, 26)
#: Bytes a morphology kernel reads at once (1, 4 or 16 pixels of a row).
MORPHOLOGY_ACCESS = (1, 4, 16)
MORPHOLOGY_OPS = ("erode", "dilate")
#: Radii of the smoothing kernels over warp strips (stages.py: larger ones use tiles).
STRIP_RADII = (1, 2, 3)


def _each(**fields: Iterable[Any]) -> list[dict[str, Any]]:
    """Every combination of the fields' values."""
    names = list(fields)
    return [dict(zip(names, values, strict=True)) for values in product(*fields.values())]


#: Each template with the values of its fields Python may form it with.
KERNELS: dict[str, list[dict[str, Any]]] = {
    # images: labels (labels.py)
    "gccl_block8_local_{dtype}": _each(dtype=DTYPES),
    "gccl_pixel_local_{connectivity}_{dtype}": _each(
        connectivity=IMAGE_CONNECTIVITIES, dtype=DTYPES
    ),
    "gccl_border_{connectivity}_{dtype}": _each(connectivity=IMAGE_CONNECTIVITIES, dtype=DTYPES),
    "gccl_finalize": [{}],
    "gccl_segmented_scan": [{}],
    "gccl_resolve": [{}],
    # images: statistics and area filtering (labels.py)
    "gccl_stats_init": [{}],
    "gccl_stats_{dtype}": _each(dtype=DTYPES),
    "gccl_float_sum_{dtype}": _each(dtype=FLOAT_DTYPES),
    "gccl_area_remap": [{}],
    "gccl_kept_ranks": [{}],
    "gccl_stats_table": [{}],
    # arrays (arrays.py)
    "gccl_gather_bool": [{}],
    "gccl_gather_b{itemsize}": _each(itemsize=(1, 2, 4, 8)),
    "gccl_narrow_u16": [{}],
    "gccl_keep_area": [{}],
    "gccl_foreground_{dtype}": _each(dtype=DTYPES),
    "gccl_clear_nan_{dtype}": _each(dtype=FLOAT_DTYPES),
    "gccl_masked_f64_{dtype}": _each(dtype=DTYPES),
    "gccl_fill_added_{dtype}": _each(dtype=DTYPES),
    # image stages (stages.py)
    "gccl_{op}_{connectivity}_b{access}": _each(
        op=MORPHOLOGY_OPS, connectivity=IMAGE_CONNECTIVITIES, access=MORPHOLOGY_ACCESS
    ),
    "gccl_{op}_{connectivity}_n_b{access}": _each(
        op=MORPHOLOGY_OPS, connectivity=IMAGE_CONNECTIVITIES, access=MORPHOLOGY_ACCESS
    ),
    "gccl_smooth_{dtype}_r{radius}": _each(dtype=DTYPES, radius=STRIP_RADII),
    "gccl_smooth_{dtype}_{accumulator}": [
        *_each(dtype=FLOAT_DTYPES, accumulator=("f64",)),
        *_each(dtype=("u32", "i32"), accumulator=("i64",)),
        *_each(dtype=NARROW_DTYPES, accumulator=("i32", "i64")),
    ],
    # outlines (outlines.py)
    **{
        f"gccl_outline_{step}": [{}]
        for step in (
            "mask",
            "corners",
            "jump",
            "starts",
            "parts",
            "ring_keys",
            "rank",
            "vertices",
        )
    },
    # volumes (volumes.py, slabs.py, volume_stages.py)
    "gccl_volume_local_{connectivity}_{dtype}": _each(
        connectivity=VOLUME_CONNECTIVITIES, dtype=DTYPES
    ),
    "gccl_volume_border_{connectivity}_{dtype}": _each(
        connectivity=VOLUME_CONNECTIVITIES, dtype=DTYPES
    ),
    "gccl_volume_cells_local_{connectivity}_{dtype}": _each(
        connectivity=VOLUME_CONNECTIVITIES, dtype=DTYPES
    ),
    "gccl_volume_cells_border_{connectivity}": _each(connectivity=VOLUME_CONNECTIVITIES),
    "gccl_volume_cells_roots_{connectivity}": _each(connectivity=VOLUME_CONNECTIVITIES),
    "gccl_volume_cells_resolve_{connectivity}": _each(connectivity=VOLUME_CONNECTIVITIES),
    "gccl_volume_stats_{dtype}": _each(dtype=DTYPES),
    "gccl_volume_float_sum_{dtype}": _each(dtype=FLOAT_DTYPES),
    "gccl_volume_stats_init": [{}],
    "gccl_volume_remap": [{}],
    "gccl_kept_labels": [{}],
    "gccl_volume_stats_table": [{}],
    "gccl_volume_seam_{connectivity}_{dtype}": _each(
        connectivity=VOLUME_CONNECTIVITIES, dtype=DTYPES
    ),
    "gccl_volume_forest_init": [{}],
    "gccl_volume_merge_sizes": [{}],
    "gccl_volume_{op}_{connectivity}": _each(op=MORPHOLOGY_OPS, connectivity=VOLUME_CONNECTIVITIES),
    "gccl_volume_smooth_masked_{dtype}": _each(dtype=DTYPES),
    "gccl_volume_smooth_pass_{accumulator}": _each(accumulator=("i64", "f64")),
    "gccl_volume_smooth_finish_{dtype}": _each(dtype=DTYPES),
    "gccl_volume_fill_added_{dtype}": _each(dtype=DTYPES),
}

#: Each template's names, formed once.
_NAMES = {
    template: frozenset(template.format(**fields) for fields in choices)
    for template, choices in KERNELS.items()
}


def kernel_name(template: str, **fields: Any) -> str:
    """The kernel `template` names with `fields` (a key of KERNELS); ValueError for a name
    that is not among those listed there (the fatbin may lack it)."""
    names = _NAMES.get(template)
    name = template.format(**fields)
    if names is None or name not in names:
        raise ValueError(f"no CUDA kernel {name!r} is listed (backends/cuda/kernel_names.py)")
    return name


def every_kernel_name() -> list[str]:
    """Every name kernel_name can form, sorted."""
    return sorted(set().union(*_NAMES.values()))
