"""What to label and how: the settings every backend receives, and their exact meaning.

These are the semantics of README.md, "What the labels mean", in one place: LabelParams, the
checks of a dtype against them, `foreground_mask` (the CPU backend's stages call it) and
`tau_tolerance` (the CPU backend's tolerances). The engines apply the foreground test and the
tau rule in their own code (the C engine; foreground.cuh on CUDA), which the tests hold to the
README against independent references.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

#: dtypes a backend accepts (1-bit images are bool).
SUPPORTED_DTYPES = (
    np.dtype(np.bool_),
    np.dtype(np.uint8),
    np.dtype(np.int8),
    np.dtype(np.uint16),
    np.dtype(np.int16),
    np.dtype(np.uint32),
    np.dtype(np.int32),
    np.dtype(np.float32),
    np.dtype(np.float64),
)

#: Connectivities of 2-D images: 4 (edges), 8 (and corners).
IMAGE_CONNECTIVITIES = (4, 8)
#: Connectivities of 3-D volumes: 6 (faces), 18 (and edges), 26 (and corners), the
#: neighbourhoods of scipy.ndimage.generate_binary_structure(3, 1 | 2 | 3).
VOLUME_CONNECTIVITIES = (6, 18, 26)
#: What a threshold sees a 1-bit pixel's 1 (white) as: 0 and 255, as an 8-bit image of the
#: same page holds them, so that one --threshold serves a folder of G4 TIFFs and JPEGs.
ONE_BIT_WHITE = 255


@dataclass(frozen=True)
class LabelParams:
    """How one batch is labeled.

    background: value that is not foreground (compared after `invert`); None
        makes every (non-NaN) pixel foreground.
    invert: flip intensities first (dtype max - v for integers, not v for
        1-bit, -v for floats); tau differences are unchanged by it.
    threshold: binarize on the original values instead of the background test:
        foreground is v > threshold (v < threshold with invert); a 1-bit pixel
        is 0 or ONE_BIT_WHITE to it (`stored_threshold`).
    tau: None for binary labeling; else neighbours p, q join when
        v(p) == v(q) or |v(p) - v(q)| <= the tolerance (computed in float64), chaining.
    tau_relative, tau_quadratic: the tolerance grows with the values: it is
        tau + tau_relative * m + tau_quadratic * m**2 with m = max(|v(p)|, |v(q)|)
        (`tau_tolerance`); both 0 (an absolute tau) in binary mode.
    connectivity: 4 or 8 labels 2-D images, 6, 18 or 26 3-D volumes (`rank`).
    min_area: components with fewer pixels are removed (label 0) and the
        survivors renumbered.
    max_area: components with more pixels are removed too (None: no limit).
    largest: of the components min_area and max_area keep, only the K largest
        stay (the lower label first on equal areas; None: all).
    fill_holes: the kept components' holes become part of them before the
        statistics. The order of these steps: ccl_cli.contract.cleaning.
    morphology: ("erode" | "dilate" | "open" | "close", N) steps applied in
        order to the foreground mask before labeling (ccl_cli.contract.stages).
    smooth: ("box" | "binomial", R) nodata-aware smoothing before tau labeling
        (ignored in binary mode; ccl_cli.contract.stages).
    polygons: also trace the kept components' outlines (ccl_cli.contract.outlines).
    """

    background: float | None = 0
    invert: bool = False
    threshold: float | None = None
    tau: float | None = None
    tau_relative: float = 0.0
    tau_quadratic: float = 0.0
    connectivity: int = 8
    min_area: int = 0
    max_area: int | None = None
    largest: int | None = None
    fill_holes: bool = False
    morphology: tuple[tuple[str, int], ...] = ()
    smooth: tuple[str, int] | None = None
    polygons: bool = False

    @property
    def mode(self) -> str:
        """'tau' when a tau is given, else 'binary'."""
        return "binary" if self.tau is None else "tau"

    @property
    def rank(self) -> int:
        """2 for images (connectivity 4 or 8), 3 for volumes (6, 18 or 26)."""
        return 3 if self.connectivity in VOLUME_CONNECTIVITIES else 2

    def at_rank(self, rank: int) -> LabelParams:
        """These parameters for an input of `rank` (2 an image, 3 a volume), as the command
        line labels files of both kinds with one --connectivity: a connectivity names a
        neighbourhood, taken in the input's rank (AT_RANK)."""
        if rank == self.rank:
            return self
        return replace(self, connectivity=AT_RANK[rank][self.connectivity])


#: The connectivity of each neighbourhood in the other rank (LabelParams.at_rank): faces only
#: (4, 6) stay faces only; every neighbour (8, 26) stays every neighbour; 18, faces and
#: edges, is 8 in an image, whose pixels' edges are their faces.
AT_RANK = {2: {6: 4, 18: 8, 26: 8}, 3: {4: 6, 8: 26}}


def canonical_bools(values: Any, xp: Any = np) -> Any:
    """`values` with booleans stored as bytes 0/1.

    Pillow (and other producers of bool views of bytes) hand out bool arrays
    whose True bytes are 255; numpy and the kernels would read those as 255
    in tau differences and statistics. Other dtypes pass through unchanged.
    """
    if np.dtype(values.dtype) == np.bool_:
        return values.view(xp.uint8) != 0
    return values


def dtype_max(dtype: np.dtype) -> int:
    """The largest value of an integer or 1-bit dtype (what `invert` subtracts from)."""
    if dtype == np.bool_:
        return 1
    return int(np.iinfo(dtype).max)


def foreground_problem(dtype: np.dtype, params: LabelParams, python: bool = False) -> str | None:
    """Why the foreground test cannot work on images of `dtype`, or None.

    A background that no value of an integer dtype can take (70000 for
    uint16, 0.5 for any integer type) would make every pixel foreground, and so
    would a threshold past the end of an integer dtype's range (-1 for uint8;
    1-bit: 0 and ONE_BIT_WHITE) that every value passes.
    python: the options are named as the Python API's keywords, not as flags.
    """
    dtype = np.dtype(dtype)
    if params.threshold is not None:
        return _threshold_problem(dtype, params.threshold, params.invert, python)
    background = params.background
    if background is None or dtype.kind == "f":
        return None
    low, high = _value_range(dtype)
    if params.invert:  # the test sees max - v
        low, high = dtype_max(dtype) - high, dtype_max(dtype) - low
    if float(background).is_integer() and low <= background <= high:
        return None
    after = (" after invert=True" if python else " after --invert") if params.invert else ""
    given = f"background={background}" if python else f"--background {background}"
    return (
        f"{given} is not a {dtype.name} value ({low}..{high}{after}): "
        "every pixel would be foreground"
    )


def _value_range(dtype: np.dtype) -> tuple[int, int]:
    """The smallest and largest value of an integer or 1-bit dtype."""
    if dtype.kind == "b":
        return 0, 1
    return int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)


def _threshold_problem(dtype: np.dtype, threshold: float, invert: bool, python: bool) -> str | None:
    """foreground_problem of a threshold: one that every value of `dtype` passes."""
    if dtype.kind == "f":
        return None
    low, high = (0, ONE_BIT_WHITE) if dtype.kind == "b" else _value_range(dtype)
    if not (threshold > high if invert else threshold < low):
        return None
    given = f"threshold={threshold}" if python else f"--threshold {threshold}"
    given += (" with invert=True" if python else " with --invert") if invert else ""
    side = "above" if invert else "below"
    what = "a 1-bit image's 0 and 255" if dtype.kind == "b" else f"every {dtype.name} value"
    return f"{given} is {side} {what}: every pixel would be foreground"


def stored_threshold(dtype: np.dtype, params: LabelParams) -> float | None:
    """The threshold that the stored values of `dtype` are compared with: `params.threshold`,
    except for 1-bit images, whose pixels it sees as 0 and ONE_BIT_WHITE: there the one of
    -0.5, 0.5, 1.5 that gives the same test on 0 and 1."""
    threshold = params.threshold
    if threshold is None or np.dtype(dtype).kind != "b":
        return threshold
    below_black = threshold <= 0 if params.invert else threshold < 0
    above_white = threshold > ONE_BIT_WHITE if params.invert else threshold >= ONE_BIT_WHITE
    return -0.5 if below_black else 1.5 if above_white else 0.5


def threshold_side(values: Any, params: LabelParams) -> str:
    """What to say of an image whose every value falls on one side of the threshold, so
    that every pixel is foreground or none is (a threshold meant for images of another
    kind, most likely), else ""."""
    threshold = stored_threshold(values.dtype, params)
    if threshold is None or values.size == 0:
        return ""
    low, high = np.fmin.reduce(values, axis=None), np.fmax.reduce(values, axis=None)
    if low != low:  # every value NaN: no pixel is foreground, whatever the threshold
        return ""
    if params.invert:
        every, none, side = high < threshold, low >= threshold, "below"
    else:
        every, none, side = low > threshold, high <= threshold, "above"
    if not (every or none):
        return ""
    kind = " (1-bit: 0 and 255 to a threshold)" if values.dtype.kind == "b" else ""
    values_said = "every value is" if every else "no value is"
    outcome = "every pixel" if every else "no pixel"
    given = f"--threshold {params.threshold}{' with --invert' if params.invert else ''}"
    return f"{values_said} {side} {given}{kind}: {outcome} is foreground"


def foreground_mask(values: Any, params: LabelParams, xp: Any = np) -> Any:
    """Boolean mask of the pixels that take part in labeling. NaN never does.

    Equal to `v != background`, where v is the value inverted when asked
    (dtype max - v for integers and 1-bit, -v for floats, in a wide type that
    cannot wrap), or to the threshold test on the original values (a 1-bit
    pixel being 0 or ONE_BIT_WHITE to it: stored_threshold); computed
    without widening: the inversion moves to
    the scalar side (max - v != b  <=>  v != max - b; -v != b  <=>  v != -b).
    """
    dtype = np.dtype(values.dtype)
    stored = stored_threshold(dtype, params)
    if stored is not None:
        threshold = _exact_scalar(dtype, stored)
        mask = values < threshold if params.invert else values > threshold
    elif params.background is None:
        mask = xp.ones(values.shape, dtype=bool)
    else:
        target = params.background
        if params.invert:
            target = -target if dtype.kind == "f" else dtype_max(dtype) - target
        mask = values != _exact_scalar(dtype, target)
    if dtype.kind == "f":
        mask &= ~xp.isnan(values)
    return mask


def _exact_scalar(dtype: np.dtype, value: float) -> Any:
    """`value` as a scalar of `dtype` where that is exact (a fast native comparison),
    else as float64 (comparisons with it are exact for every supported dtype too)."""
    if dtype.kind == "f":
        with np.errstate(over="ignore"):
            native = dtype.type(value)
        if native == value:  # NaN and values float32 cannot hold fail this
            return native
    elif float(value).is_integer():
        low, high = _value_range(dtype)
        if low <= value <= high:
            return dtype.type(int(value))
    return np.float64(value)


def tau_tolerance(m: Any, tau: float, relative: float, quadratic: float, xp: Any = np) -> Any:
    """The tolerance of neighbours whose larger magnitude is `m` (float64, elementwise):
    tau + relative * m + quadratic * (m * m), added in this order, each product and sum
    rounded on its own (never a fused multiply-add). A zero coefficient adds nothing, even
    where m is infinite (where a positive one makes the tolerance infinite)."""
    limit = xp.full(m.shape, tau, xp.float64)
    with np.errstate(over="ignore"):
        if relative > 0:
            limit = limit + relative * m
        if quadratic > 0:
            limit = limit + quadratic * (m * m)
    return limit


def tau_joins(
    a: Any, b: Any, tau: float, xp: Any = np, relative: float = 0.0, quadratic: float = 0.0
) -> Any:
    """Whether neighbouring values a and b join under the tolerance (elementwise): the joins
    across chunk seams of chunked volumes (chunked/seams.py); the engines apply the same rule
    in C and CUDA.

    Equal values always join (so +inf next to +inf does); otherwise the
    difference is taken in float64 (exact for every integer dtype) and compared
    with tau_tolerance(max(|a|, |b|)), which is tau unless relative or quadratic
    is positive. NaN joins nothing (it is never foreground anyway).
    """
    a64 = a.astype(xp.float64)
    b64 = b.astype(xp.float64)
    limit: Any = tau
    if relative > 0 or quadratic > 0:
        limit = tau_tolerance(xp.maximum(xp.abs(a64), xp.abs(b64)), tau, relative, quadratic, xp)
    if np.dtype(a.dtype).kind == "f":
        with np.errstate(invalid="ignore"):  # inf - inf is NaN: joins only if equal
            return (a64 == b64) | (xp.abs(a64 - b64) <= limit)
    # Integer differences are never negative: a tau below 0 still joins equal values.
    diff = xp.abs(a.astype(xp.int64) - b.astype(xp.int64))
    return (diff == 0) | (diff.astype(xp.float64) <= limit)
