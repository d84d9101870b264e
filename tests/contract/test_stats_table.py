"""The statistics table of images and volumes: its columns, their order, rows and equality."""

from __future__ import annotations

import numpy as np

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
    assert table.is_volume and list(table.columns()) == list(VOLUME_CSV_COLUMNS[1:])
    image = empty_table(True)
    assert not image.is_volume and list(image.columns()) == list(CSV_COLUMNS[1:])
    assert list(empty_table(True, rank=3).columns()) == list(VOLUME_CSV_COLUMNS[1:])


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
