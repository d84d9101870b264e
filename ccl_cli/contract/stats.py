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

#: How many rows a StatsTable's repr shows at most: half from the start, half from the end.
REPR_ROWS = 10
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


@dataclass(repr=False)
class StatsTable:
    """Statistics of the kept components of one image or volume, one row per component.

    Integer columns are int64; centroid_x/centroid_y/mean/min/max are float64
    (min/max hold the original values, exactly representable for every
    supported dtype). `integer_values` says whether min/max are integers (as the
    CSV, the rows, to_dict() and to_pandas() give them). A volume's table also has
    z, depth (int64) and centroid_z (float64), and its area counts voxels; an
    image's has None there. `label_column`: each row's label, None for 1..K' in
    order (a table as labeling makes it).

    As a table: len(table) rows; `columns` the column names in the CSV's order;
    table[i] is row i as a StatsRow (a VolumeStatsRow for a volume; negative i
    from the end), table["area"] a column; table[1:3], table[mask] (a boolean
    array, one per row) and table[rows] (row numbers) a StatsTable of those rows,
    their labels kept (table[table["area"] > 50]); iterating gives the rows;
    to_dict() and to_pandas() give the columns.
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
    label_column: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.area.shape[0])

    @property
    def is_volume(self) -> bool:
        """Whether this is a volume's table (with z, depth and centroid_z)."""
        return self.z is not None

    @property
    def columns(self) -> tuple[str, ...]:
        """The column names, in the CSV's order: an image's or a volume's."""
        return VOLUME_CSV_COLUMNS if self.is_volume else CSV_COLUMNS

    def measured(self) -> dict[str, np.ndarray]:
        """The columns but the label, by name, in CSV order, as stored."""
        return {name: getattr(self, name) for name in self.columns[1:]}

    @property
    def label(self) -> np.ndarray:
        """Each row's label (int64): 1..K' unless the rows were picked (class docstring)."""
        if self.label_column is not None:
            return self.label_column
        return np.arange(1, len(self) + 1, dtype=np.int64)

    @overload
    def __getitem__(self, key: str) -> np.ndarray: ...
    @overload  # (a numpy array has __index__ too: picked rows come first)
    def __getitem__(  # type: ignore[overload-overlap]
        self, key: slice | np.ndarray | list[Any]
    ) -> StatsTable: ...
    @overload
    def __getitem__(self, key: SupportsIndex) -> StatsRow | VolumeStatsRow: ...

    def __getitem__(
        self, key: str | SupportsIndex | slice | np.ndarray | list[Any]
    ) -> np.ndarray | StatsRow | VolumeStatsRow | StatsTable:
        """A column by name, one row, or a table of some rows (class docstring)."""
        if isinstance(key, str):
            if key not in self.columns:
                raise KeyError(
                    f"StatsTable: no column {key!r}; the columns are {', '.join(self.columns)}"
                )
            column: np.ndarray = self.label if key == "label" else getattr(self, key)
            return column
        if isinstance(key, (slice, np.ndarray, list)):
            return self._rows(key)
        try:
            row = range(len(self))[operator.index(key)]
        except IndexError:
            raise IndexError(f"StatsTable: row {key} of {len(self)}") from None
        except TypeError:
            raise TypeError(
                "StatsTable: index it by a column name, a row number, a slice, a boolean "
                f"mask or an array of row numbers, not {type(key).__name__}"
            ) from None
        values = [column[row].item() for column in self.to_dict().values()]
        return VolumeStatsRow(*values) if self.is_volume else StatsRow(*values)

    def _rows(self, key: slice | np.ndarray | list[Any]) -> StatsTable:
        """The table of the rows `key` picks, their labels kept."""
        picker = np.asarray(key) if isinstance(key, list) else key
        if isinstance(picker, np.ndarray):
            if picker.ndim != 1 or not (picker.dtype.kind in "biu" or picker.size == 0):
                raise IndexError(
                    "StatsTable: rows are picked by a 1-D boolean mask or row numbers, "
                    f"got a {picker.ndim}-D {picker.dtype} array"
                )
            if picker.dtype == np.bool_ and picker.shape[0] != len(self):
                raise IndexError(
                    f"StatsTable: a boolean mask needs one value per row ({len(self)}), "
                    f"got {picker.shape[0]}"
                )
            if picker.size == 0:
                picker = picker.astype(np.int64)
        try:
            labels = self.label[picker]
        except IndexError as error:
            raise IndexError(f"StatsTable: {error}") from None
        picked = self.take(picker)
        picked.label_column = labels
        return picked

    def __iter__(self) -> Iterator[StatsRow | VolumeStatsRow]:
        return (self[row] for row in range(len(self)))

    def to_dict(self) -> dict[str, np.ndarray]:
        """The columns by name, in the CSV's order (as skimage's regionprops_table gives
        them); min and max as int64 for integer images."""
        columns = {"label": self.label, **self.measured()}
        if self.integer_values:
            columns["min"] = columns["min"].astype(np.int64)
            columns["max"] = columns["max"].astype(np.int64)
        return columns

    def to_pandas(self) -> Any:
        """A pandas DataFrame of to_dict()'s columns (pandas must be installed)."""
        try:
            import pandas
        except ImportError:
            raise ImportError("StatsTable.to_pandas: needs pandas: pip install pandas") from None
        return pandas.DataFrame(self.to_dict())

    def __repr__(self) -> str:
        """The size, then the first and last rows (all of a short table), as pandas shows a
        DataFrame."""
        kind = "a volume" if self.is_volume else "an image"
        head = f"StatsTable of {kind}: {len(self)} rows x {len(self.columns)} columns"
        if len(self) == 0:
            return f"{head} ({', '.join(self.columns)})"
        shown = (
            range(len(self))
            if len(self) <= REPR_ROWS
            else [*range(REPR_ROWS // 2), -1, *range(len(self) - REPR_ROWS // 2, len(self))]
        )
        columns = self.to_dict()
        cells = [list(self.columns)]
        for row in shown:
            cells.append(
                ["..."] * len(columns)
                if row < 0
                else [_cell(column[row].item()) for column in columns.values()]
            )
        widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
        lines = [
            "  ".join(text.rjust(w) for text, w in zip(line, widths, strict=True)) for line in cells
        ]
        return "\n".join([head, *lines])

    def take(self, rows: np.ndarray | slice) -> StatsTable:
        """The table restricted to / reordered by `rows` (indices into this table,
        or a slice, which gives views of this table's columns), numbered 1..len again:
        what labeling hands on (a batch's table split per image, the components an
        area filter keeps). table[rows] keeps the labels instead."""
        columns = {name: column[rows] for name, column in self.measured().items()}
        return StatsTable(**columns, integer_values=self.integer_values)

    def copy(self) -> StatsTable:
        """The table with columns of its own (the CUDA backend's are views of
        page-locked memory, which a caller that keeps tables should not hold)."""
        copied = self.take(np.arange(len(self)))
        if self.label_column is not None:
            copied.label_column = self.label_column.copy()
        return copied

    def equals(self, other: StatsTable) -> bool:
        """Equality as the CPU/GPU contract demands: every value and the sign of every zero
        (-0.0 prints differently from 0.0); NaN equals NaN."""
        if self.integer_values != other.integer_values or self.is_volume != other.is_volume:
            return False
        if not np.array_equal(self.label, other.label):
            return False
        for name, a in self.measured().items():
            b = getattr(other, name)
            if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
                return False
            if a.dtype.kind == "f" and not np.array_equal(np.signbit(a), np.signbit(b)):
                return False
        return True


def _cell(value: int | float) -> str:
    """A value as repr shows it: integers whole, floats to 6 significant digits."""
    return str(value) if isinstance(value, int) else f"{value:.6g}"


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
