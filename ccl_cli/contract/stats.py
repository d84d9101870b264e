"""Per-component statistics: the table type, the exact arithmetic rules, the CSV form.

Both backends must produce these numbers bit for bit, so the rules that are not
plain integer sums are fixed here:

* centroid_x = sum(x) / area and centroid_y = sum(y) / area, with the sums exact
  (64-bit integers) and one IEEE float64 division.
* min and max order -0.0 below +0.0 (IEEE totalOrder), so a component holding
  both zeros has min -0.0 and max 0.0 whatever the pixel order.
* mean of an integer or 1-bit image = float64(sum(v)) / area, sum exact in int64.
* mean of a float image: floating-point sums depend on the order of additions,
  which a GPU does not fix. So every finite value is first turned into an
  integer in a deterministic way, and the integers are summed (order-free):
  with e the frexp exponent of the component's largest finite |v| (|v| < 2**e)
  and a = ceil(log2(area)), shift s = 62 - a - e, term = trunc(v * 2**s) as
  int64 (|sum| < 2**62), mean = ldexp(float64(sum), -s) / area. That keeps at
  least 62 - a significant bits relative to the component's largest value.
  A component holding +inf has mean +inf, -inf gives -inf, both give nan.
* A component holding a NaN (a hole's NaN pixels filled by --fill-holes) has
  mean, min and max NaN, as numpy's mean, min and max of its values would.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, SupportsIndex, overload

import numpy as np

CSV_COLUMNS = (
    "label",
    "area",
    "x",
    "y",
    "width",
    "height",
    "centroid_x",
    "centroid_y",
    "mean",
    "min",
    "max",
)

#: A volume's columns: an image's, with z, depth and centroid_z beside their x and y
#: counterparts; area counts voxels (as min_area does, and scikit-image's regionprops).
VOLUME_CSV_COLUMNS = (
    "label",
    "area",
    "x",
    "y",
    "z",
    "width",
    "height",
    "depth",
    "centroid_x",
    "centroid_y",
    "centroid_z",
    "mean",
    "min",
    "max",
)

#: Bits of headroom in the int64 accumulator of float means (see module doc).
FLOAT_SUM_BITS = 62


class StatsRow(NamedTuple):
    """One component's statistics (one row of a StatsTable, one line of the CSV)."""

    label: int
    area: int
    x: int
    y: int
    width: int
    height: int
    centroid_x: float
    centroid_y: float
    mean: float
    min: float  # min and max are ints for integer images, as in the CSV
    max: float


class VolumeStatsRow(NamedTuple):
    """One component's statistics in a volume (VOLUME_CSV_COLUMNS)."""

    label: int
    area: int
    x: int
    y: int
    z: int
    width: int
    height: int
    depth: int
    centroid_x: float
    centroid_y: float
    centroid_z: float
    mean: float
    min: float  # as in StatsRow
    max: float


@dataclass
class StatsTable:
    """Statistics of the kept components of one image or volume, row i = label i + 1.

    Integer columns are int64; centroid_x/centroid_y/mean/min/max are float64
    (min/max hold the original values, exactly representable for every
    supported dtype). `integer_values` says whether min/max print as integers.
    A volume's table also has z, depth (int64) and centroid_z (float64), and its
    area counts voxels; an image's has None there.

    As a table: len(table) rows; row i describes label i + 1 (the `label`
    column); table[i] is row i as a StatsRow (a VolumeStatsRow for a volume;
    negative i from the end), table["area"] a column; iterating gives the
    rows; to_dict() and to_pandas() give the columns in the CSV's order.
    """

    area: np.ndarray
    x: np.ndarray
    y: np.ndarray
    width: np.ndarray
    height: np.ndarray
    centroid_x: np.ndarray
    centroid_y: np.ndarray
    mean: np.ndarray
    min: np.ndarray
    max: np.ndarray
    integer_values: bool
    z: np.ndarray | None = None
    depth: np.ndarray | None = None
    centroid_z: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.area.shape[0])

    @property
    def is_volume(self) -> bool:
        """Whether this is a volume's table (with z, depth and centroid_z)."""
        return self.z is not None

    def columns(self) -> dict[str, np.ndarray]:
        """The columns present, by name, in CSV order (without the label)."""
        return {name: getattr(self, name) for name in self.column_names()[1:]}

    def column_names(self) -> tuple[str, ...]:
        """The CSV's columns of this table: an image's or a volume's."""
        return VOLUME_CSV_COLUMNS if self.is_volume else CSV_COLUMNS

    @property
    def label(self) -> np.ndarray:
        """Each row's label: 1..K' (int64)."""
        return np.arange(1, len(self) + 1, dtype=np.int64)

    @overload
    def __getitem__(self, key: str) -> np.ndarray: ...
    @overload
    def __getitem__(self, key: SupportsIndex) -> StatsRow | VolumeStatsRow: ...

    def __getitem__(self, key: str | SupportsIndex) -> np.ndarray | StatsRow | VolumeStatsRow:
        """A column by name, or one row (class docstring)."""
        names = self.column_names()
        if isinstance(key, str):
            if key not in names:
                raise KeyError(f"no column {key!r}; the columns are {', '.join(names)}")
            column: np.ndarray = getattr(self, key)
            return column
        if isinstance(key, slice):
            raise TypeError("a StatsTable is indexed by a row number or a column name")
        row = range(len(self))[operator.index(key)]  # IndexError past the end
        values = [getattr(self, name)[row].item() for name in names]
        if self.integer_values:  # min and max as the CSV writes them
            values[-2:] = [int(value) for value in values[-2:]]
        return VolumeStatsRow(*values) if self.is_volume else StatsRow(*values)

    def __iter__(self) -> Iterator[StatsRow | VolumeStatsRow]:
        return (self[row] for row in range(len(self)))

    def to_dict(self) -> dict[str, np.ndarray]:
        """The columns by name, in the CSV's order (as skimage's regionprops_table gives them)."""
        return {name: getattr(self, name) for name in self.column_names()}

    def to_pandas(self) -> Any:
        """A pandas DataFrame of the columns, in the CSV's order (pandas must be installed)."""
        try:
            import pandas
        except ImportError:
            raise ImportError("StatsTable.to_pandas() needs pandas: pip install pandas") from None
        return pandas.DataFrame(self.to_dict())

    def take(self, rows: np.ndarray | slice) -> StatsTable:
        """The table restricted to / reordered by `rows` (indices into this table,
        or a slice, which gives views of this table's columns)."""
        columns = {name: column[rows] for name, column in self.columns().items()}
        return StatsTable(**columns, integer_values=self.integer_values)

    def copy(self) -> StatsTable:
        """The table with columns of its own (the CUDA backend's are views of
        page-locked memory, which a caller that keeps tables should not hold)."""
        return self.take(np.arange(len(self)))

    def equals(self, other: StatsTable) -> bool:
        """Equality as the CPU/GPU contract demands: every value and the sign of every zero
        (-0.0 prints differently from 0.0); NaN equals NaN."""
        if self.integer_values != other.integer_values or self.is_volume != other.is_volume:
            return False
        for name, a in self.columns().items():
            b = getattr(other, name)
            if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
                return False
            if a.dtype.kind == "f" and not np.array_equal(np.signbit(a), np.signbit(b)):
                return False
        return True


def empty_table(integer_values: bool, rank: int = 2) -> StatsTable:
    """A table with no rows, of an image (rank 2) or a volume (rank 3)."""
    ints = np.zeros(0, np.int64)
    floats = np.zeros(0, np.float64)
    table = StatsTable(
        ints, ints, ints, ints, ints, floats, floats, floats, floats, floats, integer_values
    )
    if rank == 3:
        table.z, table.depth, table.centroid_z = ints, ints, floats
    return table


def float_sum_shift(absmax: np.ndarray, area: np.ndarray) -> np.ndarray:
    """The per-component power-of-two scale s of the float-mean rule (module doc)."""
    _, exponent = np.frexp(absmax.astype(np.float64))
    # ceil(log2(area)) exactly, as the bit length of area - 1 (frexp's exponent
    # of an integer below 2**53 is its bit length), as stats.cuh computes it.
    _, area_bits = np.frexp((np.maximum(area, 1) - 1).astype(np.float64))
    return FLOAT_SUM_BITS - area_bits.astype(np.int64) - exponent.astype(np.int64)


def float_mean(
    scaled_sum: np.ndarray,
    shift: np.ndarray,
    area: np.ndarray,
    v_min: np.ndarray,
    v_max: np.ndarray,
) -> np.ndarray:
    """Mean of float components from their scaled integer sums and their extremes
    (module doc)."""
    mean = np.ldexp(scaled_sum.astype(np.float64), -shift) / area.astype(np.float64)
    has_pos_inf, has_neg_inf = v_max == np.inf, v_min == -np.inf
    mean = np.where(has_pos_inf, np.inf, mean)
    mean = np.where(has_neg_inf, -np.inf, mean)
    unknown = (has_pos_inf & has_neg_inf) | np.isnan(v_min) | np.isnan(v_max)
    return np.where(unknown, np.nan, mean)


def nan_extremes(v_min: np.ndarray, v_max: np.ndarray) -> None:
    """Make min and max NaN (in place) for the components that hold a NaN (module doc):
    IEEE totalOrder puts a NaN at one end, so one of the two shows it."""
    holds_nan = np.isnan(v_min) | np.isnan(v_max)
    v_min[holds_nan] = np.nan
    v_max[holds_nan] = np.nan
