"""The C engine's chunk tables: each label's first voxel and labels mapped through a table,
against numpy written from their contracts."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ccl_cli.native import gccl_cpu


@given(arrays(np.bool_, st.tuples(*[st.integers(1, 9)] * 3)))
def test_first_voxels_are_where_each_label_first_appears(mask) -> None:
    labels, count = ndi.label(mask)  # scipy numbers labels in raster order of first voxels
    flat = labels.astype(np.uint32).reshape(-1)
    first = np.full(count, -1, np.int64)
    gccl_cpu.first_voxels(flat, first)
    expected = [int(np.flatnonzero(flat == label)[0]) for label in range(1, count + 1)]
    assert first.tolist() == expected


@pytest.mark.parametrize(
    ("labels", "count"),
    [([0, 2, 1], 2), ([1, 1, 0], 2), ([1, 2, 3], 2)],  # out of order, one missing, one extra
)
def test_labels_not_in_raster_order_are_refused(labels, count) -> None:
    with pytest.raises(ValueError, match="raster order"):
        gccl_cpu.first_voxels(np.array(labels, np.uint32), np.zeros(count, np.int64))


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32])
@given(labels=arrays(np.uint32, st.integers(0, 500), elements=st.integers(0, 40)), data=st.data())
def test_map_labels_is_table_lookup(dtype, labels, data) -> None:
    table = np.array(data.draw(st.lists(st.integers(0, 65535), min_size=41, max_size=60)), dtype)
    out = np.empty(labels.shape, dtype)
    gccl_cpu.map_labels(labels, table, out)
    np.testing.assert_array_equal(out, table[labels])


def test_a_label_past_the_table_is_refused() -> None:
    with pytest.raises(ValueError, match="past the table"):
        gccl_cpu.map_labels(
            np.array([0, 3], np.uint32), np.arange(3, dtype=np.uint16), np.empty(2, np.uint16)
        )
    with pytest.raises(ValueError, match="dtype"):
        gccl_cpu.map_labels(
            np.array([0, 1], np.uint32), np.arange(3, dtype=np.uint16), np.empty(2, np.uint32)
        )
