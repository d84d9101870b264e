"""Chunked volumes (dask arrays) labeled by ccl_cli.label equal the same volume labeled in one
piece, bit for bit (labels and statistics), over chunkings that cut components across every
face, edge and corner, chunks of one voxel along an axis, 6/18/26, binary and tau."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.ndimage as ndi
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from volume_oracles import SCIPY_RANK3

import ccl_cli

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(autouse=True)
def _synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def one_piece_and_chunked(values: np.ndarray, chunks: tuple, **options: object) -> None:
    """Assert the chunked labels and table equal one-piece labeling's."""
    labels, tables = ccl_cli.label(values, device="cpu", **options)
    lazy, chunked_tables = ccl_cli.label(
        da.from_array(values, chunks=chunks), device="cpu", **options
    )
    assert lazy.chunks == da.from_array(values, chunks=chunks).chunks
    got = lazy.compute()
    assert got.dtype == np.uint32
    np.testing.assert_array_equal(got, labels)
    assert chunked_tables[0].equals(tables[0]), (chunked_tables[0].to_dict(), tables[0].to_dict())


def blobs(shape: tuple[int, int, int], seed: int, density: float = 0.45) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random(shape) < density).astype(np.uint8) * rng.integers(
        1, 7, shape, dtype=np.uint8
    )


# Chunkings of a 7x8x9 volume: across every face, edge and corner (2x2x2 chunks meet at
# corners), one-voxel slices along each axis, irregular sizes, a single chunk.
CHUNKINGS = [
    (4, 4, 5),
    ((3, 4), (5, 3), (4, 5)),
    (1, 8, 9),
    (7, 1, 9),
    (7, 8, 1),
    (2, 3, 2),
    (7, 8, 9),
]


@pytest.mark.parametrize("connectivity", [6, 18, 26])
@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_binary_equals_one_piece(connectivity: int, chunks: tuple) -> None:
    values = blobs((7, 8, 9), seed=connectivity)
    one_piece_and_chunked(values, chunks, connectivity=connectivity)


@pytest.mark.parametrize("connectivity", [6, 18, 26])
def test_binary_equals_scipy(connectivity: int) -> None:
    """An independent reference: scipy.ndimage.label numbers in raster order too."""
    values = blobs((6, 7, 8), seed=10 + connectivity, density=0.35)
    structure = ndi.generate_binary_structure(3, SCIPY_RANK3[connectivity])
    expected, _ = ndi.label(values > 0, structure)
    labels, _ = ccl_cli.label(da.from_array(values, chunks=(3, 2, 5)), connectivity=connectivity)
    np.testing.assert_array_equal(labels.compute(), expected)


def test_edges_and_corners_join_only_where_connectivity_says() -> None:
    """Two voxels meeting at a chunk corner (26) or across a chunk edge (18, 26) only."""
    corner = np.zeros((4, 4, 4), np.uint8)
    corner[1, 1, 1] = corner[2, 2, 2] = 1  # a corner, in chunks (0,0,0) and (1,1,1)
    edge = np.zeros((4, 4, 4), np.uint8)
    edge[1, 1, 2] = edge[2, 2, 2] = 1  # an edge, in chunks (0,0,1) and (1,1,1)
    for values, joined in ((corner, {26}), (edge, {18, 26})):
        for connectivity in (6, 18, 26):
            _, count = ccl_cli.label(
                da.from_array(values, chunks=2), connectivity=connectivity, stats=False
            )
            assert int(count) == (1 if connectivity in joined else 2)
            one_piece_and_chunked(values, 2, connectivity=connectivity)


@pytest.mark.parametrize("chunks", [(3, 4, 4), (1, 5, 2)])
@pytest.mark.parametrize("connectivity", [6, 26])
def test_tau_equals_one_piece(chunks: tuple, connectivity: int) -> None:
    rng = np.random.default_rng(3)
    ramp = (
        np.add.outer(np.add.outer(np.arange(6), np.arange(7)), np.arange(8)).astype(np.uint16) * 3
    )
    values = (ramp + rng.integers(0, 4, ramp.shape)).astype(np.uint16)
    values[rng.random(values.shape) < 0.1] = 0
    one_piece_and_chunked(values, chunks, connectivity=connectivity, tau=3)
    one_piece_and_chunked(values, chunks, connectivity=connectivity, tau=1, tau_relative=0.05)


def test_float_tau_with_growing_tolerance_and_invert() -> None:
    rng = np.random.default_rng(4)
    values = rng.normal(0, 40, (6, 7, 8)).astype(np.float32)
    values[rng.random(values.shape) < 0.1] = 0
    for options in (
        {"tau": 20.0, "tau_quadratic": 0.002},
        {"tau": 15.0, "invert": True},
        {"threshold": 10.0},
        {"threshold": 10.0, "invert": True, "min_area": 2},
    ):
        labels, tables = ccl_cli.label(values, connectivity=26, device="cpu", **options)
        lazy, got = ccl_cli.label(
            da.from_array(values, chunks=(3, 4, 3)), connectivity=26, **options
        )
        np.testing.assert_array_equal(lazy.compute(), labels)
        expected = tables[0]
        # every column but the mean, whose float sums may differ in the last bits
        for name in (n for n in expected.columns[1:] if n != "mean"):
            np.testing.assert_array_equal(got[0][name], expected[name], err_msg=name)
        # Float means of components over several chunks: within a few units in the last place.
        np.testing.assert_allclose(got[0]["mean"], expected["mean"], rtol=1e-12)


@pytest.mark.parametrize(
    "options",
    [
        {"min_area": 4},
        {"max_area": 6},
        {"largest": 3},
        {"largest": 1, "min_area": 2, "max_area": 50},
        {"largest": 1000},
    ],
)
def test_area_filters_act_on_whole_components(options: dict) -> None:
    """A component of 2 voxels in each of 4 chunks has area 8: kept by min_area=4 although
    each piece has 2."""
    values = blobs((7, 8, 9), seed=5, density=0.3)
    values[2:6, 3:5, 3:5] = 9  # 4x2x2 = 16 voxels across 4 chunks of (4, 4, 4)
    one_piece_and_chunked(values, (4, 4, 4), connectivity=6, **options)


def test_largest_breaks_ties_by_label() -> None:
    """Equal areas: the lower label (the smaller first voxel) stays, wherever it lies."""
    values = np.zeros((4, 6, 6), np.uint8)
    values[0, 0, 4:6] = 1  # label 1, area 2, in chunk (0, 0, 1)
    values[3, 5, 0:2] = 1  # label 2, area 2, in chunk (1, 1, 0)
    values[1, 2:4, 2:4] = 1  # label 3, area 4, across four chunks
    labels, tables = ccl_cli.label(
        da.from_array(values, chunks=(2, 3, 3)), connectivity=6, largest=2
    )
    got = labels.compute()
    assert got[0, 0, 4] == 1 and got[1, 2, 2] == 2 and got[3, 5, 0] == 0
    assert list(tables[0]["area"]) == [2, 4]


@pytest.mark.parametrize("dtype", [np.bool_, np.int16, np.int32, np.uint32, np.float64])
def test_dtypes_and_exact_integer_sums(dtype: type) -> None:
    rng = np.random.default_rng(6)
    if np.dtype(dtype).kind == "b":
        values = rng.random((6, 6, 6)) < 0.5
    elif np.dtype(dtype).kind == "f":
        values = rng.integers(-5, 5, (6, 6, 6)).astype(dtype)  # integer-valued floats
        values[0, 0, 0] = -0.0
    else:
        info = np.iinfo(dtype)
        values = rng.integers(max(info.min, -(2**31)), info.max, (6, 6, 6), endpoint=True).astype(
            dtype
        )
        values[rng.random(values.shape) < 0.3] = 0
    one_piece_and_chunked(values, (2, 3, 4), connectivity=26)


@pytest.mark.parametrize("dtype", [">u2", ">i4", ">f8", ">i8"])
def test_big_endian_values_as_n5_and_zarr_v2_store_them(dtype: str) -> None:
    values = blobs((7, 8, 9), seed=11).astype(dtype)
    one_piece_and_chunked(values, (4, 4, 5), connectivity=18, tau=1)
    one_piece_and_chunked(values, (3, 8, 2), connectivity=26, min_area=2)


def test_background_none_makes_one_component() -> None:
    values = np.zeros((5, 5, 5), np.uint8)
    one_piece_and_chunked(values, 2, connectivity=6, background=None)
    one_piece_and_chunked(values, 2, connectivity=6)  # nothing: no components


def test_stats_false_gives_the_count() -> None:
    values = blobs((6, 6, 6), seed=7)
    _, expected = ccl_cli.label(values, connectivity=18, stats=False)
    _, count = ccl_cli.label(da.from_array(values, chunks=3), connectivity=18, stats=False)
    assert count.shape == () and int(count) == int(expected)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.tuples(*[st.integers(1, 6)] * 3),
    cuts=st.tuples(*[st.integers(1, 6)] * 3),
    density=st.floats(0.1, 0.9),
    connectivity=st.sampled_from([6, 18, 26]),
    tau=st.sampled_from([None, 0, 1, 2]),
    seed=st.integers(0, 2**16),
)
def test_property_equals_one_piece(shape, cuts, density, connectivity, tau, seed) -> None:
    rng = np.random.default_rng(seed)
    values = (rng.random(shape) < density).astype(np.uint8) * rng.integers(
        1, 5, shape, dtype=np.uint8
    )
    chunks = tuple(min(c, s) for c, s in zip(cuts, shape, strict=True))
    one_piece_and_chunked(values, chunks, connectivity=connectivity, tau=tau)
