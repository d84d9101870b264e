"""After labeling: which components are kept (--min-area, --max-area, --largest) and the
holes of the kept ones filled (--fill-holes). Both backends call these functions, on the
host, so that they cannot drift apart.

The order is fixed (README, "Cleaning the labels"):

    labels 1..K -> keep by area: min-area <= area <= max-area, then the --largest K of
    those (the larger area first, the lower label on ties) -> survivors renumbered 1..K'
    in label order -> --fill-holes -> statistics of the final labels

Areas are those of the components as labeled, before any hole is filled.

A *hole* is a connected region of label-0 pixels (background, and the pixels of removed
components) that does not touch the image border: 4-connected with connectivity 8,
8-connected with connectivity 4 (each the other's complement, as scipy's
binary_fill_holes takes them). A hole joins the component that encloses it and touches
it: that component alone cuts it off from the border (binary_fill_holes(labels == c)
covers it) and one of its pixels is a 4-neighbour of the hole. Where several do (nested
rings that touch in tau mode), the innermost, which is the largest label, takes it.

In binary mode components never touch, and every hole has exactly one such component:
the one its outline belongs to, which holds the pixel just above the hole's first
pixel (its first in raster order); then filling is binary_fill_holes of each
component. In tau mode, where components touch, a hole that no single touching
component encloses (a gap between two surfaces) stays background.

A filled hole joins its component through a 4-neighbour, and lies below the
component's first pixel, so filled components keep their labels, their raster
order and their connectivity under 8-neighbourhood.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .params import LabelParams

#: Labels a bool mask: (dense labels 1..M in raster order of first pixels, M), with the
#: given connectivity (4 or 8). The backends pass the CPU engine's.
RegionLabeler = Callable[[np.ndarray, int], tuple[np.ndarray, int]]


def selects(params: LabelParams) -> bool:
    """Whether `params` keep components by more than min-area (--max-area, --largest)."""
    return params.max_area is not None or params.largest is not None


def kept_components(area: np.ndarray, starts: np.ndarray, params: LabelParams) -> np.ndarray:
    """Which components stay (bool per component), for the components of several images
    with `area` each, image n's being starts[n]:starts[n + 1]."""
    keep = area >= params.min_area
    if params.max_area is not None:
        keep &= area <= params.max_area
    if params.largest is None:
        return keep
    count = len(starts) - 1
    image = np.repeat(np.arange(count), np.diff(starts))
    index = np.arange(len(area))
    # Per image, the kept components by area (largest first), then label (lowest first).
    order = np.lexsort((index, -area.astype(np.int64), image))
    order = order[keep[order]]
    grouped = image[order]
    rank = np.arange(len(order)) - np.searchsorted(grouped, grouped, side="left")
    chosen = np.zeros(len(area), bool)
    chosen[order[rank < params.largest]] = True
    return chosen


def hole_connectivity(connectivity: int) -> int:
    """The connectivity of holes: the complement of the components'."""
    return 4 if connectivity == 8 else 8


def fill_holes(labels: np.ndarray, params: LabelParams, label_regions: RegionLabeler) -> bool:
    """Fill the holes of the (H, W) label image `labels` in place (module docstring);
    whether any was filled. label_regions labels the masks of label-0 pixels."""
    height, width = labels.shape
    if height < 3 or width < 3:
        return False  # every pixel touches the border
    connectivity = hole_connectivity(params.connectivity)
    regions, count = label_regions(labels == 0, connectivity)
    if count == 0:
        return False
    outside = np.zeros(count + 1, bool)  # regions that touch the border, and label 0
    outside[0] = True
    for edge in (regions[0], regions[-1], regions[:, 0], regions[:, -1]):
        outside[edge] = True
    if outside.all():
        return False
    # Only the holes' pixels from here on (a page's background is one region, not a hole).
    where = np.flatnonzero(~outside[regions.reshape(-1)])
    hole_of = regions.reshape(-1)[where]
    first = _first_pixels(where, hole_of, count)
    fill = np.zeros(count + 1, labels.dtype)
    holes = np.flatnonzero(~outside)
    if params.mode == "binary":
        fill[holes] = labels.reshape(-1)[first[holes] - width]
    else:
        _enclosing(labels, regions, outside, first, fill, connectivity, label_regions)
    filling = fill[hole_of]
    labels.reshape(-1)[where] = filling
    return bool(filling.any())


def _first_pixels(where: np.ndarray, hole_of: np.ndarray, count: int) -> np.ndarray:
    """The flat index of each hole's first pixel (index r for region r; 0 elsewhere), from
    the holes' pixels in raster order (`where`) and their regions (`hole_of`).

    Region labels appear in raster order of their first pixels, so a hole's first pixel
    is where the running maximum of the regions met so far rises to it.
    """
    first = np.zeros(count + 1, np.int64)
    if len(where) == 0:
        return first
    running = np.maximum.accumulate(hole_of)
    rises = np.flatnonzero(running[1:] != running[:-1]) + 1
    starts = np.concatenate(([0], rises))
    first[hole_of[starts]] = where[starts]
    return first


def _enclosing(
    labels: np.ndarray,
    regions: np.ndarray,
    outside: np.ndarray,
    first: np.ndarray,
    fill: np.ndarray,
    connectivity: int,
    label_regions: RegionLabeler,
) -> None:
    """fill[hole] = the largest label that touches the hole and encloses it (tau mode).

    Each touching component is tried once: the regions of everything but it, within
    its bounding box, that do not reach the box's frame are its holes.
    """
    width = labels.shape[1]
    top = int(labels.max())
    pairs = []
    for hole_side, other in (
        (regions[:, :-1], labels[:, 1:]),
        (regions[:, 1:], labels[:, :-1]),
        (regions[:-1], labels[1:]),
        (regions[1:], labels[:-1]),
    ):
        meets = ~outside[hole_side] & (other != 0)
        pairs.append(hole_side[meets].astype(np.int64) * (top + 1) + other[meets])
    codes = np.unique(np.concatenate(pairs))
    hole_of, component_of = codes // (top + 1), codes % (top + 1)
    candidates = np.unique(component_of)
    boxes = _boxes(labels, candidates, top)
    for component in candidates.tolist():  # ascending: the largest label writes last
        y0, y1, x0, x1 = boxes[component]
        box = labels[y0:y1, x0:x1]
        inside, _ = label_regions(box != component, connectivity)
        reaches_frame = np.zeros(int(inside.max()) + 1, bool)
        for edge in (inside[0], inside[-1], inside[:, 0], inside[:, -1]):
            reaches_frame[edge] = True
        for hole in hole_of[component_of == component].tolist():
            y, x = divmod(int(first[hole]), width)
            if y0 <= y < y1 and x0 <= x < x1 and not reaches_frame[inside[y - y0, x - x0]]:
                fill[hole] = component


def _boxes(labels: np.ndarray, components: np.ndarray, top: int) -> np.ndarray:
    """[y0, y1, x0, x1) of each of `components` (rows indexed by label)."""
    height, width = labels.shape
    wanted = np.zeros(top + 1, bool)
    wanted[components] = True
    where = np.flatnonzero(wanted[labels.reshape(-1)])
    which = labels.reshape(-1)[where]
    ys, xs = np.divmod(where, width)
    boxes = np.zeros((top + 1, 4), np.int64)
    boxes[:, 0], boxes[:, 2] = height, width
    np.minimum.at(boxes[:, 0], which, ys)
    np.maximum.at(boxes[:, 1], which, ys + 1)
    np.minimum.at(boxes[:, 2], which, xs)
    np.maximum.at(boxes[:, 3], which, xs + 1)
    return boxes
