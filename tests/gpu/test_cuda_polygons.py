"""--polygons: the CUDA outlines equal the CPU outlines exactly (arrays and GeoJSON bytes)."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import backends, gpu, to_host
from hypothesis import given, settings
from hypothesis import strategies as st
from polygon_cases import POLYGON_CASES

from ccl_cli.contract.params import LabelParams
from ccl_cli.io.geojson import geojson

pytestmark = gpu


def assert_same_outlines(batch: np.ndarray, params: LabelParams) -> None:
    """Labels, outline arrays and GeoJSON text of CUDA and CPU agree for every image."""
    cuda, cpu = backends()
    got, want = cuda.label(batch, params), cpu.label(batch, params)
    np.testing.assert_array_equal(to_host(got.labels), want.labels)
    assert got.polygons is not None and want.polygons is not None
    assert len(got.polygons) == len(want.polygons) == len(batch)
    for i, (a, b) in enumerate(zip(got.polygons, want.polygons, strict=True)):
        assert a.equals(b), f"outlines of image {i} differ"
        assert geojson(a) == geojson(b)
        assert len(a) == len(want.tables[i])


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("name", POLYGON_CASES)
def test_nasty_cases(name: str, connectivity: int) -> None:
    image = POLYGON_CASES[name]
    assert_same_outlines(
        image[np.newaxis], LabelParams(tau=0, connectivity=connectivity, polygons=True)
    )
    assert_same_outlines(image[np.newaxis], LabelParams(connectivity=connectivity, polygons=True))


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("shape", [(1, 1), (1, 57), (63, 1), (97, 131), (256, 300)])
@pytest.mark.parametrize("min_area", [0, 5])
def test_random_batches(shape: tuple[int, int], connectivity: int, min_area: int) -> None:
    rng = np.random.default_rng(sum(shape) + connectivity + min_area)
    batch = (rng.random((5, *shape)) < 0.5).astype(np.uint8) * rng.integers(1, 4, (5, *shape))
    batch[1] = 0  # an empty image inside the batch
    for tau in (None, 0):
        params = LabelParams(tau=tau, connectivity=connectivity, min_area=min_area, polygons=True)
        assert_same_outlines(batch.astype(np.uint8), params)


def test_device_batch_stays_on_device() -> None:
    import cupy

    cuda, cpu = backends()
    rng = np.random.default_rng(2)
    batch = (rng.random((3, 40, 50)) < 0.4).astype(np.uint8)
    params = LabelParams(polygons=True)
    got = cuda.label(cupy.asarray(batch), params)
    want = cpu.label(batch, params)
    assert got.polygons is not None and want.polygons is not None
    assert all(a.equals(b) for a, b in zip(got.polygons, want.polygons, strict=True))


@settings(max_examples=60)
@given(
    seed=st.integers(0, 2**32 - 1),
    height=st.integers(1, 24),
    width=st.integers(1, 24),
    connectivity=st.sampled_from([4, 8]),
)
def test_random_small_images(seed: int, height: int, width: int, connectivity: int) -> None:
    rng = np.random.default_rng(seed)
    batch = rng.integers(0, 3, (2, height, width)).astype(np.uint8)
    assert_same_outlines(batch, LabelParams(tau=0, connectivity=connectivity, polygons=True))
