"""The statistics table of images and volumes: its columns, their order, rows and equality."""

from __future__ import annotations

import numpy as np
import pytest

from ccl_cli.contract.stats import CSV_COLUMNS, VOLUME_CSV_COLUMNS, StatsTable, empty_table


def volume_table() -> StatsTable:
    ints = [np.array([5, 7], np.int64) + k for k in range(5)]
    floats = [np.array([0.5, -0.0]) + k for k in range(5)]
    table = StatsTable(*ints, *floats, integer_values=False)
    table.z, table.depth = np.array([3, 4], np.int64), np.array([1, 2], np.int64)
    table.centroid_z = np.array([3.25, 4.5])
    return table


def test_a_volume_table_has_z_depth_and_centroid_z_beside_x_and_y() -> None:
    written_out = "label,area,x,y,z,width,height,depth,"
    written_out += "centroid_x,centroid_y,centroid_z,mean,min,max"
    assert ",".join(VOLUME_CSV_COLUMNS) == written_out
    table = volume_table()
    assert table.is_volume and list(table.measured()) == list(VOLUME_CSV_COLUMNS[1:])
    image = empty_table(True)
    assert not image.is_volume and list(image.measured()) == list(CSV_COLUMNS[1:])
    assert list(empty_table(True, rank=3).measured()) == list(VOLUME_CSV_COLUMNS[1:])


def test_rows_of_a_volume_table_keep_every_column() -> None:
    table = volume_table()
    second = table.take(np.array([1]))
    assert second.is_volume and second.z.tolist() == [4] and second.centroid_z.tolist() == [4.5]
    assert table.equals(table.copy()) and not table.equals(second)
    flat = table.copy()
    flat.z = flat.depth = flat.centroid_z = None
    assert not table.equals(flat) and not flat.equals(table)
    zero = table.copy()
    zero.centroid_z = np.array([3.25, -0.0])
    other = table.copy()
    other.centroid_z = np.array([3.25, 0.0])
    assert zero.equals(zero.copy()) and not zero.equals(other)  # the sign of a zero counts


def image_table(rows: int, integer_values: bool = True) -> StatsTable:
    """A table of `rows` components with distinct values in every column."""
    ints = [np.arange(rows, dtype=np.int64) * 10 + k for k in range(5)]
    floats = [np.arange(rows, dtype=np.float64) * 2 + 0.5 * k for k in range(3)]
    extremes = [np.arange(rows, dtype=np.float64) + 3, np.arange(rows, dtype=np.float64) + 7]
    if not integer_values:
        extremes = [column + 0.25 for column in extremes]
    return StatsTable(*ints, *floats, *extremes, integer_values=integer_values)


def test_slices_masks_and_row_numbers_give_tables_that_keep_their_labels() -> None:
    table = image_table(6)
    middle = table[1:3]
    assert isinstance(middle, StatsTable) and len(middle) == 2
    assert middle.label.tolist() == [2, 3] and middle["area"].tolist() == [10, 20]
    assert middle[0].label == 2 and [row.label for row in middle] == [2, 3]
    large = table[table["area"] > 25]
    assert isinstance(large, StatsTable) and large.label.tolist() == [4, 5, 6]
    assert large.to_dict()["label"].tolist() == [4, 5, 6]
    assert table[np.array([5, 0])].label.tolist() == [6, 1]
    assert table[[True, False] * 3].label.tolist() == [1, 3, 5]
    assert table[1:3][1:].label.tolist() == [3]  # a table of rows is picked from again
    assert len(table[table["area"] < 0]) == 0 and len(table[[]]) == 0
    assert table[::2].equals(table[[0, 2, 4]]) and not table[::2].equals(table[[1, 3, 5]])


def test_columns_is_a_property_naming_them_in_the_csv_order() -> None:
    assert image_table(2).columns == CSV_COLUMNS
    assert volume_table().columns == VOLUME_CSV_COLUMNS
    assert list(image_table(2).to_dict()) == list(CSV_COLUMNS)


@pytest.mark.slow
def test_to_pandas_keeps_integer_min_and_max_of_integer_images() -> None:
    frame = image_table(3).to_pandas()
    assert str(frame["min"].dtype) == "int64" and str(frame["max"].dtype) == "int64"
    assert frame["max"].tolist() == [7, 8, 9] and frame["label"].tolist() == [1, 2, 3]
    floats = image_table(3, integer_values=False).to_pandas()
    assert str(floats["min"].dtype) == "float64" and floats["min"].tolist() == [3.25, 4.25, 5.25]
    assert image_table(3)[1:].to_pandas()["label"].tolist() == [2, 3]


def test_repr_is_the_shape_and_a_few_rows() -> None:
    text = repr(image_table(1000))
    lines = text.splitlines()
    assert lines[0] == "StatsTable of an image: 1000 rows x 11 columns"
    assert len(lines) <= 13 and lines[1].split() == list(CSV_COLUMNS)
    assert lines[2].split()[0] == "1" and lines[-1].split()[0] == "1000"
    assert any(line.split()[0] == "..." for line in lines)
    assert repr(image_table(2)).splitlines()[-1].split() == [
        "2", "10", "11", "12", "13", "14", "2", "2.5", "3", "4", "8"
    ]  # fmt: skip
    assert repr(volume_table()).startswith("StatsTable of a volume: 2 rows x 14 columns")
    assert "0 rows" in repr(empty_table(True))


def test_indexing_errors_name_the_table_and_what_it_takes() -> None:
    table = image_table(3)
    for key, error in (
        ("perimeter", KeyError),
        (3, IndexError),
        (-4, IndexError),
        (1.5, TypeError),
        (np.array([True]), IndexError),
        (np.array([[0]]), IndexError),
        (np.array([7]), IndexError),
    ):
        with pytest.raises(error) as raised:
            table[key]
        assert str(raised.value).strip("'\"").startswith("StatsTable: "), key
