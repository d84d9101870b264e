"""Volumes on the GPU against the CPU engine bit for bit (labels, K, every statistics
column) and against scipy.ndimage.label and the 3-D BFS: hypothesis volumes across dtypes,
shapes and modes, the nasty fixed volumes, batches, device arrays from CuPy and PyTorch on
the caller's stream, host volumes with device='cuda', and volumes labeled in slabs under a
capped device budget (components crossing every seam, stages reading across them)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import pixel_values
from cuda_helpers import gpu, skip_unless_free_gib, spin
from hypothesis import given, settings
from hypothesis import strategies as st
from shapes import helix
from volume_oracles import bfs_volume, scipy_volume

import ccl_cli
from ccl_cli.backends.cuda import device as device_module
from ccl_cli.backends.cuda import slabs, volumes
from ccl_cli.contract.params import SUPPORTED_DTYPES, LabelParams

pytestmark = gpu

CONNECTIVITIES = [6, 18, 26]


def cpu(values: np.ndarray, **options):
    """The CPU engine's labels and tables (the reference)."""
    return ccl_cli.label(np.ascontiguousarray(values), device="cpu", **options)


def on_device(values: np.ndarray, **options):
    """Labels (numpy) and host tables from a CuPy volume or batch of volumes."""
    import cupy

    labels, table = ccl_cli.label(cupy.asarray(values), **options)
    return labels.get(), table.to_numpy()


def assert_tables_equal(got, want) -> None:
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.is_volume and b.is_volume
        assert a.equals(b), f"statistics of volume {i}"


def assert_same(values: np.ndarray, **options) -> None:
    """The GPU (a CuPy array; a host array with device='cuda'; labels only) gives the CPU
    engine's bytes."""
    import cupy

    want_labels, want_tables = cpu(values, **options)
    got_labels, got_tables = on_device(values, **options)
    np.testing.assert_array_equal(got_labels, want_labels)
    assert_tables_equal(got_tables, want_tables)
    host_labels, host_tables = ccl_cli.label(np.ascontiguousarray(values), device="cuda", **options)
    np.testing.assert_array_equal(host_labels, want_labels)
    assert_tables_equal(host_tables, want_tables)
    labels, counts = ccl_cli.label(cupy.asarray(values), stats=False, **options)
    np.testing.assert_array_equal(labels.get(), want_labels)
    assert counts.get().reshape(-1).tolist() == [len(t) for t in want_tables]


def pillars(depth: int, height: int, width: int) -> np.ndarray:
    """Columns along z, each crossing every plane and so every slab seam."""
    mask = np.zeros((depth, height, width), bool)
    mask[:, ::2, ::3] = True
    return mask


def giant(depth: int, height: int, width: int) -> np.ndarray:
    """One component snaking through every row of every plane."""
    mask = np.zeros((depth, height, width), bool)
    mask[:, 1::2, :] = True
    mask[:, ::4, 0] = True
    mask[:, 2::4, -1] = True
    mask[::2, -1, :] = True
    return mask


def nasty_volumes() -> dict[str, np.ndarray]:
    """The fixed cases, sized to cross the kernels' tiles in every direction (32 x 4 x 4
    voxels in tau mode; the cells' 64 x 4 x 2 for 6, 64 x 8 x 2 for 18, 64 x 8 x 4 for 26)."""
    rng = np.random.default_rng(3)
    checker = np.indices((13, 19, 71)).sum(axis=0) % 2 == 0
    return {
        "1x1x1 fg": np.ones((1, 1, 1), bool),
        "1x1x1 bg": np.zeros((1, 1, 1), bool),
        "1xNx1": rng.random((1, 37, 1)) < 0.5,
        "Nx1x1": rng.random((37, 1, 1)) < 0.5,
        "1x1xN": rng.random((1, 1, 133)) < 0.5,
        "odd 9x17x67": rng.random((9, 17, 67)) < 0.5,
        "odd 17x9x129": rng.random((17, 9, 129)) < 0.3,
        "all": np.ones((11, 13, 70), bool),
        "none": np.zeros((11, 13, 70), bool),
        "checkerboard": checker,
        "inverse checkerboard": ~checker,
        "helix": helix(96, 21, 2.5),
        "pillars": pillars(19, 17, 70),
        "giant": giant(17, 21, 99),
        "diagonal": np.eye(40, dtype=bool)[:, :, None] & np.eye(40, dtype=bool)[:, None, :],
    }


@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
@pytest.mark.parametrize("name", list(nasty_volumes()))
def test_nasty_volumes_match_scipy_and_the_cpu(name: str, connectivity: int) -> None:
    mask = nasty_volumes()[name]
    want, count = scipy_volume(mask, connectivity)
    labels, tables = on_device(mask, connectivity=connectivity)
    np.testing.assert_array_equal(labels, want)
    assert len(tables[0]) == count
    assert_same(mask, connectivity=connectivity)
    assert_same(mask.astype(np.uint16) * 300, connectivity=connectivity, min_area=2)


@settings(max_examples=60)
@given(st.data())
def test_hypothesis_volumes_equal_the_cpu(data: st.DataObject) -> None:
    dtype = np.dtype(data.draw(st.sampled_from(SUPPORTED_DTYPES)))
    shape = (
        data.draw(st.integers(1, 19)),
        data.draw(st.integers(1, 19)),
        data.draw(st.integers(1, 140)),
    )
    values = pixel_values(data.draw, dtype, shape)
    options = {
        "connectivity": data.draw(st.sampled_from(CONNECTIVITIES)),
        "tau": data.draw(st.sampled_from([None, 0, 1, 3])),
        "min_area": data.draw(st.sampled_from([0, 0, 2, 5])),
    }
    if dtype.kind == "b" and options["tau"] is not None:
        options["tau"] = 0
    if options["tau"] is not None:  # the tolerance that grows with the values
        options["tau_relative"] = data.draw(st.sampled_from([0.0, 0.0, 0.01, 0.25]))
        options["tau_quadratic"] = data.draw(st.sampled_from([0.0, 0.0, 1e-5, 0.01]))
    assert_same(values, **options)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_hypothesis_volumes_in_slabs_equal_the_cpu(data: st.DataObject) -> None:
    """Random volumes, options and slab depths: the seams of every slab merged as one pass
    over the whole volume would label it."""
    dtype = np.dtype(data.draw(st.sampled_from([np.bool_, np.uint8, np.uint16, np.float32])))
    shape = (
        data.draw(st.integers(2, 23)),
        data.draw(st.integers(1, 17)),
        data.draw(st.integers(1, 70)),
    )
    values = pixel_values(data.draw, dtype, shape)
    options = {
        "connectivity": data.draw(st.sampled_from(CONNECTIVITIES)),
        "tau": None if dtype.kind == "b" else data.draw(st.sampled_from([None, 0, 1, 3])),
        "min_area": data.draw(st.sampled_from([0, 2, 5])),
    }
    if options["tau"] is not None:
        options["tau_relative"] = data.draw(st.sampled_from([0.0, 0.01]))
    planes = data.draw(st.integers(1, shape[0]))
    want_labels, want_tables = cpu(values, **options)
    with pytest.MonkeyPatch.context() as patch:
        slab_counts = capped(patch, planes, shape[-2:])
        for got_labels, got_tables in (
            on_device(values, **options),
            ccl_cli.label(np.ascontiguousarray(values), device="cuda", **options),
        ):
            np.testing.assert_array_equal(got_labels, want_labels)
            assert_tables_equal(got_tables, want_tables)
        if planes < shape[0]:  # a budget for fewer planes than the volume has: slabs
            assert len(slab_counts) == 2 and min(slab_counts) > 1


@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
@pytest.mark.parametrize("density", [0.2, 0.5, 0.8])
def test_random_binary_volumes_match_scipy(connectivity: int, density: float) -> None:
    mask = np.random.default_rng(int(density * 10) + connectivity).random((23, 37, 150)) < density
    want, _ = scipy_volume(mask, connectivity)
    labels, _ = on_device(mask, connectivity=connectivity)
    np.testing.assert_array_equal(labels, want)


@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.uint16])
def test_inverted_volumes_label_the_voxels_below_the_dtype_max(connectivity: int, dtype) -> None:
    """--invert subtracts each value from its dtype's largest (1 for booleans, which the
    kernels read as bytes), so the foreground is every voxel below it; scipy on the
    complement, and the CPU engine's bytes."""
    mask = np.random.default_rng(connectivity).random((13, 19, 71)) < 0.6
    values = mask.astype(dtype) * (1 if dtype == np.bool_ else np.iinfo(dtype).max)
    values = values.astype(dtype)
    want, _ = scipy_volume(~mask, connectivity)
    labels, _ = on_device(values, connectivity=connectivity, invert=True)
    np.testing.assert_array_equal(labels, want)
    assert_same(values, connectivity=connectivity, invert=True)


@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
def test_tau_volumes_match_the_bfs(connectivity: int) -> None:
    rng = np.random.default_rng(connectivity)
    values = (rng.integers(0, 7, (9, 11, 70)) * (rng.random((9, 11, 70)) < 0.8)).astype(np.int16)
    params = LabelParams(tau=1, connectivity=connectivity)
    want = bfs_volume(values, params)
    labels, _ = on_device(values, tau=1, connectivity=connectivity)
    np.testing.assert_array_equal(labels, want)


@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
def test_a_tau_ramp_along_z_joins_within_tau_only(connectivity: int) -> None:
    ramp = (10 + 3 * np.arange(40, dtype=np.int16))[:, None, None]
    ramp = np.ascontiguousarray(np.broadcast_to(ramp, (40, 9, 70)))
    together, _ = on_device(ramp, tau=3, connectivity=connectivity)
    assert together.min() == together.max() == 1
    apart, tables = on_device(ramp, tau=2.5, connectivity=connectivity)
    assert len(tables[0]) == 40
    np.testing.assert_array_equal(
        apart, np.broadcast_to(np.arange(1, 41)[:, None, None], ramp.shape)
    )
    assert_same(ramp, tau=3, connectivity=connectivity)


@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
def test_a_growing_tolerance_along_z_equals_the_cpu(connectivity: int) -> None:
    """Planes 1000, 1010, .., 1230 (uint16) and the same in float64: tau 5 keeps them apart,
    relative 0.01 joins them all, quadratic 4e-6 joins the planes from 1110 on (where
    5 + 4e-6 m**2 reaches 10) and 5e-6 all of them. Each plane's label follows the README's
    rule evaluated here in float64 (tau + relative m + quadratic m**2, m the larger value);
    the CPU engine's bytes too."""
    values_by_plane = [1000 + 10 * z for z in range(24)]
    ramp = np.array(values_by_plane, np.uint16)[:, None, None]
    ramp = np.ascontiguousarray(np.broadcast_to(ramp, (24, 5, 70)))
    for tau, relative, quadratic in ((5, 0, 0), (5, 0.01, 0), (5, 0, 4e-6), (5, 0, 5e-6)):
        plane_labels = [1]
        for a, b in itertools.pairwise(values_by_plane):
            m = float(max(abs(a), abs(b)))
            limit = float(tau)
            if relative > 0:
                limit = limit + relative * m
            if quadratic > 0:
                limit = limit + quadratic * (m * m)
            plane_labels.append(plane_labels[-1] + (abs(b - a) > limit))
        want = np.broadcast_to(np.array(plane_labels)[:, None, None], ramp.shape)
        keywords = {"tau": tau, "tau_relative": relative, "tau_quadratic": quadratic}
        for values in (ramp, ramp.astype(np.float64)):
            labels, tables = on_device(values, connectivity=connectivity, **keywords)
            np.testing.assert_array_equal(labels, want, err_msg=str(keywords))
            assert len(tables[0]) == plane_labels[-1]
            assert_same(values, connectivity=connectivity, **keywords)
    assert len(set(plane_labels)) == 1  # 5e-6: all one component (and 4e-6 gave 12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_statistics_with_infinities_nan_and_signed_zeros(dtype) -> None:
    rng = np.random.default_rng(9)
    values = rng.normal(scale=1e3, size=(12, 13, 70)).astype(dtype)
    values[rng.random(values.shape) < 0.2] = 0
    values[::3, ::4, ::5] = np.inf
    values[1::5, ::3, ::7] = -np.inf
    values[::4, 1::3, 2::9] = np.nan
    values[2::3, ::2, 1::6] = -0.0
    for options in ({}, {"tau": 500.0}, {"background": None, "tau": 0.5, "min_area": 3}):
        for connectivity in CONNECTIVITIES:
            assert_same(values, connectivity=connectivity, **options)


def test_integer_statistics_at_the_extremes() -> None:
    values = np.full((9, 17, 70), 2**32 - 1, np.uint32)
    values[::2, ::3, ::2] -= np.uint32(3)
    values[:, 5, :] = 0
    assert_same(values, connectivity=6)
    low = np.full((9, 17, 70), -(2**31), np.int32)
    low[::2, ::5, ::3] = 2**31 - 1
    assert_same(low, connectivity=26, background=None)


def test_means_of_sums_past_64_bits_round_as_the_cpu_does() -> None:
    """gccl_volume_stats_table converts a 128-bit sum as C converts an __int128: to the
    nearest float64, ties to even, then one division by the voxels."""
    import cupy

    from ccl_cli.backends.cuda.loader import CUDA_DIR, read_defines

    sums = [
        2**64 + 1,
        2**70 + 2**17 + 1,  # above the half of the last place: rounds up
        2**70 + 2**17,  # exactly half: ties to even (down)
        2**70 + 3 * 2**17,  # half, odd below: ties to even (up)
        -(2**66) - 12345,
        -(2**64),
        2**63,
        (2**32 - 1) * 2**35,
    ]
    areas = [3, 2**35, 7, 2**34 + 1, 5, 1, 2**31, 2**35]
    total = len(sums)
    rows = ("GCCL_V_SUMV", "GCCL_V_SUMV_HIGH", "GCCL_V_AREA", "GCCL_V_VMIN", "GCCL_V_VMAX")
    layout = read_defines((CUDA_DIR / "volume_stats.cu").read_text(), "volume_stats.cu", rows)
    agg = np.zeros((volumes.FIELDS, total), np.uint64)
    for j, (s, area) in enumerate(zip(sums, areas, strict=True)):
        wide = s % 2**128
        agg[layout["GCCL_V_SUMV"], j] = wide % 2**64
        agg[layout["GCCL_V_SUMV_HIGH"], j] = wide >> 64
        agg[layout["GCCL_V_AREA"], j] = area
        agg[layout["GCCL_V_VMIN"], j] = agg[layout["GCCL_V_VMAX"], j] = 2**63  # +0.0's key
    base = cupy.asarray(np.array([0, total], np.uint32))
    words = volumes.stats_table(cupy.asarray(agg), base, None, False).get()
    means = volumes.table_view(words, total, True).mean
    assert means.tolist() == [float(s) / float(a) for s, a in zip(sums, areas, strict=True)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_component_holding_a_nan_has_nan_mean_min_and_max(dtype) -> None:
    """volume_stats.cu's statistics of components that hold a NaN (mean, min and max NaN, as
    numpy's mean, min and max of the values are; the NaN is no infinity), of both infinities
    (mean NaN) and of finite values with a -0.0. No labeling option puts a NaN voxel into a
    volume's component (NaN is never foreground, and the stages clear it), so the kernels
    are run on labels given here; every expected value is numpy's."""
    import cupy

    values = np.array([[[1.5, np.nan, 2.5, 7.0], [np.inf, -np.inf, 3.0, -0.0]]], dtype)
    labels = np.array([[[1, 1, 1, 2], [3, 3, 2, 2]]], np.uint32)
    base = cupy.asarray(np.array([0, 3], np.uint32))
    agg = volumes.aggregate(
        cupy.asarray(values)[None], cupy.asarray(labels)[None], base, volumes.empty_aggregates(3)
    )
    words = volumes.stats_table(agg, base, None, True).get()
    table = volumes.table_view(words, 3, False)
    for label in (1, 2, 3):
        where = np.nonzero(labels == label)
        voxels = values[where].astype(np.float64)
        z, y, x = where
        assert table.area[label - 1] == len(voxels)
        assert (table.x[label - 1], table.y[label - 1], table.z[label - 1]) == (
            x.min(),
            y.min(),
            z.min(),
        )
        assert table.width[label - 1] == x.max() - x.min() + 1
        assert table.height[label - 1] == y.max() - y.min() + 1
        assert table.depth[label - 1] == 1
        assert table.centroid_x[label - 1] == x.sum() / len(voxels)
        assert table.centroid_y[label - 1] == y.sum() / len(voxels)
        with np.errstate(invalid="ignore"):
            expected = (voxels.mean(), voxels.min(), voxels.max())
        got = (table.mean[label - 1], table.min[label - 1], table.max[label - 1])
        np.testing.assert_array_equal(got, expected)
        assert np.signbit(got).tolist() == np.signbit(expected).tolist() or np.isnan(got).any()
    assert np.isnan([table.mean[0], table.min[0], table.max[0]]).all()
    assert np.isnan(table.mean[2]) and (table.min[2], table.max[2]) == (-np.inf, np.inf)
    assert np.signbit(table.min[1]) and table.min[1] == 0.0


@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
def test_area_filters_select_as_the_cpu(connectivity: int) -> None:
    values = (np.random.default_rng(4).random((15, 19, 80)) < 0.35).astype(np.uint8)
    for options in ({"min_area": 4}, {"max_area": 30}, {"min_area": 2, "largest": 5}):
        assert_same(values, connectivity=connectivity, **options)


@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
@pytest.mark.parametrize(
    "options",
    [
        {"erode": 1},
        {"dilate": 2},
        {"open": 1},
        {"close": 2},
        {"close": 1, "tau": 2},
        {"tau": 3, "smooth": "box:1"},
        {"tau": 3, "smooth": "binomial:2", "open": 1},
        {"tau": 0.5, "smooth": "box:2", "dilate": 1},
    ],
    ids=str,
)
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32])
def test_stages_in_3d_equal_the_cpu(connectivity: int, options: dict, dtype) -> None:
    rng = np.random.default_rng(len(options) + connectivity)
    values = rng.integers(0, 9, (11, 13, 70)) * (rng.random((11, 13, 70)) < 0.6)
    if dtype == np.float32:
        values = values * 0.75 - 2.0
    assert_same(values.astype(dtype), connectivity=connectivity, **options)


def test_stage_masks_match_scipy() -> None:
    """Erosion and dilation with the element of each connectivity, the border that changes
    nothing: scipy.ndimage.binary_erosion / binary_dilation as the reference."""
    import scipy.ndimage as ndi

    mask = np.random.default_rng(21).random((9, 13, 70)) < 0.7
    for connectivity, rank in ((6, 1), (18, 2), (26, 3)):
        structure = ndi.generate_binary_structure(3, rank)
        eroded = ndi.binary_erosion(mask, structure, iterations=2, border_value=1)
        labels, _ = on_device(mask, connectivity=connectivity, erode=2)
        np.testing.assert_array_equal(labels > 0, eroded)
        dilated = ndi.binary_dilation(mask, structure, border_value=0)
        labels, _ = on_device(mask, connectivity=connectivity, dilate=1)
        np.testing.assert_array_equal(labels > 0, dilated)


def test_a_batch_of_volumes_is_one_call_and_may_go_in_parts(monkeypatch) -> None:
    rng = np.random.default_rng(14)
    batch = (rng.random((5, 9, 13, 70)) < 0.4).astype(np.uint8) * rng.integers(1, 4, (5, 9, 13, 70))
    batch = batch.astype(np.uint8)
    for options in ({"connectivity": 26}, {"connectivity": 6, "tau": 1, "min_area": 2}):
        assert_same(batch, **options)
        monkeypatch.setattr(device_module, "MAX_PART_PIXELS", 2 * batch[0].size)
        assert_same(batch, **options)
        monkeypatch.undo()


def capped(monkeypatch, planes: int, shape: tuple[int, ...]) -> list[int]:
    """A device budget that holds the labels of `planes` planes of `shape`'s volumes (a
    device volume of uint8 gets slabs of that many planes, other labelings fewer, at least
    one). Returns a list that gets the number of slabs of each volume labeled in slabs, so
    that a test can tell the slab path ran."""
    per_voxel = slabs.voxel_bytes(np.dtype(np.uint8), LabelParams(), uploaded=False)
    budget = planes * shape[-2] * shape[-1] * per_voxel
    monkeypatch.setattr(slabs, "device_budget", lambda device: budget)
    slab_counts: list[int] = []
    label_in_slabs = slabs.label_in_slabs

    def counted(source, params, statistics, plan):
        slab_counts.append(len(plan))
        return label_in_slabs(source, params, statistics, plan)

    monkeypatch.setattr(slabs, "label_in_slabs", counted)
    return slab_counts


@pytest.mark.parametrize("connectivity", CONNECTIVITIES)
@pytest.mark.parametrize("planes", [1, 2, 5])
def test_slabs_under_a_capped_budget_give_the_same_bytes(monkeypatch, connectivity, planes):
    """Components crossing every seam (pillars, the helix, a giant snake), tau mode, area
    filtering and statistics: in slabs of 1, 2 or 5 planes, from device and host arrays."""
    volumes = {
        "pillars": pillars(13, 17, 70),
        "helix": helix(40, 15, 1.5),
        "giant": giant(11, 13, 70),
        "random": np.random.default_rng(planes).random((12, 11, 67)) < 0.45,
    }
    wants = {
        name: cpu(mask, connectivity=connectivity, min_area=2) for name, mask in volumes.items()
    }
    ramp = np.ascontiguousarray(
        np.broadcast_to((3 * np.arange(14, dtype=np.uint16))[:, None, None], (14, 9, 40))
    )
    tau_want = cpu(ramp, connectivity=connectivity, tau=3)
    slab_counts = capped(monkeypatch, planes, (17, 70))
    for name, mask in volumes.items():
        want_labels, want_tables = wants[name]
        for got_labels, got_tables in (
            on_device(mask, connectivity=connectivity, min_area=2),
            ccl_cli.label(mask, device="cuda", connectivity=connectivity, min_area=2),
        ):
            np.testing.assert_array_equal(got_labels, want_labels, err_msg=name)
            assert_tables_equal(got_tables, want_tables)
    assert len(slab_counts) == 2 * len(volumes) and min(slab_counts) > 1
    got_labels, got_tables = on_device(ramp, connectivity=connectivity, tau=3)
    np.testing.assert_array_equal(got_labels, tau_want[0])
    assert_tables_equal(got_tables, tau_want[1])
    growing = {"tau": 2, "tau_relative": 0.04}  # 2 + 0.04 * 3z joins planes from z = 9 on
    got_labels, got_tables = on_device(ramp, connectivity=connectivity, **growing)
    want_labels, want_tables = cpu(ramp, connectivity=connectivity, **growing)
    np.testing.assert_array_equal(got_labels, want_labels)
    assert_tables_equal(got_tables, want_tables)


@pytest.mark.parametrize(
    "options",
    [
        {"tau": 2, "close": 2},
        {"open": 1, "dilate": 1},
        {"tau": 1.5, "smooth": "binomial:2", "erode": 1},
        {"max_area": 40, "largest": 3},
    ],
    ids=str,
)
@pytest.mark.parametrize("dtype", [np.uint16, np.float64])
def test_slabs_with_stages_floats_and_selection(monkeypatch, options, dtype) -> None:
    """Stages read `halo` planes beyond each slab; float means need each component's size
    before the last pass; largest picks from the areas of every slab."""
    rng = np.random.default_rng(17)
    values = (rng.integers(1, 12, (16, 13, 70)) * (rng.random((16, 13, 70)) < 0.6)).astype(dtype)
    for connectivity in CONNECTIVITIES:
        want_labels, want_tables = cpu(values, connectivity=connectivity, **options)
        slab_counts = capped(monkeypatch, 3, values.shape)
        for got_labels, got_tables in (
            on_device(values, connectivity=connectivity, **options),
            ccl_cli.label(values, device="cuda", connectivity=connectivity, **options),
        ):
            np.testing.assert_array_equal(got_labels, want_labels)
            assert_tables_equal(got_tables, want_tables)
        assert len(slab_counts) == 2 and min(slab_counts) > 1
        monkeypatch.undo()


def test_slab_labels_only_counts_and_batches(monkeypatch) -> None:
    import cupy

    batch = (np.random.default_rng(5).random((3, 14, 11, 70)) < 0.5).astype(np.uint8)
    want_labels, want_tables = cpu(batch, connectivity=18, min_area=3)
    slab_counts = capped(monkeypatch, 2, batch.shape)
    labels, counts = ccl_cli.label(cupy.asarray(batch), connectivity=18, min_area=3, stats=False)
    np.testing.assert_array_equal(labels.get(), want_labels)
    assert counts.get().tolist() == [len(t) for t in want_tables]
    out = np.full(batch.shape, 7, np.uint32)
    ccl_cli.label(batch, device="cuda", connectivity=18, min_area=3, out=out, stats=False)
    np.testing.assert_array_equal(out, want_labels)
    assert len(slab_counts) == 2 * len(batch) and min(slab_counts) > 1


def torch_or_skip():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


def test_torch_volumes_in_torch_out_on_torchs_stream() -> None:
    torch = torch_or_skip()
    volume = (np.random.default_rng(6).random((10, 13, 70)) < 0.5).astype(np.uint8)
    want_labels, want_tables = cpu(volume, connectivity=26, tau=0)
    tensor = torch.as_tensor(volume, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        labels, counts = ccl_cli.label(tensor, connectivity=26, tau=0, stats=False)
        out = torch.empty(volume.shape, dtype=torch.int32, device="cuda")
        again, table = ccl_cli.label(tensor, connectivity=26, tau=0, out=out)
    torch.cuda.current_stream().wait_stream(side)
    assert isinstance(labels, torch.Tensor) and labels.dtype == torch.int32
    np.testing.assert_array_equal(labels.cpu().numpy(), want_labels.view(np.int32))
    assert again is out
    np.testing.assert_array_equal(out.cpu().numpy(), want_labels.view(np.int32))
    assert int(counts.cpu()) == len(want_tables[0])
    assert_tables_equal(table.to_numpy(), want_tables)
    assert isinstance(table.z, torch.Tensor)


def test_labels_only_queues_on_the_callers_stream_without_waiting() -> None:
    import cupy

    volume = (np.random.default_rng(7).random((20, 30, 140)) < 0.5).astype(np.uint8)
    want_labels, want_tables = cpu(volume, connectivity=6)
    source = cupy.asarray(volume)
    values = cupy.zeros_like(source)
    side = cupy.cuda.Stream(non_blocking=True)
    labeler = ccl_cli.Labeler(connectivity=6, stats=False)
    for _ in range(2):
        spin(side)
        with side:
            values[...] = source
            labels, count = labeler(values)
            assert not side.done
        side.synchronize()
        np.testing.assert_array_equal(labels.get(), want_labels)
        assert int(count.get()) == len(want_tables[0])


def test_device_tables_of_volumes_keep_their_columns_on_the_device() -> None:
    import cupy

    batch = (np.random.default_rng(8).random((2, 9, 11, 70)) < 0.4).astype(np.int16)
    want_labels, want_tables = cpu(batch, connectivity=18)
    labels, table = ccl_cli.label(cupy.asarray(batch), connectivity=18)
    np.testing.assert_array_equal(labels.get(), want_labels)
    assert table.is_volume and isinstance(table.centroid_z, cupy.ndarray)
    for i, want in enumerate(want_tables):
        np.testing.assert_array_equal(table.z[table.rows(i)].get(), want.z)
        np.testing.assert_array_equal(table.depth[table.rows(i)].get(), want.depth)
        np.testing.assert_array_equal(table.centroid_z[table.rows(i)].get(), want.centroid_z)
        np.testing.assert_array_equal(table.mean[table.rows(i)].get(), want.mean)


def test_strided_and_boolean_device_volumes() -> None:
    import cupy

    big = (np.random.default_rng(10).random((14, 20, 150)) < 0.5).astype(np.uint8)
    view = big[::2, 1::2, ::3]
    want_labels, want_tables = cpu(view, connectivity=26)
    labels, table = ccl_cli.label(cupy.asarray(big)[::2, 1::2, ::3], connectivity=26)
    np.testing.assert_array_equal(labels.get(), want_labels)
    assert_tables_equal(table.to_numpy(), want_tables)
    stored_255 = (cupy.asarray(big).view(cupy.uint8) * 255).view(cupy.bool_)
    labels, _ = ccl_cli.label(stored_255, connectivity=26, stats=False)
    np.testing.assert_array_equal(labels.get(), cpu(big.astype(bool), connectivity=26)[0])


def slab_calls(monkeypatch) -> list[int]:
    """Count the volumes the device path labels in slabs (one entry per call)."""
    calls: list[int] = []
    label_in_slabs = slabs.label_in_slabs

    def counted(*args, **kwargs):
        calls.append(1)
        return label_in_slabs(*args, **kwargs)

    monkeypatch.setattr(slabs, "label_in_slabs", counted)
    return calls


def test_a_binary_volume_past_2_31_voxels_in_one_piece(monkeypatch) -> None:
    """2100 x 1024 x 1024 voxels, binary: one piece (its cells' keys count voxel rows and
    cell columns, not voxels), with components whose first voxels lie past 2**31 voxels
    (random planes from plane 2040 on; plane 2048 starts at 2**31) and one through every
    plane; the CPU engine's bytes under 26 (statistics, min_area), 18 and 6."""
    import cupy

    skip_unless_free_gib(40)
    shape = (2100, 1024, 1024)
    volume = np.zeros(shape, np.uint8)
    volume[:, 0, 0] = 1  # a pillar through every plane: component 1
    planes = range(2040, shape[0], 3)
    volume[2040::3] = np.random.default_rng(31).random((len(planes), 1024, 1024)) < 0.3
    assert volume.size > volumes.MAX_VOLUME_VOXELS
    calls = slab_calls(monkeypatch)
    values = cupy.asarray(volume)
    want_labels, want_tables = cpu(volume, connectivity=26, min_area=2)
    assert want_tables[0].z[-1] >= 2048  # kept components start past 2**31 voxels
    labels, table = ccl_cli.label(values, connectivity=26, min_area=2)
    assert bool((labels == cupy.asarray(want_labels)).all())
    assert_tables_equal(table.to_numpy(), want_tables)
    del labels, table, want_labels, want_tables
    for connectivity in (18, 6):
        want_labels, want_counts = cpu(volume, connectivity=connectivity, stats=False)
        labels, counts = ccl_cli.label(values, connectivity=connectivity, stats=False)
        assert bool((labels == cupy.asarray(want_labels)).all())
        assert counts.get().tolist() == want_counts.tolist()
        del labels, want_labels
    assert calls == []


def test_a_tau_volume_past_2_31_voxels_goes_in_slabs(monkeypatch) -> None:
    """The same size in tau mode, whose voxel kernels index voxels in 31 bits: labeled in
    slabs, the CPU engine's bytes (values 1..3 in random planes near the end, tau 1 joins
    1 with 2 and 2 with 3 only)."""
    import cupy

    skip_unless_free_gib(40)
    shape = (2100, 1024, 1024)
    volume = np.zeros(shape, np.uint8)
    volume[:, 0, 0] = 3
    planes = range(2040, shape[0], 3)
    rng = np.random.default_rng(33)
    volume[2040::3] = rng.integers(0, 4, (len(planes), 1024, 1024), dtype=np.uint8)
    calls = slab_calls(monkeypatch)
    want_labels, want_tables = cpu(volume, connectivity=26, tau=1)
    labels, table = ccl_cli.label(cupy.asarray(volume), connectivity=26, tau=1)
    assert bool((labels == cupy.asarray(want_labels)).all())
    assert_tables_equal(table.to_numpy(), want_tables)
    assert calls == [1]


def test_a_batch_past_2_31_voxels_in_one_set_of_launches() -> None:
    """Two different volumes of 1100 x 1024 x 1024 voxels (each under 2**31, labeled
    together): the second one's voxels, labels and statistics lie past 2**31 voxels of the
    batch, reached only through the 64-bit volume offsets of every kernel (the cells of 26
    and of 6, their borders, roots and labels, statistics, remap); the CPU engine's bytes."""
    import cupy

    skip_unless_free_gib(48)
    shape = (2, 1100, 1024, 1024)
    rng = np.random.default_rng(37)
    batch = np.zeros(shape, np.uint8)
    batch[:, :, ::2, ::3] = 1  # pillars through every plane
    for n in range(2):  # sparse random planes, at other depths in each volume
        planes = range(n, shape[1], 9 + n)
        batch[n, n :: 9 + n] = rng.random((len(planes), 1024, 1024)) < 0.3
    assert batch[0].size <= volumes.MAX_VOLUME_VOXELS < batch.size
    values = cupy.asarray(batch)
    want_labels, want_tables = cpu(batch, connectivity=26, min_area=2)
    labels, table = ccl_cli.label(values, connectivity=26, min_area=2)
    assert bool((labels == cupy.asarray(want_labels)).all())
    assert_tables_equal(table.to_numpy(), want_tables)
    del labels, table, want_labels, want_tables
    want_labels, want_counts = ccl_cli.label(batch, device="cpu", connectivity=6, stats=False)
    labels, counts = ccl_cli.label(values, connectivity=6, stats=False)
    assert bool((labels == cupy.asarray(want_labels)).all())
    assert counts.get().tolist() == want_counts.tolist()


def test_bad_device_volumes_get_one_clear_error() -> None:
    import cupy

    for shape, keywords, message in (
        ((2, 3, 4, 5, 6), {"connectivity": 26}, "shape"),
        ((0, 4, 5), {"connectivity": 6}, "a volume needs a voxel along every axis"),
        ((4, 0, 5), {"connectivity": 18}, "a volume needs a voxel along every axis"),
        ((7, 9), {"connectivity": 26}, "shape"),
    ):
        values = cupy.zeros(shape, cupy.uint8)
        for stats in (True, False):
            with pytest.raises(ValueError, match=message) as raised:
                ccl_cli.label(values, stats=stats, **keywords)
            assert "\n" not in str(raised.value)
        with pytest.raises(ValueError, match=message):
            ccl_cli.label(values.get(), device="cuda", **keywords)
    with pytest.raises(ValueError, match="shape"):  # 8 on a batch of volumes
        ccl_cli.label(cupy.zeros((2, 3, 4, 5), cupy.uint8), connectivity=8)
