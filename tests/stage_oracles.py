"""Independent references for the stages before labeling: scipy.ndimage and OpenCV for
the morphology, brute-force loops for the smoothing (written from the README's rules)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import cv2
import numpy as np
import scipy.ndimage as ndi

#: generate_binary_structure's (rank, connectivity) for each of gccl's connectivities.
STRUCTURES = {4: (2, 1), 8: (2, 2), 6: (3, 1), 18: (3, 2), 26: (3, 3)}
#: Each option as erosions and dilations, in order.
PRIMITIVES = {
    "erode": ("erode",),
    "dilate": ("dilate",),
    "open": ("erode", "dilate"),
    "close": ("dilate", "erode"),
}


def scipy_mask(mask: np.ndarray, steps: list[tuple[str, int]], connectivity: int) -> np.ndarray:
    """The morphology steps by scipy.ndimage, with the border that never changes the
    result: foreground for an erosion (border_value=1), background for a dilation."""
    structure = ndi.generate_binary_structure(*STRUCTURES[connectivity])
    for name, n in steps:
        if not n:  # scipy's iterations=0 means "until nothing changes"; ours means off
            continue
        for op in PRIMITIVES[name]:
            if op == "erode":
                mask = ndi.binary_erosion(mask, structure, iterations=n, border_value=1)
            else:
                mask = ndi.binary_dilation(mask, structure, iterations=n, border_value=0)
    return mask


CV2_OPS = {"open": cv2.MORPH_OPEN, "close": cv2.MORPH_CLOSE}


def opencv_mask(mask: np.ndarray, steps: list[tuple[str, int]], connectivity: int) -> np.ndarray:
    """The morphology steps by cv2.erode/dilate/morphologyEx with their default border
    (borderType BORDER_CONSTANT with morphologyDefaultBorderValue)."""
    shape = cv2.MORPH_CROSS if connectivity == 4 else cv2.MORPH_RECT
    kernel = cv2.getStructuringElement(shape, (3, 3))
    image = mask.astype(np.uint8)
    for name, n in steps:
        if not n:  # OpenCV's iterations=0 is one iteration; ours means off
            continue
        if name == "erode":
            image = cv2.erode(image, kernel, iterations=n)
        elif name == "dilate":
            image = cv2.dilate(image, kernel, iterations=n)
        else:
            image = cv2.morphologyEx(image, CV2_OPS[name], kernel, iterations=n)
    return image.astype(bool)


def oracle_smooth(
    values: np.ndarray, mask: np.ndarray, kind: str, radius: int, at: np.ndarray | None = None
) -> list:
    """V' per pixel or voxel (None off the mask, or off `at` where given) by plain loops
    over the window, as nested lists of the array's shape (2-D or 3-D).

    Integers: floor(S / W + 1/2) in exact fractions. Floats: the documented order,
    innermost x: each row j = -R..R summed (multiply, then add), rows i = -R..R summed
    with their weights, and for volumes planes k = -R..R the same, in Python floats
    (IEEE float64), then S / W rounded to the input dtype.
    """
    if kind == "box":
        w = [1] * (2 * radius + 1)
    else:
        w = [math.comb(2 * radius, radius + k) for k in range(-radius, radius + 1)]
    floating = values.dtype.kind == "f"
    shape = values.shape

    def window(centre: tuple[int, ...], axis: int, prefix: tuple[int, ...]) -> tuple:
        """(weighted value sum, weight sum) over the window's axes from `axis` on."""
        total: float | int = 0.0 if floating else 0
        weight = 0
        for k in range(-radius, radius + 1):
            position = (*prefix, centre[axis] + k)
            if axis + 1 < len(shape):
                part, part_weight = window(centre, axis + 1, position)
            else:
                inside = all(0 <= p < n for p, n in zip(position, shape, strict=True))
                inside = inside and bool(mask[position])
                value = values[position] if inside else 0
                part = (float(value) if floating else int(value)) if inside else 0
                part_weight = int(inside)
            total = total + w[k + radius] * part
            weight += w[k + radius] * part_weight
        return total, weight

    def smoothed(centre: tuple[int, ...]) -> float | int | None:
        if not (mask if at is None else at)[centre]:
            return None
        total, weight = window(centre, 0, ())
        if floating:
            return float(values.dtype.type(total / weight))
        return math.floor(Fraction(int(total), weight) + Fraction(1, 2))

    out = np.empty(shape, object)
    for centre in np.ndindex(shape):
        out[centre] = smoothed(centre)
    return out.tolist()


def brute_morph(mask: np.ndarray, op: str, connectivity: int) -> np.ndarray:
    """One erosion or dilation by plain loops: each pixel (voxel) ANDs (ORs) itself and its
    neighbours of the connectivity inside the array; outside is left out (so it never
    changes the result)."""
    rank = 2 if connectivity in (4, 8) else 3
    nonzero = {4: 1, 8: 2, 6: 1, 18: 2, 26: 3}[connectivity]
    offsets = [o for o in itertools.product((-1, 0, 1), repeat=rank) if sum(map(abs, o)) <= nonzero]
    out = np.zeros_like(mask)
    for index in np.ndindex(mask.shape):
        near = []
        for offset in offsets:
            n = tuple(p + o for p, o in zip(index, offset, strict=True))
            if all(0 <= p < size for p, size in zip(n, mask.shape, strict=True)):
                near.append(bool(mask[n]))
        out[index] = all(near) if op == "erode" else any(near)
    return out


def oracle_fill(
    values: np.ndarray, readings: np.ndarray, final: np.ndarray, radius: int
) -> np.ndarray:
    """Tau mode's pixels added by morphology (in `final`, not in `readings`) filled with the
    box mean of the readings within `radius`; every other pixel keeps its value."""
    added = final & ~readings
    means = np.array(oracle_smooth(values, readings, "box", radius, at=added), object)
    filled = values.copy()
    for index in zip(*np.nonzero(added), strict=True):
        filled[index] = means[index]
    return filled
