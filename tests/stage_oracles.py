"""Independent references for the stages before labeling: scipy.ndimage for the
morphology, brute-force loops for the smoothing (written from the README's rules)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import scipy.ndimage as ndi

SCIPY_OPS = {
    "erode": ndi.binary_erosion,
    "dilate": ndi.binary_dilation,
    "open": ndi.binary_opening,
    "close": ndi.binary_closing,
}


def scipy_mask(mask: np.ndarray, steps: list[tuple[str, int]], connectivity: int) -> np.ndarray:
    """The morphology steps by scipy.ndimage, border counting as background."""
    structure = ndi.generate_binary_structure(2, 1 if connectivity == 4 else 2)
    for op, n in steps:
        if n:  # scipy's iterations=0 means "until nothing changes"; ours means off
            mask = SCIPY_OPS[op](mask, structure, iterations=n, border_value=0)
    return mask


def oracle_smooth(
    values: np.ndarray, mask: np.ndarray, kind: str, radius: int, at: np.ndarray | None = None
) -> list[list]:
    """V' per pixel (None off the mask, or off `at` where given) by plain loops over the window.

    Integers: floor(S / W + 1/2) in exact fractions. Floats: the documented order,
    rows i = -R..R each summed over j = -R..R (multiply, then add), in Python floats
    (IEEE float64), then S / W rounded to the input dtype.
    """
    if kind == "box":
        w = [1] * (2 * radius + 1)
    else:
        w = [math.comb(2 * radius, radius + k) for k in range(-radius, radius + 1)]
    height, width = values.shape
    floating = values.dtype.kind == "f"
    out: list[list] = []
    for y in range(height):
        row: list = []
        for x in range(width):
            if not (mask if at is None else at)[y, x]:
                row.append(None)
                continue
            total: float | int = 0.0 if floating else 0
            weight = 0
            for i in range(-radius, radius + 1):
                line: float | int = 0.0 if floating else 0
                for j in range(-radius, radius + 1):
                    yy, xx = y + i, x + j
                    inside = 0 <= yy < height and 0 <= xx < width and mask[yy, xx]
                    v = (
                        (float(values[yy, xx]) if floating else int(values[yy, xx]))
                        if inside
                        else 0
                    )
                    line = line + w[j + radius] * v
                    weight += w[i + radius] * w[j + radius] * inside
                total = total + w[i + radius] * line
            if floating:
                row.append(float(values.dtype.type(total / weight)))
            else:
                row.append(math.floor(Fraction(int(total), weight) + Fraction(1, 2)))
        out.append(row)
    return out


def oracle_fill(
    values: np.ndarray, readings: np.ndarray, final: np.ndarray, radius: int
) -> np.ndarray:
    """Tau mode's pixels added by morphology (in `final`, not in `readings`) filled with the
    box mean of the readings within `radius`; every other pixel keeps its value."""
    added = final & ~readings
    means = oracle_smooth(values, readings, "box", radius, at=added)
    filled = values.copy()
    for y, x in zip(*np.nonzero(added), strict=True):
        filled[y, x] = means[y][x]
    return filled
