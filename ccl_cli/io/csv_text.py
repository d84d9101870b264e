"""Numeric columns as CSV text, in bulk: what Python's str and repr would print.

A statistics CSV has one row per component (tens of thousands for a document
scan) and eleven columns; printing every value with str/repr would be most
of the time spent writing it. Here every column becomes a matrix of ASCII
bytes, one row per value, padded with NUL bytes; the matrices and the
separators are laid side by side and the NULs dropped, which leaves the CSV
text.

* Integers: decimal digits computed with numpy, as str prints them.
* Floats: the shortest text that reads back to the same float64, as repr
  prints it. orjson's serializer (Ryu-style shortest digits, in C) prints the
  same digits, and the same text wherever repr uses plain notation
  (1e-4 <= |x| < 1e16, and zero); the other values (exponents, NaN,
  infinities) go through repr. `ORJSON_MATCHES_REPR` checks that agreement
  once per process on values at the edges, and everything goes through repr
  should an orjson version ever print differently.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import orjson

from ..contract.stats import CSV_COLUMNS, VOLUME_CSV_COLUMNS, StatsTable

#: Tables of at most this many rows are printed row by row (_rows_one_by_one): below it
#: numpy's fixed cost per call outweighs what the bulk path saves.
SHORT_TABLE_ROWS = 128
#: Rows printed at a time: a table of millions of rows (a checkerboard's pixels) becomes text
#: and is written a piece at a time, each piece's working arrays a few MB.
CSV_PIECE_ROWS = 1 << 14
#: repr prints these floats in plain notation, and so does orjson (module docstring).
_PLAIN_LOW, _PLAIN_HIGH = 1e-4, 1e16
_NUMPY = orjson.OPT_SERIALIZE_NUMPY


def int_texts(values: np.ndarray) -> np.ndarray:
    """(len(values), width) uint8: str() of each integer, right-aligned, NUL-padded."""
    values = np.asarray(values, np.int64)
    magnitude = np.abs(values).astype(np.uint64)  # supported pixel values are far from int64's min
    digits = len(str(int(magnitude.max(initial=0))))
    text = np.zeros((len(values), digits + 1), np.uint8)
    text[:, 0] = np.where(values < 0, ord("-"), 0)
    rest = magnitude.copy()
    for place in range(digits):  # ones, tens, ...: right to left
        column = text[:, digits - place]
        column[...] = ord("0") + (rest % 10).astype(np.uint8)
        if place:
            column[magnitude < 10**place] = 0  # no leading zeros
        rest //= 10
    return text


def float_texts(values: np.ndarray) -> np.ndarray:
    """(len(values), width) uint8: repr() of each float64, left-aligned, NUL-padded."""
    values = np.asarray(values, np.float64)
    texts = np.empty(len(values), object)
    magnitude = np.abs(values)
    plain = (magnitude == 0) | ((magnitude >= _PLAIN_LOW) & (magnitude < _PLAIN_HIGH))
    if not ORJSON_MATCHES_REPR:
        plain[:] = False
    if plain.any():
        texts[plain] = _orjson_texts(values[plain])
    if not plain.all():
        texts[~plain] = [repr(value).encode() for value in values[~plain].tolist()]
    if len(values) == 0:
        return np.zeros((0, 1), np.uint8)
    return np.array(texts.tolist(), "S").view(np.uint8).reshape(len(values), -1)


def csv_rows(columns: Sequence[np.ndarray]) -> bytes:
    """The rows of a CSV from the text matrices of its columns (all of the same length):
    values separated by commas, each row ended by a newline."""
    count = len(columns[0])
    comma = np.full((count, 1), ord(","), np.uint8)
    pieces: list[np.ndarray] = []
    for column in columns:
        pieces += [column, comma]
    pieces[-1] = np.full((count, 1), ord("\n"), np.uint8)
    text = np.hstack(pieces)
    return text[text != 0].tobytes()


def _orjson_texts(values: np.ndarray) -> list[bytes]:
    """orjson's text of each float64, as bytes."""
    return orjson.dumps(np.ascontiguousarray(values), option=_NUMPY)[1:-1].split(b",")


def _orjson_matches_repr() -> bool:
    """Whether orjson prints repr's text for plain-notation floats, on edge cases."""
    edges = [_PLAIN_LOW, float(np.nextafter(_PLAIN_HIGH, 0)), 1e15, 123456789012345.6]
    samples = [0.0, -0.0, 1.0, -2.5, 0.1, 1 / 3, -2 / 3, 4.35, 1234.5714285714287, *edges]
    return _orjson_texts(np.array(samples)) == [repr(value).encode() for value in samples]


ORJSON_MATCHES_REPR = _orjson_matches_repr()


def stats_csv(table: StatsTable) -> Iterator[bytes]:
    """The statistics CSV (header + one row per label, in label order), ASCII, in pieces of
    at most CSV_PIECE_ROWS rows, the header first: whatever the table's length, the text of
    one piece at a time is in memory.

    Integers print as str prints them, floats as the shortest text that reads
    back to the same float64 (Python's repr); min and max print as integers
    for integer images. Built column-wise in bulk (csv_text): tables of
    document scans and random images have tens of thousands of rows.
    """
    yield (",".join(CSV_COLUMNS) + "\n").encode("ascii")
    if len(table) <= SHORT_TABLE_ROWS:
        yield _rows_one_by_one(table).encode("ascii")
        return
    values = int_texts if table.integer_values else float_texts
    for start in range(0, len(table), CSV_PIECE_ROWS):
        rows = slice(start, start + CSV_PIECE_ROWS)
        labels = np.arange(start + 1, min(start + CSV_PIECE_ROWS, len(table)) + 1)
        columns = [
            int_texts(labels),
            int_texts(table.area[rows]),
            int_texts(table.x[rows]),
            int_texts(table.y[rows]),
            int_texts(table.width[rows]),
            int_texts(table.height[rows]),
            float_texts(table.centroid_x[rows]),
            float_texts(table.centroid_y[rows]),
            float_texts(table.mean[rows]),
            values(table.min[rows]),
            values(table.max[rows]),
        ]
        yield csv_rows(columns)


def _rows_one_by_one(table: StatsTable) -> str:
    """The CSV rows of a short table: every row as one orjson array where every float
    prints as repr would (module docstring), else each value printed by str or repr."""
    count = len(table)
    ints = [table.area, table.x, table.y, table.width, table.height]
    floats = [table.centroid_x, table.centroid_y, table.mean]
    if table.integer_values:
        ints += [table.min.astype(np.int64), table.max.astype(np.int64)]
    else:
        floats += [table.min, table.max]
    ints[5:5] = floats  # the columns' order: area..height, centroids, mean, min, max
    rows = zip(range(1, count + 1), *(column.tolist() for column in ints), strict=True)
    if count and ORJSON_MATCHES_REPR and _all_plain(np.stack(floats)):
        text = orjson.dumps(list(rows))  # b"[[1,4,...],[2,...]]"
        return text[2:-2].replace(b"],[", b"\n").decode("ascii") + "\n"
    return "".join(
        f"{i},{a},{x},{y},{w},{h},{cx!r},{cy!r},{mean!r},{low!r},{high!r}\n"
        for i, a, x, y, w, h, cx, cy, mean, low, high in rows
    )


def _all_plain(values: np.ndarray) -> bool:
    """Whether every value is zero or of a magnitude that repr prints in plain notation."""
    magnitude = np.abs(values)
    plain = (magnitude >= _PLAIN_LOW) & (magnitude < _PLAIN_HIGH)  # False for NaN
    return bool(np.count_nonzero(magnitude) == np.count_nonzero(plain))


def volume_stats_csv(table: StatsTable, physical: dict[str, np.ndarray]) -> Iterator[bytes]:
    """A volume's statistics CSV: VOLUME_CSV_COLUMNS (the image columns with z, depth and
    centroid_z; area counts voxels), then the `physical` columns (io/volumes'
    physical_columns: the volume and world centroid in the file's units) where the voxel
    size is known; printed as stats_csv prints, in pieces of CSV_PIECE_ROWS rows."""
    names = [*VOLUME_CSV_COLUMNS, *physical]
    yield (",".join(names) + "\n").encode("ascii")
    values = int_texts if table.integer_values else float_texts
    ints = {"area", "x", "y", "z", "width", "height", "depth"}
    for start in range(0, len(table), CSV_PIECE_ROWS):
        rows = slice(start, start + CSV_PIECE_ROWS)
        columns = [int_texts(np.arange(start + 1, min(start + CSV_PIECE_ROWS, len(table)) + 1))]
        for name in VOLUME_CSV_COLUMNS[1:]:
            column = table[name][rows]
            texts = int_texts if name in ints else values if name in ("min", "max") else None
            columns.append((texts or float_texts)(column))
        columns += [float_texts(physical[name][rows]) for name in physical]
        yield csv_rows(columns)
