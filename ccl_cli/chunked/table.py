"""Statistics rows of whole components (partials) as the StatsTable one-piece labeling gives."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..contract.stats import VOLUME_CSV_COLUMNS, StatsTable, empty_table
from ..io.csv_text import CSV_PIECE_ROWS, csv_rows, float_texts, int_texts
from .pieces import Partials


def stats_table(whole: Partials, labels: np.ndarray, integer_values: bool) -> StatsTable:
    """The table of components `whole` with final labels `labels` (1..K' in any order; the
    rows come out in label order): centroids are one division of exact sums, as in
    contract/stats.py; the means are the partials' (merge.reduce_partials)."""
    if len(whole) == 0:
        return empty_table(integer_values, rank=3)
    order = np.argsort(labels, kind="stable")
    rows = whole.take(order)
    area = rows.area.astype(np.int64)
    size = rows.high - rows.low
    centroid = rows.sums.astype(np.float64) / area[:, None].astype(np.float64)
    table = StatsTable(
        area=area,
        x=rows.low[:, 2].copy(),
        y=rows.low[:, 1].copy(),
        width=size[:, 2].copy(),
        height=size[:, 1].copy(),
        centroid_x=centroid[:, 2].copy(),
        centroid_y=centroid[:, 1].copy(),
        mean=rows.mean.astype(np.float64),
        min=rows.v_min.astype(np.float64),
        max=rows.v_max.astype(np.float64),
        integer_values=integer_values,
    )
    table.z, table.depth, table.centroid_z = (
        rows.low[:, 0].copy(),
        size[:, 0].copy(),
        centroid[:, 0].copy(),
    )
    return table


def csv_rows_of(table: StatsTable, first_label: int, header: bool) -> Iterator[bytes]:
    """A volume's statistics CSV text (VOLUME_CSV_COLUMNS) for `table`, whose rows are labels
    first_label, first_label + 1, ...; with the header line first when `header`."""
    if header:
        yield (",".join(VOLUME_CSV_COLUMNS) + "\n").encode("ascii")
    values = int_texts if table.integer_values else float_texts
    for start in range(0, len(table), CSV_PIECE_ROWS):
        rows = slice(start, start + CSV_PIECE_ROWS)
        count = len(table.area[rows])
        columns = [int_texts(np.arange(first_label + start, first_label + start + count))]
        for name in VOLUME_CSV_COLUMNS[1:]:
            column = table[name][rows]
            if name in ("min", "max"):
                columns.append(values(column))
            else:
                columns.append(
                    int_texts(column) if column.dtype.kind == "i" else float_texts(column)
                )
        yield csv_rows(columns)
