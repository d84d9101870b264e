"""The nasty fixed cases every labeling test draws on: 1x1, 1xN, Nx1, odd sizes, all
foreground, none, checkerboards, spirals, snakes, rings and diagonals; helices for volumes."""

from __future__ import annotations

import math

import numpy as np


def checkerboard(height: int, width: int) -> np.ndarray:
    return (np.add.outer(np.arange(height), np.arange(width)) % 2) == 0


def snake(side: int) -> np.ndarray:
    """A 1-pixel-wide boustrophedon path: full even rows, odd rows joined at alternating ends."""
    mask = np.zeros((side, side), bool)
    mask[::2] = True
    mask[1::4, -1] = True
    mask[3::4, 0] = True
    return mask


def spiral(side: int) -> np.ndarray:
    """A 1-pixel-wide square spiral walking inwards with a 1-pixel gap between arms."""
    mask = np.zeros((side, side), bool)
    y, x, dy, dx = 0, 0, 0, 1
    mask[y, x] = True
    turns = 0
    while turns < 2:
        ahead, beyond = (y + dy, x + dx), (y + 2 * dy, x + 2 * dx)
        inside = 0 <= ahead[0] < side and 0 <= ahead[1] < side
        free_beyond = not (0 <= beyond[0] < side and 0 <= beyond[1] < side) or not mask[beyond]
        if inside and not mask[ahead] and free_beyond:
            y, x = ahead
            mask[y, x] = True
            turns = 0
        else:
            dy, dx = dx, -dy
            turns += 1
    return mask


def helix(depth: int, side: int, turns: float) -> np.ndarray:
    """A 1-voxel-wide helix climbing through every plane (26-connected only)."""
    mask = np.zeros((depth, side, side), bool)
    centre, radius = (side - 1) / 2, (side - 1) / 2 - 1
    for z in range(depth):
        angle = 2 * math.pi * turns * z / depth
        mask[
            z, round(centre + radius * math.sin(angle)), round(centre + radius * math.cos(angle))
        ] = True
    return mask


def rings(side: int) -> tuple[np.ndarray, int]:
    """Concentric square rings 1 pixel wide, 1 pixel apart; returns (mask, ring count)."""
    mask = np.zeros((side, side), bool)
    count = 0
    for k in range(0, (side + 1) // 2, 2):
        ring = np.zeros_like(mask)
        ring[k : side - k, k : side - k] = True
        ring[k + 1 : side - k - 1, k + 1 : side - k - 1] = False
        mask |= ring
        count += 1
    return mask, count


NASTY = {
    "1x1 fg": np.ones((1, 1), bool),
    "1x1 bg": np.zeros((1, 1), bool),
    "1xN": np.array([[1, 1, 0, 1, 0, 0, 1, 1, 1]], bool),
    "Nx1": np.array([[1, 1, 0, 1, 0, 0, 1, 1, 1]], bool).T,
    "odd 7x13": np.random.default_rng(7).random((7, 13)) < 0.5,
    "odd 41x3": np.random.default_rng(8).random((41, 3)) < 0.6,
    "all fg": np.ones((17, 23), bool),
    "all bg": np.zeros((17, 23), bool),
    "checker 9x11": checkerboard(9, 11),
    "checker 10x1": checkerboard(10, 1),
    "spiral 31": spiral(31),
    "spiral 30 bg": ~spiral(30),
    "snake 200": snake(200),
    "rings 33": rings(33)[0],
    "diagonal": np.eye(12, dtype=bool) | np.eye(12, k=3, dtype=bool),
    "anti-diagonal": np.fliplr(np.eye(9, 14, dtype=bool)),
}


def rounding_pairs(
    count: int = 40, integers: bool = False
) -> list[tuple[float, float, float, float, bool]]:
    """Pixel pairs (0, x) and coefficients (tau, relative, quadratic) where the tolerance
    of m = x lands within a rounding of x itself, so that whether they join depends on
    evaluating tau + relative * x + quadratic * x^2 exactly as the contract orders it:
    (x, tau, relative, quadratic, joins). Half the pairs are ones that a different order
    of the sums, quadratic * x first multiplied by x, or a fused multiply-add would
    decide the other way. integers: x is a whole number below 2**31. Written from the
    README's text with exact fractions."""
    from fractions import Fraction

    def rounded(value: Fraction) -> float:
        return float(value)  # correctly rounded, ties to even

    rng = np.random.default_rng(2024)
    found: list[tuple[float, float, float, float, bool]] = []
    ordinary: list[tuple[float, float, float, float, bool]] = []
    while len(found) < count // 2 or len(ordinary) < count - count // 2:
        x = float(rng.integers(1, 2**31)) if integers else float(rng.uniform(1, 1e4))
        tau = float(rng.choice([0.0, rng.uniform(0, 1)]))
        relative = float(rng.uniform(0.05, 0.95))
        quadratic = (1 - relative) / x * (1 + float(rng.normal(0, 1e-15)))
        if quadratic <= 0:
            continue
        contract = (tau + relative * x) + quadratic * (x * x)
        others = (
            tau + (relative * x + quadratic * (x * x)),
            (tau + relative * x) + (quadratic * x) * x,
            rounded(Fraction(quadratic) * Fraction(x * x) + Fraction(tau + relative * x)),
        )
        joins = x <= contract
        case = (x, tau, relative, quadratic, joins)
        if any((x <= other) != joins for other in others):
            if len(found) < count // 2:
                found.append(case)
        elif len(ordinary) < count - count // 2:
            ordinary.append(case)
    return found + ordinary
