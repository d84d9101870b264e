"""Bulk CSV text (csv_text.py) against Python's own str and repr, value for value."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ccl_cli.contract.stats import CSV_COLUMNS, StatsTable
from ccl_cli.io import csv_text
from ccl_cli.io.csv_text import SHORT_TABLE_ROWS, csv_rows, float_texts, int_texts, stats_csv


def texts(matrix: np.ndarray) -> list[str]:
    """The text of each row of a NUL-padded text matrix."""
    return [row[row != 0].tobytes().decode("ascii") for row in matrix]


INT_EDGES = [0, -1, 1, 9, 10, 99, 100, 2**31 - 1, -(2**31), 2**32 - 1, 10**18, -(10**18)]
FLOAT_EDGES = [
    0.0,
    -0.0,
    1e-4,
    np.nextafter(1e-4, 0),
    1e16,
    np.nextafter(1e16, 0),
    -1e16,
    5e-324,
    1.7976931348623157e308,
    np.nan,
    np.inf,
    -np.inf,
    0.1,
    1 / 3,
    2.5,
    123456789.0,
]


def test_integers_at_the_edges():
    assert texts(int_texts(np.array(INT_EDGES))) == [str(value) for value in INT_EDGES]


@given(st.lists(st.integers(-(2**62), 2**62), max_size=40))
def test_integers_print_as_str(values: list[int]):
    assert texts(int_texts(np.array(values, np.int64))) == [str(value) for value in values]


def test_floats_at_the_edges():
    expected = [repr(float(value)) for value in FLOAT_EDGES]
    assert texts(float_texts(np.array(FLOAT_EDGES))) == expected


@pytest.mark.slow
@given(hnp.arrays(np.float64, st.integers(0, 40), elements=st.floats(width=64)))
def test_floats_print_as_repr(values: np.ndarray):
    assert texts(float_texts(values)) == [repr(value) for value in values.tolist()]


@given(
    st.lists(st.integers(-(10**6), 10**6), min_size=1, max_size=30),
    st.integers(1, 10**6),
)
def test_ratios_like_centroids_print_as_repr(sums: list[int], area: int):
    values = np.array(sums, np.int64).astype(np.float64) / area
    assert texts(float_texts(values)) == [repr(value) for value in values.tolist()]


def test_without_orjsons_agreement_every_float_goes_through_repr(monkeypatch):
    values = np.array([*FLOAT_EDGES, 1234.5714285714287])
    monkeypatch.setattr(csv_text, "ORJSON_MATCHES_REPR", False)
    assert texts(float_texts(values)) == [repr(value) for value in values.tolist()]


def test_this_orjson_prints_plain_floats_as_repr_does():
    assert csv_text.ORJSON_MATCHES_REPR


def test_rows_join_columns_with_commas_and_end_with_newlines():
    columns = [int_texts(np.array([1, 22, -3])), float_texts(np.array([0.5, -0.0, np.nan]))]
    assert csv_rows(columns) == b"1,0.5\n22,-0.0\n-3,nan\n"
    assert csv_rows([int_texts(np.zeros(0, np.int64))]) == b""


def reference_csv(table: StatsTable) -> str:
    """The statistics CSV printed value by value with str and repr."""
    value = str if table.integer_values else repr
    lines = [",".join(CSV_COLUMNS)]
    for i in range(len(table)):
        lines.append(
            ",".join(
                [
                    str(i + 1),
                    *(str(int(getattr(table, name)[i])) for name in CSV_COLUMNS[1:6]),
                    *(repr(float(getattr(table, name)[i])) for name in CSV_COLUMNS[6:9]),
                    value(int(table.min[i]) if table.integer_values else float(table.min[i])),
                    value(int(table.max[i]) if table.integer_values else float(table.max[i])),
                ]
            )
        )
    return "\n".join(lines) + "\n"


def text(table: StatsTable) -> str:
    """The whole CSV text of stats_csv's pieces."""
    return b"".join(stats_csv(table)).decode("ascii")


@pytest.mark.parametrize("integer_values", [True, False])
@pytest.mark.parametrize("count", [3, SHORT_TABLE_ROWS, SHORT_TABLE_ROWS + 1, 500])
def test_stats_csv_equals_printing_value_by_value(
    integer_values: bool, count: int, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(csv_text, "CSV_PIECE_ROWS", 150)  # 500 rows in four pieces
    rng = np.random.default_rng(int(integer_values))
    area = rng.integers(1, 10**6, count)
    values = rng.integers(-(2**31), 2**31, (2, count)).astype(np.float64)
    if not integer_values:
        values = values / 7 - 0.0
        values[:, :3] = [[np.nan, -np.inf, 1e300], [-0.0, 5e-324, np.inf]]
    table = StatsTable(
        area=area,
        x=rng.integers(0, 10**5, count),
        y=rng.integers(0, 10**5, count),
        width=rng.integers(1, 10**5, count),
        height=rng.integers(1, 10**5, count),
        centroid_x=rng.integers(0, 10**9, count) / area,
        centroid_y=rng.integers(0, 10**9, count) / area,
        mean=rng.integers(-(10**12), 10**12, count) / area,
        min=values.min(axis=0),
        max=values.max(axis=0),
        integer_values=integer_values,
    )
    assert text(table) == reference_csv(table)
    assert text(table.take(np.zeros(0, np.int64))) == ",".join(CSV_COLUMNS) + "\n"


@pytest.mark.parametrize("odd", [None, -0.0, 1e-5, np.nextafter(1e-4, 0), 1e16, np.nan, -np.inf])
@pytest.mark.parametrize("column", ["centroid_x", "mean", "min"])
def test_short_tables_print_as_repr_whatever_one_float_is(odd: float | None, column: str):
    rng = np.random.default_rng(5)
    count = 6
    values = rng.integers(-1000, 1000, (3, count)) / 7
    table = StatsTable(
        area=rng.integers(1, 100, count),
        x=rng.integers(0, 50, count),
        y=rng.integers(0, 50, count),
        width=rng.integers(1, 50, count),
        height=rng.integers(1, 50, count),
        centroid_x=rng.integers(0, 5000, count) / 7,
        centroid_y=rng.integers(0, 5000, count) / 7,
        mean=values[0],
        min=values[1],
        max=values[2],
        integer_values=False,
    )
    if odd is not None:
        getattr(table, column)[2] = odd
    assert text(table) == reference_csv(table)


def test_a_long_table_comes_in_pieces_of_bounded_rows(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(csv_text, "CSV_PIECE_ROWS", 1000)
    count = 4321
    ones = np.ones(count, np.int64)
    table = StatsTable(
        ones, ones, ones, ones, ones, ones * 0.5, ones * 0.5, ones * 1.0, ones, ones, True
    )
    pieces = list(stats_csv(table))
    assert [piece.count(b"\n") for piece in pieces] == [1, 1000, 1000, 1000, 1000, 321]
    assert b"".join(pieces).decode().splitlines()[-1].startswith("4321,1,")
