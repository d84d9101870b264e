"""The CPU engine for volumes (backends/cpu/volumes.py, native/src/volume_*.c) against
independent references: scipy.ndimage.label with generate_binary_structure(3, 1|2|3)
(binary), a brute-force 3-D BFS written from the contract (tau mode), cc3d as a second
opinion, and per-voxel statistics (tests/volume_oracles.py). Volumes are cut into many
slabs (MIN_SLAB_VOXELS lowered) so that components cross every seam."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from conftest import pixel_values
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import rule_float_mean
from shapes import helix
from volume_oracles import (
    bfs_volume,
    cc3d_volume,
    filter_min_area_3d,
    grouped_stats,
    scipy_volume,
    volume_stats,
)

from ccl_cli.backends.cpu import volumes
from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.contract.params import SUPPORTED_DTYPES, LabelParams

CONNECTIVITIES = [6, 18, 26]


@pytest.fixture(autouse=True)
def thin_slabs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slabs of any size, so that small volumes are cut into many."""
    monkeypatch.setattr(volumes, "MIN_SLAB_VOXELS", 1)


def engine_labels(
    values: np.ndarray,
    params: LabelParams,
    threads: int = 1,
    statistics: bool = True,
    zeroed: bool = False,
) -> tuple[np.ndarray, volumes.VolumesLabeled]:
    """One volume labeled by the engine on `threads` slabs, into labels that are all 0
    (zeroed: the engine writes only the foreground) or all 7 (it must write every voxel)."""
    out = np.full((1, *values.shape), 0 if zeroed else 7, np.uint32)
    labeled = volumes.label_volumes(values[None], params, threads, out, statistics, zeroed)
    return out[0], labeled


def assert_matches_scipy(mask: np.ndarray, connectivity: int) -> None:
    """Binary labels of `mask` (as bool and as uint16 values) equal scipy's, for one slab
    and for one slab per plane, with statistics and without (the last pass differs)."""
    want, count = scipy_volume(mask, connectivity)
    for values in (mask, mask.astype(np.uint16) * 300):
        for threads in (1, 3, mask.shape[0]):
            for zeroed, statistics in itertools.product((False, True), (True, False)):
                params = LabelParams(connectivity=connectivity)
                labels, labeled = engine_labels(values, params, threads, statistics, zeroed)
                np.testing.assert_array_equal(labels, want)
                assert labeled.components == [count] and labeled.kept == [count]


def nasty_volumes() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    checker = np.indices((6, 7, 9)).sum(axis=0) % 2 == 0
    pillars = np.zeros((9, 6, 6), bool)
    pillars[:, ::2, ::3] = True  # each crosses every slab seam
    giant = np.zeros((7, 9, 9), bool)  # one component snaking through every plane
    giant[:, 1::2, :] = True
    giant[:, ::4, 0] = True
    giant[:, 2::4, -1] = True
    giant[::2, -1, :] = True
    return {
        "1x1x1 fg": np.ones((1, 1, 1), bool),
        "1x1x1 bg": np.zeros((1, 1, 1), bool),
        "1xNx1": rng.random((1, 9, 1)) < 0.5,
        "Nx1x1": rng.random((9, 1, 1)) < 0.5,
        "1x1xN": rng.random((1, 1, 9)) < 0.5,
        "odd 5x7x11": rng.random((5, 7, 11)) < 0.5,
        "all": np.ones((4, 5, 6), bool),
        "none": np.zeros((4, 5, 6), bool),
        "checkerboard": checker,
        "inverse checkerboard": ~checker,
        "helix": helix(48, 9, 1.5),
        "pillars": pillars,
        "giant": giant,
        "diagonal": np.eye(8, dtype=bool)[:, :, None] & np.eye(8, dtype=bool)[:, None, :],
    }


@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
@pytest.mark.parametrize("name", list(nasty_volumes()))
def test_nasty_volumes_match_scipy(name: str, connectivity: int) -> None:
    assert_matches_scipy(nasty_volumes()[name], connectivity)


def test_checkerboard_and_helix_by_hand() -> None:
    checker = nasty_volumes()["checkerboard"]
    assert engine_labels(checker, LabelParams(connectivity=6))[1].components == [int(checker.sum())]
    assert engine_labels(checker, LabelParams(connectivity=18))[1].components == [1]
    spiral = helix(48, 9, 1.5)
    assert engine_labels(spiral, LabelParams(connectivity=26))[1].components == [1]


@st.composite
def volume_masks(draw: st.DrawFn, max_side: int = 12) -> np.ndarray:
    shape = tuple(draw(st.integers(1, max_side)) for _ in range(3))
    density = draw(st.sampled_from([0.05, 0.2, 0.3, 0.5, 0.7, 0.95]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return rng.random(shape) < density


@pytest.mark.slow
@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
@settings(max_examples=80)
@given(mask=volume_masks())
def test_random_binary_volumes_match_scipy(mask: np.ndarray, connectivity: int) -> None:
    assert_matches_scipy(mask, connectivity)


@st.composite
def wide_masks(draw: st.DrawFn) -> np.ndarray:
    """Volumes of wide rows (across and around the engine's 64-voxel words) made of runs
    of a drawn typical length: single voxels, runs of a few, runs longer than a word."""
    width = draw(st.sampled_from([63, 64, 65, 127, 128, 129, 200]) | st.integers(1, 300))
    shape = (draw(st.integers(1, 5)), draw(st.integers(1, 6)), width)
    mean = draw(st.sampled_from([1.5, 4.0, 20.0, 80.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    lengths = rng.geometric(1 / mean, (shape[0] * shape[1], 2 * width + 2))
    ends = np.cumsum(lengths, axis=1)
    starts = rng.integers(0, 2, shape[0] * shape[1])  # rows open with foreground or not
    x = np.arange(width)
    runs = (ends[:, :, None] <= x[None, None, :]).sum(axis=1)  # the run each voxel is in
    return ((runs + starts[:, None]) % 2 == 1).reshape(shape)


@pytest.mark.slow
@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
@settings(max_examples=60)
@given(mask=wide_masks())
def test_wide_rows_of_runs_match_scipy(mask: np.ndarray, connectivity: int) -> None:
    assert_matches_scipy(mask, connectivity)


@pytest.mark.slow
def test_runs_beside_runs_of_a_set_joined_before_match_scipy() -> None:
    # 26-conn joins a run to its neighbours' sets once where the rows were joined already:
    # runs that touch a run of the plane before only past their first voxel, combs whose
    # teeth meet in one plane and not the next, and rows with one label or several.
    rng = np.random.default_rng(29)
    for _ in range(40):
        shape = (int(rng.integers(2, 7)), int(rng.integers(2, 7)), int(rng.integers(2, 40)))
        mask = rng.random(shape) < rng.choice([0.3, 0.5, 0.7])
        comb = np.zeros(shape, bool)
        comb[:, ::2, :] = True
        comb[::2, :, rng.integers(0, shape[2])] = True
        for volume in (mask, mask & comb, mask | comb, ~mask & comb):
            for connectivity in CONNECTIVITIES:
                assert_matches_scipy(volume, connectivity)


@pytest.mark.slow
@settings(max_examples=120)
@given(st.data())
def test_tau_volumes_match_the_bfs_oracle(data: st.DataObject) -> None:
    dtype = np.dtype(data.draw(st.sampled_from(SUPPORTED_DTYPES)))
    shape = tuple(data.draw(st.integers(1, 6)) for _ in range(3))
    values = pixel_values(data.draw, dtype, shape)
    params = LabelParams(
        tau=data.draw(st.sampled_from([0, 0.5, 1, 2.5, 5])),
        tau_relative=data.draw(st.sampled_from([0.0, 0.0, 1e-9, 0.01, 0.3])),
        tau_quadratic=data.draw(st.sampled_from([0.0, 0.0, 1e-6, 0.05])),
        connectivity=data.draw(st.sampled_from(CONNECTIVITIES)),
        background=data.draw(st.sampled_from([0, None])),
        min_area=data.draw(st.integers(0, 3)),
    )
    want = filter_min_area_3d(bfs_volume(values, params), params.min_area)
    for threads, zeroed in ((1, False), (shape[0], True)):
        labels, labeled = engine_labels(values, params, threads, zeroed=zeroed)
        np.testing.assert_array_equal(labels, want)
        assert labeled.kept == [int(want.max())]


@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32])
def test_tau_on_integers_matches_cc3d_delta(connectivity: int, dtype: type) -> None:
    rng = np.random.default_rng(connectivity)
    values = rng.integers(1, 40, (9, 10, 11)).astype(dtype)
    values[rng.random(values.shape) < 0.25] = 0
    for tau in (0, 2, 5):
        want = cc3d_volume(values, connectivity, delta=tau)
        labels, _ = engine_labels(values, LabelParams(tau=tau, connectivity=connectivity), 4)
        np.testing.assert_array_equal(labels, want)


@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
def test_binary_matches_cc3d(connectivity: int) -> None:
    mask = np.random.default_rng(5).random((10, 13, 17)) < 0.35
    labels, _ = engine_labels(mask, LabelParams(connectivity=connectivity), 5)
    np.testing.assert_array_equal(labels, cc3d_volume(mask.view(np.uint8), connectivity))


@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
def test_a_tau_ramp_along_z_joins_within_tau_only(connectivity: int) -> None:
    ramp = np.broadcast_to((10 + 3 * np.arange(12, dtype=np.int16))[:, None, None], (12, 5, 6))
    ramp = np.ascontiguousarray(ramp)
    together, _ = engine_labels(ramp, LabelParams(tau=3, connectivity=connectivity), 4)
    assert together.min() == together.max() == 1  # each plane joins the next: one component
    apart, labeled = engine_labels(ramp, LabelParams(tau=2.5, connectivity=connectivity), 4)
    assert labeled.components == [12]  # every plane on its own, numbered in z order
    np.testing.assert_array_equal(
        apart, np.broadcast_to(np.arange(1, 13)[:, None, None], ramp.shape)
    )


def assert_statistics_match(values: np.ndarray, params: LabelParams, threads: int) -> None:
    labels, labeled = engine_labels(values, params, threads)
    assert labeled.tables is not None
    (table,) = labeled.tables
    rows = volume_stats(labels.astype(np.int64), values)
    assert table.is_volume and len(table) == len(rows)
    floating = values.dtype.kind == "f"
    for i, row in enumerate(rows):
        for name in ("area", "x", "y", "z", "width", "height", "depth"):
            assert getattr(table, name)[i] == row[name], name
        for name in ("centroid_x", "centroid_y", "centroid_z", "min", "max"):
            assert getattr(table, name)[i] == row[name], name
        voxels = [float(v) for v in values[labels == i + 1]]
        want_mean = rule_float_mean(voxels) if floating else math.fsum(voxels) / len(voxels)
        assert table.mean[i] == want_mean or (math.isnan(want_mean) and math.isnan(table.mean[i]))


@settings(max_examples=80)
@given(st.data())
def test_statistics_match_per_voxel_sums(data: st.DataObject) -> None:
    dtype = np.dtype(data.draw(st.sampled_from(SUPPORTED_DTYPES)))
    shape = tuple(data.draw(st.integers(1, 7)) for _ in range(3))
    values = pixel_values(data.draw, dtype, shape)
    params = LabelParams(
        tau=data.draw(st.sampled_from([None, 1, 3])),
        connectivity=data.draw(st.sampled_from(CONNECTIVITIES)),
        min_area=data.draw(st.integers(0, 4)),
    )
    assert_statistics_match(values, params, data.draw(st.sampled_from([1, 2, shape[0]])))


def test_large_integer_sums_are_exact() -> None:
    # uint32 voxels near 2**32: float64 sums would round, the engine's integer sums do not.
    values = np.full((6, 7, 8), 2**32 - 1, np.uint32)
    values[::2, ::3, ::2] -= np.uint32(3)
    assert_statistics_match(values, LabelParams(connectivity=6), 3)


def assert_table_matches(table: object, want: dict[str, np.ndarray]) -> None:
    """Every column of a volume's StatsTable equal to the reference's, bit for bit."""
    for name, column in want.items():
        np.testing.assert_array_equal(getattr(table, name), column, err_msg=name)


@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.uint32, np.float32])
def test_statistics_of_many_components_match_numpy(connectivity: int, dtype: type) -> None:
    # Random masks just below where they would percolate: hundreds to thousands of
    # components, many across the seams of one slab per plane (some leaving a slab to come
    # back into it), most of one or two runs.
    rng = np.random.default_rng(29)
    mask = rng.random((23, 37, 41)) < {6: 0.2, 18: 0.1, 26: 0.08}[connectivity]
    if np.dtype(dtype).kind == "f":
        values = (rng.integers(-9, 10, mask.shape) * 0.75).astype(dtype)
        values[rng.random(mask.shape) < 0.01] = 3e38
    else:
        info = np.iinfo(dtype)
        values = rng.integers(int(info.min), int(info.max), mask.shape, endpoint=True).astype(dtype)
    image = np.where(mask, values, 0).astype(dtype)
    image[mask & (image == 0)] = 1  # every voxel of the mask is foreground
    want, count = scipy_volume(mask, connectivity)
    assert count > 500
    for threads, min_area in ((1, 0), (3, 0), (23, 0), (23, 3)):
        params = LabelParams(connectivity=connectivity, min_area=min_area)
        labels, labeled = engine_labels(image, params, threads)
        kept = filter_min_area_3d(want, min_area)
        np.testing.assert_array_equal(labels, kept)
        assert labeled.tables is not None
        assert_table_matches(labeled.tables[0], grouped_stats(kept, image))


@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
def test_rows_whose_runs_are_all_one_component_match_numpy(connectivity: int) -> None:
    # Combs: rows of many runs joined only through the plane before (the last pass sums such
    # a row's runs at once), one comb big, one small enough for min-area to drop it.
    rng = np.random.default_rng(37)
    mask = np.zeros((7, 6, 40), bool)
    mask[0, :4] = True
    mask[1:, :4, ::2] = True
    mask[0, 5, :3] = True  # 3 voxels
    mask[1:3, 5, 0:3:2] = True  # 4 more
    values = np.where(mask, rng.integers(1, 60000, mask.shape), 0).astype(np.uint16)
    want, count = scipy_volume(mask, connectivity)
    assert count == 2
    for threads, min_area in ((1, 0), (3, 0), (7, 8)):
        params = LabelParams(connectivity=connectivity, min_area=min_area)
        labels, labeled = engine_labels(values, params, threads, zeroed=threads == 3)
        kept = filter_min_area_3d(want, min_area)
        np.testing.assert_array_equal(labels, kept)
        assert labeled.tables is not None
        assert_table_matches(labeled.tables[0], grouped_stats(kept, values))


def test_a_component_that_leaves_a_slab_and_comes_back_has_one_row() -> None:
    # Slab 0 (plane 0) holds two sets that plane 1 joins: one component, whose voxels of
    # plane 0 are counted once, in one row.
    values = np.array([[[5, 0, 7, 0, 2]], [[1, 1, 1, 0, 3]]], np.uint16)
    for connectivity in CONNECTIVITIES:
        labels, labeled = engine_labels(values, LabelParams(connectivity=connectivity), 2)
        want, _ = scipy_volume(values != 0, connectivity)
        np.testing.assert_array_equal(labels, want)
        assert labeled.tables is not None
        (table,) = labeled.tables
        assert table.area.tolist() == [5, 2] and table.mean[0] == 15 / 5
        assert_table_matches(table, grouped_stats(want, values))


def test_whatever_needs_component_areas_gets_them() -> None:
    # The first pass counts voxels only where something reads them: min-area, max-area and
    # largest (labels only too) and a float volume's mean (its float-mean shift).
    rng = np.random.default_rng(31)
    mask = rng.random((9, 10, 11)) < 0.25
    raw, count = scipy_volume(mask, 6)
    area = np.bincount(raw.ravel())[1:]
    for keywords in ({"largest": 4}, {"max_area": 3}, {"min_area": 3}, {"tau": 0, "min_area": 3}):
        params = LabelParams(connectivity=6, **keywords)
        chosen = [c for c in range(count) if area[c] >= 3 or "min_area" not in keywords]
        if "max_area" in keywords:
            chosen = [c for c in range(count) if area[c] <= 3]
        if "largest" in keywords:
            chosen = sorted(sorted(chosen, key=lambda c: (-area[c], c))[:4])
        want = np.zeros_like(raw)
        for new, old in enumerate(chosen, start=1):
            want[raw == old + 1] = new
        for statistics in (False, True):
            labels, labeled = engine_labels(mask.astype(np.uint8), params, 3, statistics)
            np.testing.assert_array_equal(labels, want, err_msg=str(keywords))
            assert labeled.kept == [len(chosen)]
    values = np.where(mask, rng.integers(1, 9, mask.shape) * 0.125 + 2.0**40, 0.0)
    labels, labeled = engine_labels(values, LabelParams(connectivity=6), 3)
    assert labeled.tables is not None
    assert_table_matches(labeled.tables[0], grouped_stats(raw, values))


@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
def test_the_same_bytes_whatever_the_slabs_and_threads(connectivity: int) -> None:
    values = np.random.default_rng(11).integers(0, 6, (17, 12, 13)).astype(np.uint8)
    for tau in (None, 1):
        params = LabelParams(tau=tau, connectivity=connectivity, min_area=2)
        labels, labeled = engine_labels(values, params, 1)
        for threads in (2, 5, 17):
            other, other_labeled = engine_labels(values, params, threads, zeroed=threads == 5)
            np.testing.assert_array_equal(other, labels)
            assert labeled.tables is not None and other_labeled.tables is not None
            assert other_labeled.tables[0].equals(labeled.tables[0])


def test_a_batch_labels_each_volume_on_its_own() -> None:
    rng = np.random.default_rng(13)
    batch = rng.random((4, 6, 7, 8)) < 0.4
    out = np.empty(batch.shape, np.uint32)
    labeled = volumes.label_volumes(batch, LabelParams(connectivity=18, min_area=2), 3, out)
    for n, mask in enumerate(batch):
        want, count = scipy_volume(mask, 18)
        want = filter_min_area_3d(want, 2)
        np.testing.assert_array_equal(out[n], want)
        assert labeled.components[n] == count and labeled.kept[n] == int(want.max())


def test_labels_only_skips_the_tables_and_gives_the_same_labels() -> None:
    mask = np.random.default_rng(17).random((9, 9, 9)) < 0.5
    params = LabelParams(connectivity=26, min_area=3)
    with_stats, labeled = engine_labels(mask, params, 3)
    labels, only = engine_labels(mask, params, 3, statistics=False)
    np.testing.assert_array_equal(labels, with_stats)
    assert only.tables is None and only.kept == labeled.kept


def test_the_backend_labels_volume_batches() -> None:
    batch = np.random.default_rng(19).random((2, 5, 6, 7)) < 0.5
    result = CpuBackend(threads=2).label(batch, LabelParams(connectivity=6))
    for n in range(2):
        want, count = scipy_volume(batch[n], 6)
        np.testing.assert_array_equal(result.labels[n], want)
        assert result.components[n] == count and result.tables[n].is_volume


def test_slabs_hold_at_most_the_slab_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(volumes, "SLAB_VOXELS", 30)  # 2 planes of 3x5 per slab at most
    tasks = volumes.plan(2, 9, 3, 5, 1)
    assert ((tasks[:, 2] - tasks[:, 1]) * 15 <= 30).all()
    assert [tuple(t) for t in tasks[tasks[:, 0] == 0][:, 1:]] == [
        (0, 2),
        (2, 4),
        (4, 5),
        (5, 7),
        (7, 9),
    ]
    with pytest.raises(ValueError, match="plane may hold at most 30 voxels"):
        volumes.plan(1, 2, 6, 6, 1)
    mask = np.random.default_rng(23).random((9, 3, 5)) < 0.5
    labels, _ = engine_labels(mask, LabelParams(connectivity=26))
    np.testing.assert_array_equal(labels, scipy_volume(mask, 26)[0])
