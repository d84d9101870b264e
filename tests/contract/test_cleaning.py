"""Cleaning the labels (--max-area, --largest, --fill-holes), as ccl_cli.label gives them on
the CPU, against references written here from the README's words: scipy's
binary_fill_holes per component, and cc3d's dust / largest_k rules written out."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi
from conftest import pixel_values
from hypothesis import given
from hypothesis import strategies as st
from shapes import NASTY, rings, spiral
from skimage.measure import regionprops

import ccl_cli

CROSS = ndi.generate_binary_structure(2, 1)


def label(values: np.ndarray, **options: object) -> tuple[np.ndarray, ccl_cli.StatsTable]:
    labels, (table,) = ccl_cli.label(values[None], batch=True, device="cpu", **options)
    return labels[0], table


def hole_structure(connectivity: int) -> np.ndarray:
    """Holes are the complement's connectivity: 4-connected for 8, 8-connected for 4."""
    return ndi.generate_binary_structure(2, 1 if connectivity == 8 else 2)


def filled_reference(labels: np.ndarray, connectivity: int) -> np.ndarray:
    """The README's --fill-holes on a label image: each region of 0-pixels away from the
    border joins the largest label whose binary_fill_holes covers it and that touches
    it (4-neighbours)."""
    structure = hole_structure(connectivity)
    zero = labels == 0
    regions, count = ndi.label(zero, structure=structure)
    edges = np.concatenate([regions[0], regions[-1], regions[:, 0], regions[:, -1]])
    want = labels.copy()
    for component in range(1, int(labels.max()) + 1):
        mask = labels == component
        covered = ndi.binary_fill_holes(mask, structure=structure)
        touching = ndi.binary_dilation(mask, structure=CROSS)
        for region in range(1, count + 1):
            pixels = regions == region
            if region in edges or not (pixels & touching).any():
                continue
            if covered[pixels].all():
                want[pixels] = component
    return want


def binary_fill_per_component(labels: np.ndarray, connectivity: int) -> np.ndarray:
    """scipy's binary_fill_holes of each component, the later (inner) one winning."""
    want = labels.copy()
    for component in range(1, int(labels.max()) + 1):
        covered = ndi.binary_fill_holes(labels == component, structure=hole_structure(connectivity))
        want[covered & (labels == 0)] = component
    return want


def selected_reference(
    labels: np.ndarray, min_area: int, max_area: int | None, largest: int | None
) -> np.ndarray:
    """cc3d's dust (both bounds) then largest_k, ties to the lower label, renumbered."""
    area = np.bincount(labels.ravel(), minlength=int(labels.max()) + 1)[1:]
    keep = [
        label
        for label in range(1, len(area) + 1)
        if area[label - 1] >= min_area and (max_area is None or area[label - 1] <= max_area)
    ]
    if largest is not None:
        keep = sorted(sorted(keep, key=lambda label: (-area[label - 1], label))[:largest])
    out = np.zeros_like(labels)
    for new, old in enumerate(keep, 1):
        out[labels == old] = new
    return out


def assert_statistics_of(labels: np.ndarray, values: np.ndarray, table: ccl_cli.StatsTable):
    """The table describes the label image with the original values (skimage)."""
    props = regionprops(labels.astype(np.int64), intensity_image=values.astype(np.float64))
    assert len(table) == len(props)
    for row, prop in zip(table, props, strict=True):
        y0, x0, y1, x1 = prop.bbox
        assert (row.label, row.area) == (prop.label, prop.area)
        assert (row.x, row.y, row.width, row.height) == (x0, y0, x1 - x0, y1 - y0)
        assert (row.centroid_y, row.centroid_x) == pytest.approx(prop.centroid, abs=1e-9)
        assert row.mean == pytest.approx(prop.intensity_mean, rel=1e-12)
        assert (row.min, row.max) == (prop.intensity_min, prop.intensity_max)


# --- --fill-holes ---------------------------------------------------------------------


@pytest.mark.slow
@given(st.data(), st.sampled_from([4, 8]), st.tuples(st.integers(1, 24), st.integers(1, 24)))
def test_binary_fill_holes_is_scipys_per_component(data, connectivity, shape):
    values = pixel_values(data.draw, np.dtype(np.uint8), shape)
    plain, _ = label(values, connectivity=connectivity)
    filled, table = label(values, connectivity=connectivity, fill_holes=True)
    np.testing.assert_array_equal(filled, binary_fill_per_component(plain, connectivity))
    assert_statistics_of(filled, values, table)


@pytest.mark.slow
@given(st.data(), st.sampled_from([4, 8]), st.tuples(st.integers(1, 20), st.integers(1, 20)))
def test_tau_fill_holes_joins_the_touching_component_that_encloses(data, connectivity, shape):
    values = pixel_values(data.draw, np.dtype(np.int16), shape)
    plain, _ = label(values, tau=1, connectivity=connectivity)
    filled, table = label(values, tau=1, connectivity=connectivity, fill_holes=True)
    np.testing.assert_array_equal(filled, filled_reference(plain, connectivity))
    assert_statistics_of(filled, values, table)


@pytest.mark.parametrize("name", sorted(NASTY))
@pytest.mark.parametrize("connectivity", [4, 8])
def test_fill_holes_on_the_nasty_cases(name, connectivity):
    values = NASTY[name].astype(np.uint8)
    plain, _ = label(values, connectivity=connectivity)
    filled, table = label(values, connectivity=connectivity, fill_holes=True)
    np.testing.assert_array_equal(filled, binary_fill_per_component(plain, connectivity))
    assert_statistics_of(filled, values, table)


def test_nested_rings_each_fill_their_own_hole_and_keep_their_islands():
    mask, count = rings(21)  # rings 1 apart: each gap between rings is its inner ring's hole
    filled, table = label(mask.astype(np.uint8), fill_holes=True)
    assert len(table) == count
    # Every background pixel inside the outer ring now belongs to the ring just outside it.
    assert (filled[1:-1, 1:-1] != 0).all()
    for ring in range(1, count + 1):
        k = 2 * (ring - 1)
        assert filled[k, k] == ring  # the ring's corner
        if k + 1 < 10:
            assert filled[k + 1, k + 1] == ring  # the gap inside it


def test_a_spiral_has_no_hole_and_a_gap_to_the_border_is_not_one():
    values = spiral(31).astype(np.uint8)
    np.testing.assert_array_equal(label(values, fill_holes=True)[0], label(values)[0])
    cup = np.zeros((6, 7), np.uint8)
    cup[1:5, 1] = cup[1:5, 5] = cup[4, 1:6] = 1  # open at the top: its inside reaches the border
    cup[0, 3] = 0
    np.testing.assert_array_equal(label(cup, fill_holes=True)[0], label(cup)[0])


def test_connectivity_4_does_not_close_a_ring_at_a_diagonal_step():
    ring = np.array(
        [
            [0, 0, 0, 0, 0, 0],
            [0, 1, 1, 1, 0, 0],
            [0, 1, 0, 0, 1, 0],
            [0, 1, 0, 0, 1, 0],
            [0, 1, 1, 1, 1, 0],
            [0, 0, 0, 0, 0, 0],
        ],
        np.uint8,
    )  # (1, 3) meets (2, 4) only at a corner
    filled8, _ = label(ring, connectivity=8, fill_holes=True)
    assert (filled8[2:4, 2:4] == 1).all()
    filled4, _ = label(ring, connectivity=4, fill_holes=True)
    assert (filled4[2:4, 2:4] == 0).all()  # its inside leaks out through the corner


def test_tau_gap_between_two_surfaces_stays_background_one_surfaces_hole_fills():
    depth = np.full((7, 9), 100, np.uint16)
    depth[:, 5:] = 500  # two surfaces side by side
    depth[3, 2] = 0  # a hole in the left one
    depth[3, 4:6] = 0  # a gap between the two (touches both)
    depth[0:2, 4:6] = 0
    depth[5:, 4:6] = 0
    filled, table = label(depth, tau=5, fill_holes=True)
    assert filled[3, 2] == 1  # the hole inside surface 1
    assert (filled[3, 4:6] == 0).all()
    assert table.area.tolist() == [(depth[:, :5] == 100).sum() + 1, (depth[:, 5:] == 500).sum()]
    assert table.min[0] == 0 and table.mean[0] < 100  # the hole's own value is read


def test_removed_components_inside_a_ring_are_filled_after_min_area():
    ring = np.zeros((9, 9), np.uint8)
    ring[1:8, 1:8] = 1
    ring[2:7, 2:7] = 0
    ring[4, 4] = 7  # a speck inside: removed by min-area, then filled
    filled, table = label(ring, min_area=2, fill_holes=True)
    assert (filled[1:8, 1:8] == 1).all() and len(table) == 1
    assert table.area[0] == 49 and table.max[0] == 7
    kept, table = label(ring, fill_holes=True)  # kept, it stays a component of its own
    assert kept[4, 4] == 2 and (kept[2:7, 2:7] != 0).all() and table.area.tolist() == [48, 1]


def test_fill_holes_after_morphology_fills_the_final_mask():
    values = np.zeros((14, 14), np.uint8)
    values[1:13, 1:13] = 3
    values[4:10, 4:10] = 0
    values[6, 6] = 3  # an island the opening removes
    opened, _ = label(values, open=1)
    assert opened[6, 6] == 0 and (opened[4:10, 4:10] == 0).all()
    filled, table = label(values, open=1, fill_holes=True)
    assert (filled[1:13, 1:13] == 1).all() and len(table) == 1


# --- --max-area and --largest ---------------------------------------------------------


@pytest.mark.slow
@given(
    st.data(),
    st.sampled_from([4, 8]),
    st.integers(0, 4),
    st.one_of(st.none(), st.integers(4, 12)),
    st.one_of(st.none(), st.integers(1, 5)),
)
def test_area_selection_is_dust_then_largest_k(data, connectivity, min_area, max_area, largest):
    shape = data.draw(st.tuples(st.integers(1, 30), st.integers(1, 30)))
    values = pixel_values(data.draw, np.dtype(np.uint8), shape)
    plain, _ = label(values, connectivity=connectivity)
    options = {"min_area": min_area, "max_area": max_area, "largest": largest}
    got, table = label(values, connectivity=connectivity, **options)
    want = selected_reference(plain, min_area, max_area, largest)
    np.testing.assert_array_equal(got, want)
    assert_statistics_of(got, values, table)


def test_max_area_drops_what_cc3d_dust_inverted_drops():
    cc3d = pytest.importorskip("cc3d")
    rng = np.random.default_rng(11)
    values = (rng.random((60, 70)) < 0.45).astype(np.uint8)
    plain, _ = label(values)
    for limit in (1, 3, 10, 100):
        got, _ = label(values, max_area=limit)
        dusted = cc3d.dust(plain.copy(), threshold=limit + 1, connectivity=8, invert=True)
        np.testing.assert_array_equal(got > 0, dusted > 0)


def test_largest_breaks_ties_by_label_and_batches_select_per_image():
    values = np.zeros((2, 5, 9), np.uint8)
    values[:, 0, 0:2] = 1  # label 1: area 2
    values[:, 2, 3:6] = 1  # label 2: area 3
    values[:, 4, 0:2] = 1  # label 3: area 2, ties with label 1
    values[1, 4, 7:9] = 1  # image 1 only: label 4, area 2
    labels, tables = ccl_cli.label(values, largest=2, device="cpu")
    assert [t.area.tolist() for t in tables] == [[2, 3], [2, 3]]
    assert labels[0, 0, 0] == 1 and labels[0, 2, 3] == 2 and labels[0, 4, 0] == 0


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"max_area": 0}, ValueError, "'max_area' must be a whole number >= 1"),
        ({"largest": 0}, ValueError, "'largest' must be a whole number >= 1"),
        ({"largest": 1.5}, TypeError, "'largest' must be an int or None"),
        ({"fill_holes": "yes"}, TypeError, "'fill_holes' must be True or False"),
        ({"min_area": 10, "max_area": 5}, ValueError, "'max_area' (5) is below 'min_area' (10)"),
    ],
)
def test_bad_cleaning_options(options, error, words):
    with pytest.raises(error) as raised:
        ccl_cli.label(np.eye(3, dtype=np.uint8), device="cpu", **options)
    assert words in str(raised.value)
