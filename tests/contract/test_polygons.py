"""--polygons on the CPU: the outlines checked against the pixels, shapely and rasterio.

For every kept component: the geometry is valid (shapely), its area is the
pixel count, the pixel centres inside it are exactly the component's pixels,
rings follow the canonical rules (orientation, start vertex, no collinear
vertices, ordering), and where rasterio is installed the geometry equals the
union of rasterio.features.shapes' polygons of that label.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polygon_cases import POLYGON_CASES

from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.backends.cpu.outlines import trace
from ccl_cli.contract.outlines import Outlines, canonical, geojson, split_batch
from ccl_cli.contract.params import LabelParams

shapely = pytest.importorskip("shapely")
geometry = pytest.importorskip("shapely.geometry")


def traced(values: np.ndarray, params: LabelParams) -> tuple[np.ndarray, Outlines]:
    """(labels, outlines) of one image from the CPU backend."""
    result = CpuBackend(threads=1).label(values[np.newaxis], params)
    assert result.polygons is not None and len(result.polygons) == 1
    return result.labels[0], result.polygons[0]


def signed_area(ring: np.ndarray) -> int:
    """Twice the shoelace area of an open ring of (x, y) integers."""
    x, y = ring[:, 0].astype(np.int64), ring[:, 1].astype(np.int64)
    return int(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))


def yx(vertex: np.ndarray) -> tuple[int, int]:
    return int(vertex[1]), int(vertex[0])


def reference_geojson(outlines: Outlines) -> bytes:
    """The GeoJSON text by json.dumps of the nested lists (what the fast encoder must match)."""
    features = []
    for k in range(len(outlines)):
        polygons = [
            [[*ring.tolist(), ring[0].tolist()] for ring in polygon]
            for polygon in outlines.rings(k)
        ]
        geometry = (
            {"type": "Polygon", "coordinates": polygons[0]}
            if len(polygons) == 1
            else {"type": "MultiPolygon", "coordinates": polygons}
        )
        properties = {"label": k + 1, "area": int(outlines.areas[k])}
        features.append({"type": "Feature", "properties": properties, "geometry": geometry})
    collection = {"type": "FeatureCollection", "features": features}
    return json.dumps(collection, separators=(",", ":")).encode() + b"\n"


def assert_outlines_describe(labels: np.ndarray, outlines: Outlines) -> None:
    """Every rule of the canonical form, and the geometry against the pixels."""
    count = int(labels.max(initial=0))
    assert len(outlines) == count
    text = geojson(outlines)
    assert text == reference_geojson(outlines)
    collection = json.loads(text)
    assert collection["type"] == "FeatureCollection"
    assert len(collection["features"]) == count
    height, width = labels.shape
    rows, cols = np.indices(labels.shape)
    centres_x, centres_y = (cols + 0.5).ravel(), (rows + 0.5).ravel()
    for k, feature in enumerate(collection["features"]):
        label = k + 1
        mask = labels == label
        assert feature["properties"] == {"label": label, "area": int(mask.sum())}
        polygons = outlines.rings(k)
        kind = "Polygon" if len(polygons) == 1 else "MultiPolygon"
        assert feature["geometry"]["type"] == kind
        shape = geometry.shape(feature["geometry"])
        assert shape.is_valid, shapely.is_valid_reason(shape)
        assert shape.area == mask.sum()
        inside = shapely.contains_xy(shape, centres_x, centres_y).reshape(labels.shape)
        np.testing.assert_array_equal(inside, mask)
        exterior_starts = [yx(polygon[0][0]) for polygon in polygons]
        assert exterior_starts == sorted(exterior_starts)
        for polygon in polygons:
            hole_starts = [yx(ring[0]) for ring in polygon[1:]]
            assert hole_starts == sorted(hole_starts)
            for index, ring in enumerate(polygon):
                assert (signed_area(ring) > 0) == (index == 0)
                assert yx(ring[0]) == min(yx(v) for v in ring)
                before, after = np.roll(ring, 1, axis=0), np.roll(ring, -1, axis=0)
                turn = (ring - before)[:, 0] * (after - ring)[:, 1] - (ring - before)[:, 1] * (
                    after - ring
                )[:, 0]
                assert np.all(turn != 0), "collinear or repeated vertex"
                assert ring[:, 0].min() >= 0 and ring[:, 0].max() <= width
                assert ring[:, 1].min() >= 0 and ring[:, 1].max() <= height


def assert_matches_rasterio(labels: np.ndarray, outlines: Outlines) -> None:
    """Each label's geometry equals the union of GDAL's polygons of that value."""
    features = pytest.importorskip("rasterio.features")
    pieces: dict[int, list[object]] = {}
    for shape, value in features.shapes(labels.astype(np.int32), mask=labels > 0, connectivity=4):
        pieces.setdefault(int(value), []).append(geometry.shape(shape))
    assert sorted(pieces) == list(range(1, len(outlines) + 1))
    text = json.loads(geojson(outlines))
    for feature in text["features"]:
        ours = geometry.shape(feature["geometry"])
        theirs = shapely.union_all(pieces[feature["properties"]["label"]])
        assert ours.equals(theirs)


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("name", POLYGON_CASES)
def test_nasty_cases(name: str, connectivity: int) -> None:
    params = LabelParams(tau=0, connectivity=connectivity, polygons=True)
    labels, outlines = traced(POLYGON_CASES[name], params)
    assert_outlines_describe(labels, outlines)
    assert_matches_rasterio(labels, outlines)


@st.composite
def label_images(draw: st.DrawFn) -> tuple[np.ndarray, LabelParams]:
    """Small images of a few values (tau 0: labels touching labels) or binary masks."""
    height, width = draw(st.integers(1, 14)), draw(st.integers(1, 14))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = rng.integers(0, draw(st.integers(2, 4)), (height, width)).astype(np.uint8)
    tau = draw(st.sampled_from([None, 0]))
    params = LabelParams(
        tau=tau,
        connectivity=draw(st.sampled_from([4, 8])),
        min_area=draw(st.sampled_from([0, 0, 2, 4])),
        polygons=True,
    )
    return values, params


@pytest.mark.slow
@settings(max_examples=300)
@given(label_images())
def test_random_images(case: tuple[np.ndarray, LabelParams]) -> None:
    labels, outlines = traced(*case)
    assert_outlines_describe(labels, outlines)
    assert_matches_rasterio(labels, outlines)


def test_min_area_removed_components_have_no_feature() -> None:
    values = np.array([[1, 0, 1, 1], [0, 0, 1, 1], [1, 0, 0, 0]], np.uint8)
    labels, outlines = traced(values, LabelParams(connectivity=4, min_area=2, polygons=True))
    assert labels.max() == 1 and len(outlines) == 1
    assert json.loads(geojson(outlines))["features"][0]["geometry"] == {
        "type": "Polygon",
        "coordinates": [[[2, 0], [4, 0], [4, 2], [2, 2], [2, 0]]],
    }


def test_a_component_without_outline_is_an_error() -> None:
    """The batch check both backends' arrays pass: every component has a polygon."""
    labels = np.array([[1, 0, 2]], np.uint32)
    assert len(canonical(trace(labels), [2], 3)[0]) == 2
    with pytest.raises(AssertionError, match="every kept component"):
        canonical(trace(labels), [3], 3)
    vertices = np.zeros((4, 2), np.int32)
    offsets = np.array([0, 4], np.int64)
    missing = np.array([0, -1, 1], np.int64)  # the CUDA backend's mark of a feature never seen
    with pytest.raises(AssertionError, match="every kept component"):
        split_batch(
            vertices, offsets, np.array([0, 1]), missing, np.ones(2, np.int64), np.array([0, 2])
        )


def test_no_polygons_unless_asked() -> None:
    result = CpuBackend().label(np.ones((1, 3, 3), np.uint8), LabelParams())
    assert result.polygons is None


def test_geojson_text_with_wide_coordinates() -> None:
    values = np.zeros((3, 123457), np.uint8)
    values[1, [0, 9, 10, 99, 100, 999, 1000, 9999, 10000, 99999, 100000, 123456]] = 1
    values[0, 123450:] = 1
    labels, outlines = traced(values, LabelParams(connectivity=4, polygons=True))
    assert geojson(outlines) == reference_geojson(outlines)
    assert len(outlines) == int(labels.max()) == 7
